// Drives the operator console in a real headless Chromium (Debian's, through
// playwright-core), for tests/all/console.rs. Usage:
//   node console.mjs CONSOLE_URL OPERATOR_TOKEN SCREENSHOT_PATH
// then one command per line on stdin, one JSON answer per line on stdout:
//   approve | decline  — wait for the next card, report its text, click the button
//   inspect            — wait for the next card, report its text and whether any script
//                        it carried ran, save a screenshot, then decline it
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
await page.fill("#token", token);
await page.click("#signin-form button");
await page.waitForSelector("#app:not([hidden])");
await page.waitForSelector("#conn.on");
const say = (o) => process.stdout.write(JSON.stringify(o) + "\n");
say({ ready: true, title: await page.title() });

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

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  const cmd = line.trim();
  if (cmd === "quit") break;
  try {
    const c = await nextCard();
    const { card, ...info } = c;
    if (cmd === "inspect") {
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
