// The storage-error badge in headless Chromium against a real `rackprof serve` whose database
// really fails: it lives on a small tmpfs of its own, which the test fills until SQLite's commits
// fail with "database or disk is full", then empties again. The Rack and the Live view must show
// the badge with its text (and SQLite's words in its title) while commits fail, and lose it
// once they succeed again. Mounting needs root (CAP_SYS_ADMIN): without it, a visible SKIP
// (exit 77); likewise without Chromium, node_modules or the built dashboard.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { eventually, launchBrowser, startDaemon } from "./daemon.mjs";
import { artifacts, chromium, requireBrowser, serverConfig, skipper, screenshot } from "./harness.mjs";

const skip = skipper("storage badge browser test");
requireBrowser(skip);
if (process.getuid?.() !== 0) skip("mounting a small tmpfs for the database needs root (CAP_SYS_ADMIN)");

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rackprof-storage-badge-"));
const fsDir = path.join(dir, "fs");
fs.mkdirSync(fsDir);
try {
  execFileSync("mount", ["-t", "tmpfs", "-o", "size=32m", "tmpfs", fsDir], { stdio: "pipe" });
} catch (e) {
  fs.rmSync(dir, { recursive: true, force: true });
  skip(`cannot mount a tmpfs here (${String(e.stderr ?? e).trim()})`);
}

const { chromium: playwright } = await import("playwright-core");
const filler = path.join(fsDir, "filler");
let daemon;
let browser;

// Writes a file until its file system is full (ENOSPC): real disk full, nothing simulated.
function fillFileSystem() {
  const fd = fs.openSync(filler, "w");
  const block = Buffer.alloc(1 << 16, "f");
  let written = 0;
  try {
    for (;;) written += fs.writeSync(fd, block);
  } catch (e) {
    if (e.code !== "ENOSPC") throw e;
  } finally {
    fs.closeSync(fd);
  }
  return written;
}

async function board(name) {
  const r = await fetch(`${daemon.base}/api/v1/boards/${name}`);
  return r.json();
}

before(async () => {
  fs.mkdirSync(artifacts, { recursive: true });
  daemon = await startDaemon(
    dir,
    serverConfig(`${fsDir}/rack.db`) +
      `[[boards]]\nname = "filling"\nlink = "sim://deterministic?rate=40000"\n`,
    (log) => log.includes("[filling] session"),
  );
  browser = await launchBrowser(playwright, chromium, dir);
});

after(async () => {
  await browser?.close();
  await daemon?.stop();
  try {
    execFileSync("umount", ["-l", fsDir]);
  } catch {
    // already gone
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

test("a full disk shows the storage-error badge on the Rack and the Live view; it goes when space returns", async () => {
  const page = await browser.newPage();
  const errors = [];
  // With the URL: "Failed to load resource: 404" alone does not say which.
  page.on("console", (m) => m.type() === "error" && errors.push(`${m.text()} ${m.location()?.url ?? ""}`.trim()));
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(daemon.base + "/");
  const row = 'tr[data-board="filling"]';
  const badge = `${row} [data-storage="storage_error"]`;
  await page.waitForSelector(row);
  await page.waitForFunction(() => /^[1-9][0-9,]*$/.test(document.querySelector('tr[data-board="filling"] [data-col="rate"]')?.textContent ?? ""), null, { timeout: 10000 });
  assert.equal(await page.locator(badge).count(), 0, "no badge while storage is fine");

  // The disk fills up for real: the daemon's commits fail, the API says so, the page shows it.
  assert.ok(fillFileSystem() > 0);
  await eventually(async () => (await board("filling")).storage_state === "storage_error", 10000, "the API to report storage_error");
  await page.waitForSelector(badge, { timeout: 5000 });
  assert.match(await page.textContent(badge), /storage error: data is being lost/);
  assert.match(await page.getAttribute(badge, "title"), /full/);
  // The row's error column carries SQLite's words too.
  assert.match(await page.textContent(row), /full/);
  await screenshot(page, "storage-error-rack");

  // The Live view of the capturing session shows it as well.
  const session = (await board("filling")).session;
  const live = await browser.newPage();
  live.on("pageerror", (e) => errors.push(String(e)));
  await live.goto(`${daemon.base}/live/${session}`);
  await live.waitForSelector('#storage-state [data-storage="storage_error"]', { timeout: 5000 });
  assert.match(await live.textContent("#storage-state"), /storage error: data is being lost/);
  await screenshot(live, "storage-error-live");
  await eventually(async () => (await board("filling")).counters.records_lost_storage > 0, 5000, "records counted lost");

  // Space returns: commits succeed again, and the badge goes away on both pages.
  fs.rmSync(filler);
  await eventually(async () => (await board("filling")).storage_state === "ok", 10000, "the API to report ok again");
  await page.waitForSelector(badge, { state: "detached", timeout: 5000 });
  await live.waitForSelector('#storage-state [data-storage="storage_error"]', { state: "detached", timeout: 5000 });
  await screenshot(page, "storage-recovered-rack");
  await live.close();
  await page.close();
  // A failed fetch while storage fails would be a console error too: the page must take it.
  assert.deepEqual(errors, []);
});
