// Drives the operator console in a real headless Chromium (Debian's, through
// playwright-core), for tests/all/console.rs. Usage:
//   node console.mjs CONSOLE_URL OPERATOR_TOKEN SCREENSHOT_PATH   (AGENT_TOKEN in the environment)
// It first signs in with a token the server does not know and with the agent's token,
// reporting each message, then with the operator's. Then one command per line on stdin,
// one JSON answer per line on stdout:
//   approve | decline  — wait for the next card, report its text, click the button
//   inspect            — wait for the next card, report its text and whether any script
//                        it carried ran, save a screenshot, then decline it
//   review             — report the approvals history and the runs tables' rows (busy
//                        and idle), open the newest ok record of
//                        workspace_shell and report its detail, then at 1280 and 420 px
//                        save a screenshot (SCREENSHOT_PATH with -1280/-420) and report
//                        the layout: horizontal overflow, the tallest one-line cell
//   always             — wait for the next card, report its answer controls (scopes, rule
//                        choices, what Approve grants, the full-access button), choose
//                        "always", try an expiry past a year and report the refusal shown
//                        on the card, clear it, approve, then report the Learned rules rows
//   revoke             — wait for the learned rule to show a match, report its row, click
//                        Revoke and report the panel once it is empty
//   decline-message M  — wait for the next card, type M as the message, decline
//   approve-run        — wait for a card offering "Approve all of this run", report how
//                        many cards are pending, click it, wait until none is
//   quit
import readline from "node:readline";
import { pathToFileURL } from "node:url";

// ES modules ignore NODE_PATH: the test names where playwright-core was installed.
const { chromium } = await import(process.env.PLAYWRIGHT_CORE ? pathToFileURL(process.env.PLAYWRIGHT_CORE).href : "playwright-core");

const [url, token, shot] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const page = await browser.newPage();
const errors = [];
page.on("pageerror", (e) => errors.push(String(e)));
page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
await page.goto(url);
async function refused(candidate) {
  await page.evaluate(() => { document.getElementById("signin-error").textContent = ""; });
  await page.fill("#token", candidate);
  await page.click("#signin-form button");
  await page.waitForFunction(() => document.getElementById("signin-error").textContent !== "");
  return page.textContent("#signin-error");
}
const unknown = await refused("cheng_not-a-token-this-server-knows");
const agent = process.env.AGENT_TOKEN ? await refused(process.env.AGENT_TOKEN) : null;
await page.fill("#token", token);
await page.click("#signin-form button");
await page.waitForSelector("#app:not([hidden])");
await page.waitForSelector("#conn.on");
const say = (o) => process.stdout.write(JSON.stringify(o) + "\n");
say({ ready: true, title: await page.title(), signin: { unknown, agent } });

// What an operator sees at this width: the screenshot, and whether anything overflows
// the page sideways or a one-line cell (a status, a time, a count) wraps.
async function layout(width) {
  await page.setViewportSize({ width, height: 900 });
  await page.waitForTimeout(200);
  await page.screenshot({ path: shot.replace(/\.png$/, "") + "-" + width + ".png", fullPage: true });
  return page.evaluate(() => {
    const line = parseFloat(getComputedStyle(document.body).lineHeight) || 20;
    // The height of each one-line cell's text (a table cell is as tall as its row).
    const cells = [...document.querySelectorAll("td.nowrap, .card .left, #conn, .strip li")];
    const height = (c) => { const r = document.createRange(); r.selectNodeContents(c); return r.getBoundingClientRect().height; };
    const tallest = Math.max(0, ...cells.map(height));
    return { overflow: document.documentElement.scrollWidth > window.innerWidth + 1, tallest_line_ratio: tallest / line };
  });
}

async function review() {
  await page.waitForFunction(() => document.querySelectorAll("#history tbody tr").length >= 3, null, { timeout: 15000 });
  const history = await page.$$eval("#history tbody tr", (rows) =>
    rows.map((r) => [...r.children].map((c) => c.textContent)));
  await page.waitForFunction(() => document.querySelectorAll("#runs tbody tr, #idle-runs tbody tr").length >= 1, null,
    { timeout: 15000 });
  const runs = await page.$$eval("#runs tbody tr, #idle-runs tbody tr", (rows) =>
    rows.map((r) => [...r.children].map((c) => c.textContent)));
  const row = await page.waitForFunction(() => [...document.querySelectorAll("#records tbody tr.clickable")].find(
    (r) => r.children[1].textContent === "workspace_shell" && r.children[2].textContent === "ok"), null, { timeout: 15000 });
  await row.asElement().click();
  await page.waitForSelector("#record-detail:not([hidden])");
  const detail = await page.textContent("#record-detail");
  const strip = await page.textContent("#strip");
  return { history, runs, detail, strip, wide: await layout(1280), narrow: await layout(420) };
}

const seen = new Set();
async function nextCard() {
  const handle = await page.waitForFunction(
    (done) => [...document.querySelectorAll("#approvals .card")].find((c) => !done.includes(c.dataset.id)),
    [...seen], { timeout: 30000 });
  const card = handle.asElement();
  const id = await card.getAttribute("data-id");
  seen.add(id);
  const field = async (sel) => (await card.$(sel)).textContent();
  return { card, id, summary: await field(".summary"), detail: await field(".detail"), purpose: await field(".purpose"),
           images: (await card.$$("img")).length };
}

const rulesRows = () => page.$$eval("#rules tbody tr", (rows) => rows.map((r) => [...r.children].map((c) => c.textContent)));

// "always" on the next card, after a refused answer (an expiry past a year).
async function always() {
  const c = await nextCard();
  const { card, ...info } = c;
  const grants = async () => (await card.$(".grants")).textContent();
  const full = await card.$(".approve-full");
  info.scopes = await card.$$eval(".scopes label:not([hidden])", (ls) => ls.map((l) => l.textContent.trim()));
  info.once_only = await (await card.$(".once-only")).textContent();
  info.grants_plain = await grants();
  info.full_text = await (await card.$(".full-text")).textContent();
  info.full_enabled_once = await full.isEnabled();
  info.rule_hidden_once = await (await card.$(".rule")).isHidden();
  await (await card.$('.scopes input[value="always"]')).check();
  info.prefixes = await card.$$eval(".prefixes label", (ls) =>
    ls.map((l) => ({ text: l.textContent.trim(), checked: l.querySelector("input").checked })));
  info.rule_visible = await (await card.$(".rule")).isVisible();
  info.every_visible = await (await card.$(".every")).isVisible();
  info.full_disabled_always = await full.isDisabled();
  info.grants_always = await grants();
  const expiry = await card.$(".expiry");
  await expiry.fill("1000000");
  await (await card.$(".approve")).click();
  await page.waitForFunction((c) => c.querySelector(".card-error").textContent !== "", card, { timeout: 15000 });
  info.refused = await (await card.$(".card-error")).textContent();
  info.still_pending = await card.isVisible();
  await expiry.fill("");
  await (await card.$(".approve")).click();
  await page.waitForFunction((id) => !document.querySelector(`#approvals .card[data-id="${id}"]`), c.id);
  await page.waitForFunction(() => document.querySelectorAll("#rules tbody tr").length >= 1, null, { timeout: 15000 });
  info.rules = await rulesRows();
  return info;
}

// Revoke the one learned rule once it shows it admitted a command.
async function revoke() {
  await page.waitForFunction(() => {
    const row = document.querySelector("#rules tbody tr");
    return row && row.children[6].textContent !== "0";
  }, null, { timeout: 15000 });
  const before = await rulesRows();
  await page.click("#rules tbody tr .revoke");
  await page.waitForFunction(() => document.querySelectorAll("#rules tbody tr").length === 0, null, { timeout: 15000 });
  return { before, after: await rulesRows(), empty: await page.isVisible("#rules-empty") };
}

async function approveRun() {
  const handle = await page.waitForFunction(() => [...document.querySelectorAll("#approvals .card")].find(
    (c) => !c.querySelector(".run-actions").hidden), null, { timeout: 30000 });
  const card = handle.asElement();
  const ids = await page.$$eval("#approvals .card", (cs) => cs.map((c) => c.dataset.id));
  for (const id of ids) seen.add(id);
  await (await card.$(".approve-run")).click();
  await page.waitForFunction(() => document.querySelectorAll("#approvals .card").length === 0, null, { timeout: 15000 });
  return { pending: ids.length };
}

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  const cmd = line.trim();
  if (cmd === "quit") break;
  if (cmd === "review") {
    try {
      say(Object.assign(await review(), { errors: errors.splice(0) }));
    } catch (e) {
      say({ error: String(e) });
    }
    continue;
  }
  const more = { always, revoke, "approve-run": approveRun }[cmd];
  if (more) {
    try {
      say(Object.assign(await more(), { errors: errors.splice(0) }));
    } catch (e) {
      say({ error: String(e), errors: errors.splice(0) });
    }
    continue;
  }
  try {
    const c = await nextCard();
    const { card, ...info } = c;
    if (cmd.startsWith("decline-message ")) {
      await (await card.$(".message")).fill(cmd.slice("decline-message ".length));
      await (await card.$(".decline")).click();
    } else if (cmd === "inspect") {
      info.pwned = await page.evaluate(() => window.__pwned === 1);
      // Let the tables catch up with the events (they redraw at most every 300 ms).
      await page.waitForTimeout(700);
      await page.screenshot({ path: shot, fullPage: true });
      await (await card.$(".decline")).click();
    } else {
      await (await card.$(cmd === "approve" ? ".approve" : ".decline")).click();
    }
    await page.waitForFunction((id) => !document.querySelector(`#approvals .card[data-id="${id}"]`), c.id);
    info.errors = errors.splice(0);
    say(info);
  } catch (e) {
    say({ error: String(e) });
  }
}
await browser.close();
// The stdin reader would keep Node alive after the last command.
process.exit(0);
