// The operator console: a strip of last-minute figures, pending approvals (answered
// here: once, for this run or always, at the tier chosen, or declined with a message)
// and the history of answered ones, the learned rules (revoked here), runs (each opens
// to its todos and calls) and call records (paged; each opens to its arguments, result,
// denials and approvals), all live from the server's event stream. Everything shown comes from text a model
// wrote, so it is only ever set as text (textContent), never parsed as HTML. The
// operator token lives in this page's memory and travels in the Authorization header
// of every request; it is never put in a URL or a cookie.
"use strict";

let token = "";
const $ = (id) => document.getElementById(id);
const pending = new Map(); // approval id -> { request, deadline, node }

function text(el, value) {
  el.textContent = value == null ? "" : String(value);
  return el;
}

async function api(path, options = {}) {
  const headers = Object.assign({ Authorization: "Bearer " + token }, options.headers || {});
  const resp = await fetch(path, Object.assign({}, options, { headers, credentials: "omit" }));
  if (resp.status === 401 || resp.status === 403) {
    const e = new Error("not signed in: " + resp.status);
    e.status = resp.status;
    throw e;
  }
  return resp;
}

// A time as a person reads it: the time of day for today, with the date otherwise.
function when(ms) {
  if (!ms) return "";
  const d = new Date(ms);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString() : d.toLocaleString();
}

function duration(ms) {
  if (ms == null) return "";
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 120000) return (ms / 1000).toFixed(1) + " s";
  return Math.round(ms / 60000) + " min";
}

function secondsLeft(deadline) {
  const s = Math.max(0, Math.round((deadline - Date.now()) / 1000));
  return s >= 120 ? Math.round(s / 60) + " min left" : s + " s left";
}

function showApproval(request, timeoutMs, waitedMs) {
  if (pending.has(request.id)) return;
  const node = $("card").content.firstElementChild.cloneNode(true);
  node.dataset.id = request.id;
  text(node.querySelector(".summary"), request.summary);
  text(node.querySelector(".detail"), request.detail);
  text(node.querySelector(".purpose"), request.purpose || "(none given)");
  text(node.querySelector(".tool"), request.tool);
  text(node.querySelector(".role"), request.role);
  text(node.querySelector(".run"), request.run);
  text(node.querySelector(".workspace"), request.workspace || "(not known)");
  text(node.querySelector(".asked-by"), request.asked_by || "(not known)");
  text(node.querySelector(".asked"), when(request.requested_at_ms));
  const deadline = Date.now() + Math.max(0, timeoutMs - (waitedMs || 0));
  const left = node.querySelector(".left");
  text(left, secondsLeft(deadline));
  setUpOffer(node, request);
  const q = (sel) => node.querySelector(sel);
  const no = () => {
    const message = q(".message").value.trim();
    return message ? { decision: "decline", message } : { decision: "decline" };
  };
  const run = "/api/runs/" + encodeURIComponent(request.run) + "/approvals";
  const one = "/api/approvals/" + encodeURIComponent(request.id);
  q(".approve").addEventListener("click", () => answer(node, one, chosen(node, request.offer)));
  q(".approve-full").addEventListener("click", () => answer(node, one, { decision: "approve", scope: "once", tier: "full" }));
  q(".decline").addEventListener("click", () => answer(node, one, no()));
  q(".approve-run").addEventListener("click", () => answer(node, run, { decision: "approve" }));
  q(".decline-run").addEventListener("click", () => answer(node, run, no()));
  pending.set(request.id, { request, deadline, node, left });
  renderApprovals();
}

/** Fill a card's answer controls from its offer; a card without one is a plain yes or no. */
function setUpOffer(node, request) {
  const o = request.offer;
  const q = (sel) => node.querySelector(sel);
  if (!o) {
    text(q(".grants"), "Approve lets this one request go ahead.");
    return;
  }
  q(".offer").hidden = false;
  for (const input of q(".scopes").querySelectorAll("input")) {
    input.name = "scope-" + request.id;
    input.parentElement.hidden = !o.scopes.includes(input.value);
  }
  q(".once-only").hidden = !o.once_only;
  text(q(".once-only"), o.once_only ? "Only once: " + o.once_only + "." : "");
  for (const p of o.prefixes || []) {
    const radio = document.createElement("input");
    radio.type = "radio";
    radio.name = "prefix-" + request.id;
    radio.value = String(p.words);
    radio.checked = p.words === o.prefix;
    const label = document.createElement("label");
    label.append(radio, " ", el("span", p.text));
    q(".prefixes").appendChild(label);
  }
  const hosts = o.hosts || [];
  const withHosts = o.tiers.includes("hosts");
  for (const input of q(".tiers").querySelectorAll("input[type=radio]")) {
    input.name = "tier-" + request.id;
    input.checked = input.value === (withHosts && hosts.length ? "hosts" : "confined");
  }
  q(".tier-hosts").hidden = !withHosts;
  // A card that is not a command's (a file a path rule protects) has no tiers.
  q(".tiers").hidden = o.tiers.length === 0;
  q(".hosts").value = hosts.join(", ");
  // Editing the hosts picks that tier.
  q(".hosts").addEventListener("focus", () => { q(".tier-hosts input[type=radio]").checked = true; describe(node, o); });
  q(".full").hidden = !o.tiers.includes("full");
  text(q(".full-text"), o.full);
  const update = () => describe(node, o);
  node.addEventListener("input", update);
  node.addEventListener("change", update);
  update();
}

/** The answer a card's choices make for Approve. */
function chosen(node, o) {
  if (!o) return { decision: "approve" };
  const picked = (sel) => (node.querySelector(sel + " input[type=radio]:checked") || {}).value;
  const body = { decision: "approve", scope: picked(".scopes") || "once" };
  if (o.tiers.length === 0) return body;
  body.tier = picked(".tiers") || "confined";
  if (body.tier === "hosts") {
    body.hosts = node.querySelector(".hosts").value.split(",").map((h) => h.trim()).filter(Boolean);
  }
  if (body.scope !== "once") body.prefix = Number(picked(".prefixes") || o.prefix);
  if (body.scope === "always") {
    body.every_workspace = node.querySelector(".every").checked;
    const hours = node.querySelector(".expiry").value.trim();
    if (hours) body.expires_in_ms = Math.round(Number(hours) * 3600000);
  }
  return body;
}

/** Say on the card what Approve grants, and show only the controls that apply. */
function describe(node, o) {
  const b = chosen(node, o);
  const command = o.tiers.length > 0;
  const tier = !command ? "" : " — " + (b.tier === "hosts" ? "confined + network to " + (b.hosts.join(", ") || "(no host named)") : "confined");
  let what = command ? "this command, once" : "this access, once";
  if (b.scope !== "once") {
    const p = (o.prefixes || []).find((p) => p.words === b.prefix);
    what = (b.scope === "run" ? "for the rest of this run: " : "always: ") + (p ? p.text : command ? "" : "this access");
    if (b.every_workspace) what += ", and in every other workspace";
    if (b.expires_in_ms) what += ", for " + node.querySelector(".expiry").value.trim() + " h";
  }
  text(node.querySelector(".grants"), "Approve grants " + what + tier + ".");
  node.querySelector(".rule").hidden = b.scope === "once" || !(o.prefixes || []).length;
  node.querySelector(".always-only").hidden = b.scope !== "always";
  const full = node.querySelector(".approve-full");
  full.disabled = b.scope !== "once";
  full.title = full.disabled ? "full access is for one command: choose once" : "";
}

function dropApproval(id) {
  pending.delete(id);
  renderApprovals();
}

// Cards stay in place as others come and go, so what is typed on one is kept.
function renderApprovals() {
  const box = $("approvals");
  const nodes = [...pending.values()].map((p) => p.node);
  for (const n of [...box.children]) if (!nodes.includes(n)) n.remove();
  for (const n of nodes) if (n.parentNode !== box) box.appendChild(n);
  const perRun = new Map();
  for (const p of pending.values()) perRun.set(p.request.run, (perRun.get(p.request.run) || 0) + 1);
  for (const p of pending.values()) p.node.querySelector(".run-actions").hidden = perRun.get(p.request.run) < 2;
  $("approvals-empty").hidden = pending.size > 0;
  text($("approvals-count"), pending.size);
}

/** Send an answer (one card's, or a run's); a refusal stays on the card, in words. */
async function answer(node, path, body) {
  const shown = node.querySelector(".card-error");
  text(shown, "");
  let resp;
  try {
    resp = await api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  } catch (e) {
    text(shown, "The answer was not sent (" + String(e.message || e) + ").");
    return;
  }
  if (resp.ok || resp.status === 409 || resp.status === 404) {
    const done = resp.ok ? await resp.json().catch(() => ({})) : {};
    for (const id of done.answered || [node.dataset.id]) pending.delete(id);
    renderApprovals();
    loadRules().catch(() => {});
    return;
  }
  const why = await resp.json().catch(() => ({}));
  text(shown, why.error || "The server refused this answer (" + resp.status + ").");
}

function cell(row, value, cls) {
  const td = document.createElement("td");
  if (cls) td.className = cls;
  row.appendChild(text(td, value));
  return td;
}

function el(tag, value, cls) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  return text(e, value);
}

// A panel of labelled values; each value is text, or JSON shown as text.
function showPanel(panel, title, rows) {
  const dl = document.createElement("dl");
  for (const [label, value] of rows) {
    dl.appendChild(el("dt", label));
    const dd = document.createElement("dd");
    const shown = typeof value === "string" ? value : JSON.stringify(value, null, 2);
    dd.appendChild(el(typeof value === "string" && !value.includes("\n") ? "span" : "pre", shown));
    dl.appendChild(dd);
  }
  const close = el("button", "Close", "close");
  close.type = "button";
  close.addEventListener("click", () => { panel.hidden = true; });
  panel.replaceChildren(el("h3", title), dl, close);
  panel.hidden = false;
  panel.scrollIntoView({ block: "nearest" });
}

async function openRun(id) {
  const resp = await api("/api/runs/" + encodeURIComponent(id));
  if (!resp.ok) return showPanel($("run-detail"), "Run " + id, [["", "This run is no longer known to the server."]]);
  const r = await resp.json();
  const todos = (r.todos || []).map((t) => "[" + (t.status || "") + "] " + (t.content || t.title || JSON.stringify(t))).join("\n");
  const calls = (r.recent_calls || []).map((c) => when(c.started_at_ms) + "  " + c.tool + "  " + c.status + "  " + c.preview).join("\n");
  showPanel($("run-detail"), "Run " + r.id, [
    ["status", r.status + (r.activity ? ": " + r.activity : "")],
    ["role", r.role],
    ["calls", String(r.calls)],
    ["todos", todos || "(none)"],
    ["recent calls", calls || "(none)"],
  ]);
}

async function openRecord(id) {
  const resp = await api("/api/records/" + encodeURIComponent(id));
  if (!resp.ok) return showPanel($("record-detail"), "Call " + id, [["", "This record is not in the audit log."]]);
  const r = await resp.json();
  const approvals = (r.approvals || []).map((a) => a.decision + (a.answered_by ? " by " + a.answered_by : "") + " after " + duration(a.waited_ms)).join("\n");
  showPanel($("record-detail"), r.tool + " · " + r.status, [
    ["when", when(r.started_at_ms) + " · " + duration(r.duration_ms)],
    ["run", r.run + " (" + r.role + ")"],
    ["workspace", r.workspace || ""],
    ["arguments", r.arguments],
    ["result", r.result],
    ["denials", r.denials && r.denials.length ? r.denials : "(none)"],
    ["approvals", approvals || "(none)"],
  ]);
}

function runRow(r, idle) {
  const tr = document.createElement("tr");
  tr.className = "clickable";
  tr.dataset.id = r.id;
  cell(tr, r.id, "id");
  if (!idle) cell(tr, r.status, "nowrap status-" + (r.status === "idle" ? "ok" : "running"));
  cell(tr, r.role);
  cell(tr, r.workspace || "");
  cell(tr, r.calls, "nowrap");
  cell(tr, idle ? when(r.last_ms) : r.activity || "", idle ? "nowrap" : "");
  tr.addEventListener("click", () => openRun(r.id).catch(() => {}));
  return tr;
}

async function loadRuns() {
  const runs = await (await api("/api/runs")).json();
  const busy = runs.filter((r) => r.status !== "idle");
  const idle = runs.filter((r) => r.status === "idle");
  $("runs").querySelector("tbody").replaceChildren(...busy.map((r) => runRow(r, false)));
  $("runs").hidden = busy.length === 0;
  $("runs-empty").hidden = busy.length > 0;
  $("idle-runs").querySelector("tbody").replaceChildren(...idle.map((r) => runRow(r, true)));
  text($("idle-count"), idle.length);
  $("idle").hidden = idle.length === 0;
}

function recordRow(r) {
  const tr = document.createElement("tr");
  tr.className = "clickable";
  tr.dataset.id = r.id;
  cell(tr, when(r.started_at_ms), "nowrap");
  cell(tr, r.tool);
  cell(tr, r.status, "nowrap status-" + r.status);
  cell(tr, Math.round(r.duration_ms), "nowrap");
  cell(tr, r.run, "id");
  cell(tr, r.preview, "preview");
  tr.addEventListener("click", () => openRecord(r.id).catch(() => {}));
  return tr;
}

let olderThan = null; // the next page's `before`, when there is one
let pages = 1; // pages shown, so a redraw keeps what "Older" added

async function fetchRecords(before) {
  const q = new URLSearchParams({ limit: "50" });
  for (const [k, id] of [["tool", "f-tool"], ["status", "f-status"], ["run", "f-run"]]) {
    if ($(id).value) q.set(k, $(id).value);
  }
  if (before) q.set("before", String(before));
  return (await api("/api/records?" + q)).json();
}

async function loadRecords() {
  let recs = await fetchRecords(null);
  const rows = recs.records.map(recordRow);
  for (let i = 1; i < pages && recs.next_before; i++) {
    recs = await fetchRecords(recs.next_before);
    rows.push(...recs.records.map(recordRow));
  }
  $("records").querySelector("tbody").replaceChildren(...rows);
  olderThan = recs.next_before;
  $("older").hidden = !olderThan;
}

async function loadOlder() {
  if (!olderThan) return;
  const recs = await fetchRecords(olderThan);
  $("records").querySelector("tbody").append(...recs.records.map(recordRow));
  pages += 1;
  olderThan = recs.next_before;
  $("older").hidden = !olderThan;
}

function ruleRow(r) {
  const tr = document.createElement("tr");
  tr.dataset.id = r.id;
  cell(tr, r.text);
  cell(tr, (r.hosts || []).join(", ") || "no network");
  cell(tr, r.saved_by);
  cell(tr, r.card, "id");
  cell(tr, when(r.saved_at_ms), "nowrap");
  cell(tr, r.expires_at_ms ? when(r.expires_at_ms) : "never", "nowrap");
  cell(tr, r.matches || 0, "nowrap");
  cell(tr, r.last_match_ms ? when(r.last_match_ms) : "never", "nowrap");
  const revoke = el("button", "Revoke", "revoke");
  revoke.type = "button";
  revoke.addEventListener("click", () =>
    api("/api/rules/" + encodeURIComponent(r.id), { method: "DELETE" }).then(loadRules).catch(() => {}));
  cell(tr, "").appendChild(revoke);
  return tr;
}

async function loadRules() {
  const rules = (await (await api("/api/rules")).json()).rules;
  $("rules").querySelector("tbody").replaceChildren(...rules.map(ruleRow));
  $("rules").hidden = rules.length === 0;
  $("rules-empty").hidden = rules.length > 0;
  text($("rules-count"), rules.length);
}

async function loadHistory() {
  const q = new URLSearchParams({ limit: "50" });
  if ($("h-decision").value) q.set("decision", $("h-decision").value);
  const h = await (await api("/api/approvals/history?" + q)).json();
  $("history").querySelector("tbody").replaceChildren(
    ...h.approvals.map((a) => {
      const tr = document.createElement("tr");
      tr.dataset.id = a.request.id;
      cell(tr, when(a.answered_at_ms), "nowrap");
      cell(tr, a.decision, "nowrap decision-" + a.decision);
      cell(tr, a.answered_by || "(nobody)");
      cell(tr, duration(a.waited_ms), "nowrap");
      cell(tr, a.request.summary + " · " + a.request.tool, "preview");
      cell(tr, a.request.asked_by || "");
      return tr;
    })
  );
  $("history-empty").hidden = h.approvals.length > 0;
}

async function loadHealth() {
  const h = await (await api("/health")).json();
  text($("health"), "v" + h.version + " · up " + duration(h.uptime_s * 1000) + " · audit log " + h.audit_log);
  const m = h.last_minute || {};
  text($("m-calls"), m.calls ?? 0);
  text($("m-errors"), m.errors ?? 0);
  $("m-errors").classList.toggle("bad", (m.errors ?? 0) > 0);
  text($("m-p50"), m.p50_ms == null ? "–" : duration(m.p50_ms));
  text($("m-pending"), h.pendingApprovals);
}

async function loadApprovals() {
  const list = await (await api("/api/approvals")).json();
  const live = new Set(list.map((a) => a.request.id));
  for (const id of [...pending.keys()]) if (!live.has(id)) pending.delete(id);
  for (const a of list) showApproval(a.request, a.timeout_ms, a.waited_ms);
  renderApprovals();
}

function setConnected(on) {
  const c = $("conn");
  c.className = "conn " + (on ? "on" : "off");
  text(c, on ? "live" : "offline");
}

// The server-sent event stream, read with fetch so the token can travel in a header.
async function follow() {
  for (;;) {
    try {
      const resp = await api("/api/events", { headers: { Accept: "text/event-stream" } });
      setConnected(true);
      await loadApprovals();
      const reader = resp.body.getReader();
      const decoder = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let at;
        while ((at = buf.indexOf("\n\n")) >= 0) {
          const chunk = buf.slice(0, at);
          buf = buf.slice(at + 2);
          const data = chunk.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5)).join("\n");
          if (data) onEvent(JSON.parse(data));
        }
      }
    } catch (e) {
      if (String(e).includes("not signed in")) return signOut();
    }
    setConnected(false);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

let refresh = null;
function onEvent(ev) {
  if (ev.event === "approval_requested") showApproval(ev.request, ev.timeout_ms, 0);
  if (ev.event === "approval_resolved") dropApproval(ev.id);
  // Calls and runs change often: redraw their tables at most every 300 ms.
  if (!refresh) {
    refresh = setTimeout(() => {
      refresh = null;
      loadRuns().catch(() => {});
      loadRecords().catch(() => {});
      loadHistory().catch(() => {});
      loadRules().catch(() => {});
      loadHealth().catch(() => {});
    }, 300);
  }
}

function signOut() {
  token = "";
  $("app").hidden = true;
  $("signin").hidden = false;
  setConnected(false);
}

async function signIn(candidate) {
  token = candidate;
  try {
    await loadHealth();
  } catch (e) {
    token = "";
    const why =
      e.status === 401
        ? "This server does not know that token. Check it, or make one with `cheng token add --operator`."
        : e.status === 403
          ? "That is an agent's token: it calls tools at /mcp but cannot operate. Sign in with an operator token (`cheng token add --operator`)."
          : "The server did not answer (" + String(e.message || e) + ").";
    text($("signin-error"), why);
    return;
  }
  text($("signin-error"), "");
  $("signin").hidden = true;
  $("app").hidden = false;
  loadRules().catch(() => {});
  await Promise.all([loadRuns(), loadRecords(), loadHistory(), loadApprovals()]);
  follow();
}

document.addEventListener("DOMContentLoaded", () => {
  $("signin-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const t = $("token").value.trim();
    $("token").value = "";
    signIn(t);
  });
  $("filter").addEventListener("submit", (e) => {
    e.preventDefault();
    pages = 1;
    loadRecords();
  });
  $("older").addEventListener("click", () => loadOlder().catch(() => {}));
  $("h-decision").addEventListener("change", () => loadHistory().catch(() => {}));
  setInterval(() => {
    for (const p of pending.values()) text(p.left, secondsLeft(p.deadline));
    if (token) loadHealth().catch(() => {});
  }, 1000);
});
