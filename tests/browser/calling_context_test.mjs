// The measured calling contexts on a session's profile page, in headless Chromium (Debian's)
// driven by playwright-core, against a real `rackprof serve`. The capture is ITM written here:
// orbuculum's orbstat enter/exit words (port 30, 24-bit cycle stamps) of the thesis' fig. 4,
// fast() -> doSomething() 100 cycles and slow() -> doSomething() 900, for the firmware of
// `rackprof simulate --model conflation` (its functions' addresses read with arm-none-eabi-nm).
// Checks: the icicle of the measured tree has doSomething under fast and under slow, sized
// 10 % and 90 % of doSomething's cycles; the table of caller-attributed arcs shows measured
// 10.0 % / 90.0 % beside gprof's 50.0 % / 50.0 %, both rows highlighted; a session without
// entry/exit events says it has no tree. Skips (exit 77) when Chromium, node_modules, the built
// dashboard or arm-none-eabi-nm are missing.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { launchBrowser, rackprofIn, startDaemon } from "./daemon.mjs";
import { artifacts, chromium, downloadHrefs, openPage, requireBrowser, serverConfig, skipper, tearDown, screenshot } from "./harness.mjs";

const nm = "/usr/bin/arm-none-eabi-nm";

const skip = skipper("calling-context browser tests");
requireBrowser(skip);
if (!fs.existsSync(nm)) skip(`${nm} is missing (binutils-arm-none-eabi)`);

const { chromium: playwright } = await import("playwright-core");

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rackprof-cct-"));
const rackprof = rackprofIn(dir);

// ITM: a synchronization packet, then 4-byte software packets on port 30 (header port << 3 | 3).
function orbstatCapture(fn) {
  const bytes = [0, 0, 0, 0, 0, 0x80];
  let stamp = 0xfffff0; // wraps at 2^24 in the first pass
  const word = (w) => bytes.push(30 << 3 | 3, w & 0xff, (w >>> 8) & 0xff, (w >>> 16) & 0xff, (w >>> 24) & 0xff);
  const event = (kind, site, callee) => {
    word(((kind << 28) | (stamp & 0xffffff)) >>> 0);
    word(site | 1);
    word(callee | 1);
  };
  const later = (cycles) => (stamp += cycles);
  event(4, fn.main + 0x10, fn.main);
  for (let pass = 0; pass < 3; ++pass) {
    later(10), event(4, fn.main + 0x10, fn.fast);
    later(10), event(4, fn.fast + 0x10, fn.doSomething);
    later(100), event(5, fn.fast + 0x10, fn.doSomething);
    later(5), event(5, fn.main + 0x10, fn.fast);
    later(5), event(4, fn.main + 0x20, fn.slow);
    later(10), event(4, fn.slow + 0x10, fn.doSomething);
    later(900), event(5, fn.slow + 0x10, fn.doSomething);
    later(5), event(5, fn.main + 0x20, fn.slow);
  }
  return Buffer.from(bytes);
}

let daemon;
let base;
let browser;
let withTree;
let withoutTree;

const api = (method, url, body) => daemon.api(method, url, body);

before(async () => {
  fs.mkdirSync(artifacts, { recursive: true });
  rackprof("simulate", "--model", "conflation", "--iterations", "2", "-o", "plain.bin", "--write-elf", "fig4.elf");
  const fn = {};
  for (const line of execFileSync(nm, [path.join(dir, "fig4.elf")]).toString().split("\n")) {
    const [address, , name] = line.trim().split(/\s+/);
    if (name) fn[name] = parseInt(address, 16);
  }
  for (const name of ["main", "fast", "slow", "doSomething"]) assert.ok(fn[name] !== undefined, `${name} in the ELF`);
  daemon = await startDaemon(dir, serverConfig(`${dir}/rack.db`));
  base = daemon.base;
  const firmware = await api("PUT", "/api/v1/firmware", fs.readFileSync(path.join(dir, "fig4.elf")));
  withTree = (await api("POST", `/api/v1/sessions/import?format=bin&protocol=itm&orbstat_port=30&board=fig4&firmware=${firmware.id}`, orbstatCapture(fn))).id;
  withoutTree = (await api("POST", `/api/v1/sessions/import?format=bin&board=plain&firmware=${firmware.id}`, fs.readFileSync(path.join(dir, "plain.bin")))).id;
  browser = await launchBrowser(playwright, chromium, dir);
});

after(() => tearDown(browser, daemon, dir));

const open = (url) => openPage(browser, base, url);

test("the measured icicle and the caller-attributed arcs: 10 %/90 % against gprof's 50/50", async () => {
  const { page, errors } = await open(`/sessions/${withTree}`);
  await page.waitForSelector("#cct-flame-graph svg g.frame");
  await page.waitForSelector("#cct-arcs-table tbody tr");
  // The icicle: doSomething under fast and under slow, widths in the measured ratio 1 : 9.
  const widths = await page.$$eval("#cct-flame-graph svg g.frame", (frames) =>
    frames
      .filter((g) => g.getAttribute("name")?.startsWith("doSomething"))
      .map((g) => Number(g.querySelector("rect")?.getAttribute("width") ?? 0)),
  );
  assert.equal(widths.length, 2, `doSomething drawn under fast and under slow: ${widths}`);
  widths.sort((a, b) => a - b);
  assert.ok(Math.abs(widths[1] / widths[0] - 9) < 0.2, `measured widths 1 : 9, got ${widths}`);
  // The table: measured vs gprof's estimate, the misattribution highlighted.
  const rows = await page.$$eval("#cct-arcs-table tbody tr", (trs) =>
    trs.map((tr) => ({ cells: [...tr.querySelectorAll("td")].map((td) => td.textContent.trim()), off: tr.classList.contains("misattributed") })),
  );
  const row = (caller) => rows.find((r) => r.cells[0] === caller && r.cells[1].startsWith("doSomething"));
  assert.ok(row("fast") && row("slow"), JSON.stringify(rows));
  assert.match(row("fast").cells[3], /\(10\.0 %\)/);
  assert.match(row("slow").cells[3], /\(90\.0 %\)/);
  assert.match(row("fast").cells[4], /\(50\.0 %\)/);
  assert.match(row("slow").cells[4], /\(50\.0 %\)/);
  assert.ok(row("fast").off && row("slow").off, "both arcs highlighted");
  assert.match(row("fast").cells[5], /^−1,200$/); // 3 passes × (100 − 500) cycles
  // With a tree, the measured exports are offered too, each answering 200.
  const links = await downloadHrefs(page);
  for (const f of ["cct-folded", "cct-speedscope", "cct-pprof", "cct-json"]) {
    const href = `/api/v1/sessions/${withTree}/export/${f}`;
    assert.ok(links.includes(href), `${f} in ${links}`);
    assert.equal((await fetch(base + href)).status, 200, href);
  }
  // The exact view comes first: the measured section before gprof's estimated flame graph.
  const order = await page.$$eval("section > h2[id]", (hs) => hs.map((x) => x.id));
  assert.ok(order.indexOf("h-cct") >= 0 && order.indexOf("h-cct") < order.indexOf("h-flame"), `sections ${order}`);
  await page.locator("#h-cct").scrollIntoViewIfNeeded();
  await screenshot(page, "calling-context");
  assert.deepEqual(errors, []);
  await page.close();
});

test("a session without entry/exit events says it has no calling-context tree", async () => {
  const { page, errors } = await open(`/sessions/${withoutTree}`);
  await page.waitForSelector("#cct-none");
  await page.waitForSelector("#flame-graph svg g.frame"); // the estimate is still drawn
  const order = await page.$$eval("section > h2[id]", (hs) => hs.map((x) => x.id));
  assert.ok(order.indexOf("h-flame") < order.indexOf("h-cct"), `sections ${order}`); // the note after
  const links = await downloadHrefs(page);
  assert.ok(!links.some((l) => l.includes("/export/cct-")), `no measured exports offered: ${links}`);
  assert.deepEqual(errors, []); // the page knew from the session: no 422 was asked for
  await page.close();
});
