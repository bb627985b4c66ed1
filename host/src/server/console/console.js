// The operator console: pending approvals (answered here), runs, recent call records,
// all live from the server's event stream. Everything shown comes from text a model
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
    throw new Error("not signed in: " + resp.status);
  }
  return resp;
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
  text(node.querySelector(".asked"), request.requested_at_ms ? new Date(request.requested_at_ms).toLocaleString() : "");
  const deadline = Date.now() + Math.max(0, timeoutMs - (waitedMs || 0));
  const left = node.querySelector(".left");
  text(left, secondsLeft(deadline));
  node.querySelector(".approve").addEventListener("click", () => answer(request.id, "approve"));
  node.querySelector(".decline").addEventListener("click", () => answer(request.id, "decline"));
  pending.set(request.id, { request, deadline, node, left });
  renderApprovals();
}

function dropApproval(id) {
  pending.delete(id);
  renderApprovals();
}

function renderApprovals() {
  const box = $("approvals");
  box.replaceChildren(...[...pending.values()].map((p) => p.node));
  if (pending.size === 0) {
    const p = document.createElement("p");
    p.className = "empty";
    box.replaceChildren(text(p, "Nothing waits for an answer."));
  }
  text($("approvals-count"), pending.size);
}

async function answer(id, decision) {
  const resp = await api("/api/approvals/" + encodeURIComponent(id), {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ decision }),
  });
  if (resp.ok || resp.status === 409) dropApproval(id);
}

function cell(row, value, cls) {
  const td = document.createElement("td");
  if (cls) td.className = cls;
  row.appendChild(text(td, value));
  return td;
}

async function loadRuns() {
  const runs = await (await api("/api/runs")).json();
  const body = $("runs").querySelector("tbody");
  body.replaceChildren(
    ...runs.map((r) => {
      const tr = document.createElement("tr");
      cell(tr, r.id);
      cell(tr, r.status, "status-" + (r.status === "idle" ? "ok" : "running"));
      cell(tr, r.role);
      cell(tr, r.workspace || "");
      cell(tr, r.calls);
      cell(tr, r.activity || "");
      return tr;
    })
  );
}

async function loadRecords() {
  const q = new URLSearchParams({ limit: "50" });
  for (const [k, id] of [["tool", "f-tool"], ["status", "f-status"], ["run", "f-run"]]) {
    if ($(id).value) q.set(k, $(id).value);
  }
  const recs = await (await api("/api/records?" + q)).json();
  const body = $("records").querySelector("tbody");
  body.replaceChildren(
    ...recs.records.map((r) => {
      const tr = document.createElement("tr");
      cell(tr, new Date(r.started_at_ms).toLocaleTimeString());
      cell(tr, r.tool);
      cell(tr, r.status, "status-" + r.status);
      cell(tr, Math.round(r.duration_ms));
      cell(tr, r.run);
      cell(tr, r.preview, "preview");
      return tr;
    })
  );
}

async function loadHealth() {
  const h = await (await api("/health")).json();
  text($("health"), "v" + h.version + " · up " + Math.round(h.uptime_s) + " s · " + h.activeRuns + " active runs · audit log " + h.audit_log);
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
    text($("signin-error"), "That token was not accepted.");
    return;
  }
  text($("signin-error"), "");
  $("signin").hidden = true;
  $("app").hidden = false;
  await Promise.all([loadRuns(), loadRecords(), loadApprovals()]);
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
    loadRecords();
  });
  setInterval(() => {
    for (const p of pending.values()) text(p.left, secondsLeft(p.deadline));
    if (token) loadHealth().catch(() => {});
  }, 1000);
});
