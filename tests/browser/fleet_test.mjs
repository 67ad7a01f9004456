// The Fleet page, the Diff page and the flame graphs in headless Chromium (Debian's), driven by
// playwright-core, against a real `rackprof serve` holding simulated captures whose answers are
// known: four boards ran one build of the deterministic firmware, and on one of them (f4)
// gamma did three times its work (`rackprof simulate --slower gamma=3`), so f4 is the board
// whose share of gamma stands out and the diff f1-f3 -> f4 finds gamma slower.
// Skips (exit 77, which ctest shows as skipped) when Chromium, node_modules or the built
// dashboard are missing.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { launchBrowser, rackprofIn, startDaemon } from "./daemon.mjs";
import { artifacts, chromium, downloadHrefs, openPage, requireBrowser, screenshot, serverConfig, skipper, tearDown } from "./harness.mjs";

requireBrowser(skipper("fleet browser tests"));

const { chromium: playwright } = await import("playwright-core");

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rackprof-fleet-"));
const rackprof = rackprofIn(dir);
const boards = ["f1", "f2", "f3", "f4"];
const outlier = "f4";
const sessions = {};
let buildId;

let daemon;
let base;
let browser;

const api = (method, url, body) => daemon.api(method, url, body);

before(async () => {
  fs.mkdirSync(artifacts, { recursive: true });
  // One ELF (one build-id) for all four boards; f4's gamma does three times its work.
  for (const [i, board] of boards.entries()) {
    const slower = board === outlier ? ["--slower", "gamma=3"] : [];
    const elf = i === 0 ? ["--write-elf", "model.elf"] : [];
    rackprof("simulate", "--model", "deterministic", "--iterations", "200", "--seed", String(i + 1), ...slower, "-o", `${board}.bin`, ...elf);
  }
  daemon = await startDaemon(dir, serverConfig(`${dir}/rack.db`));
  base = daemon.base;
  const firmware = await api("PUT", "/api/v1/firmware", fs.readFileSync(path.join(dir, "model.elf")));
  for (const board of boards) {
    const session = await api("POST", `/api/v1/sessions/import?format=bin&board=${board}&firmware=${firmware.id}`, fs.readFileSync(path.join(dir, `${board}.bin`)));
    sessions[board] = session.id;
    buildId = session.build_id; // the ELF's build-id, else its SHA-256: the same for all four
  }
  browser = await launchBrowser(playwright, chromium, dir, { acceptDownloads: true });
});

after(() => tearDown(browser, daemon, dir));

const open = (url) => openPage(browser, base, url);

// The export formats the daemon's OpenAPI document enumerates (checked there against the
// registry), or, from a document without the enum, the registry's formats this test knows;
// the folded stacks are always among them (the flame graphs draw them).
async function formats() {
  const doc = await api("GET", "/api/v1/openapi.json");
  const listed = (p) => doc.paths[p].get.parameters.find((x) => x.name === "format").schema.enum;
  const out = {
    session: listed("/api/v1/sessions/{id}/export/{format}") ?? ["gmon", "text", "text-intervals", "json", "csv", "folded", "speedscope", "dot", "svg", "ndjson", "raw"],
    selection: listed("/api/v1/profile/export/{format}") ?? ["gmon", "text", "text-intervals", "json", "csv", "folded", "speedscope", "dot", "svg"],
  };
  assert.ok(out.session.includes("folded") && out.selection.includes("folded"), JSON.stringify(out));
  return out;
}

// The labels of a flame graph's frames (d3-flame-graph: <g class="frame" name="fn">).
const frameNames = (page, box) => page.$$eval(`${box} svg g.frame`, (gs) => gs.map((g) => g.getAttribute("name")));

test("fleet: the build's sessions merged, the outlier board marked in the plot and the table", async () => {
  const { page, errors, close } = await open("/");
  await page.click('nav a[data-nav="fleet"]');
  await page.waitForSelector(`#builds tr[data-build="${buildId}"]`);
  // The build with its architecture (the simulator's ELF is ARM code with no build attributes:
  // its machine's family) and its counts of sessions and boards, picked by default (the only one).
  const cells = await page.locator(`#builds tr[data-build="${buildId}"] td`).allTextContents();
  assert.equal(cells[0].trim(), "arm");
  assert.equal(cells[1].trim(), "4");
  assert.match(cells[2], /^4: f1, f2, f3, f4$/);
  await page.waitForSelector("#fleet-summary");
  assert.match(await page.textContent("#fleet-summary"), /4 sessions from 4 boards \(f1, f2, f3, f4\)/);
  // The merged profile is the API's merge of the four sessions.
  const merged = await api("GET", `/api/v1/profile?build_id=${buildId}`);
  assert.deepEqual([...merged.selection.sessions].sort(), Object.values(sessions).sort());
  const gammaRow = (await page.locator('#fleet-flat tr[data-function="gamma"] td').allTextContents()).map((t) => t.trim());
  assert.equal(gammaRow[0], `${merged.flat.find((r) => r.name === "gamma").percent.toFixed(2)} %`);
  // Every export of the selection is offered.
  const kinds = await downloadHrefs(page);
  // The measured calling-context exports (cct-*) answer 422 without a tree: offered only on a
  // session's profile that has one (calling_context_test.mjs).
  for (const f of (await formats()).selection.filter((f) => !f.startsWith("cct-"))) {
    const href = kinds.find((k) => k === `/api/v1/profile/export/${f}?build_id=${buildId}`);
    assert.ok(href, `${f} in ${kinds}`);
    assert.equal((await fetch(base + href)).status, 200, href);
  }
  // The spread: gamma is shown first (a board deviates), f4 is outside in the plot and table,
  // the other boards are not.
  await page.waitForSelector("#spread-plot");
  assert.equal(await page.inputValue("#spread-function"), "gamma");
  assert.equal(await page.locator(`#spread-plot g.board.outside[data-board="${outlier}"]`).count(), 1);
  assert.equal(await page.locator("#spread-plot g.board.outside").count(), 1);
  assert.match(await page.getAttribute(`#spread-table tr[data-board="${outlier}"]`, "class"), /outside/);
  for (const b of boards.filter((x) => x !== outlier)) assert.equal(await page.getAttribute(`#spread-table tr[data-board="${b}"]`, "class"), null, b);
  assert.match(await page.textContent("#deviating"), new RegExp(`${outlier} in gamma`));
  // The flame graph of the merged stacks has gamma's frame.
  await page.waitForSelector('#flame-graph svg g.frame[name="gamma"]');
  assert.ok((await frameNames(page, "#flame-graph")).includes("gamma"));
  assert.match(await page.textContent('#flame-graph svg g.frame[name="gamma"] title'), /^gamma: [0-9.]+ %/);
  await screenshot(page, "fleet");
  // The outlier's row links to the Diff of the rest of the fleet against it: gamma is slower.
  await page.click(`#spread-table tr[data-board="${outlier}"] a.diff-board`);
  await page.waitForSelector('#diff-table tr[data-function="gamma"][data-change="slower"]');
  assert.equal(await page.inputValue("#diff-a"), `build_id=${buildId}&board=f1,f2,f3`);
  assert.equal(await page.inputValue("#diff-b"), `build_id=${buildId}&board=${outlier}`);
  await page.goBack();
  await page.waitForSelector("#fleet-form");
  // Narrowed to three boards, the outlier is gone and so is its deviation.
  await page.uncheck(`#fleet-form input[value="${outlier}"]`);
  await page.click('#fleet-form button[type="submit"]');
  await page.waitForFunction(() => /3 sessions from 3 boards/.test(document.querySelector("#fleet-summary")?.textContent ?? ""));
  assert.equal(new URL(page.url()).searchParams.get("board"), "f1,f2,f3");
  await page.waitForSelector("#spread-plot");
  assert.equal(await page.locator("#spread-plot g.board.outside").count(), 0);
  assert.deepEqual(errors, []);
  await close();
});

test("diff: f4 against the rest of the fleet, gamma marked slower; the differential flame graph", async () => {
  const a = `build_id=${buildId}&board=f1,f2,f3`;
  const b = `session=${sessions[outlier]}`;
  const { page, errors, close } = await open(`/diff?${new URLSearchParams({ a, b })}`);
  await page.waitForSelector("#diff-table tbody tr");
  assert.equal(await page.inputValue("#diff-a"), a);
  assert.equal(await page.inputValue("#diff-b"), b);
  const gamma = page.locator('#diff-table tr[data-function="gamma"]');
  assert.equal(await gamma.getAttribute("data-change"), "slower");
  assert.match(await gamma.getAttribute("class"), /slower/);
  assert.equal((await gamma.locator('[data-col="change"]').textContent()).trim(), "slower");
  // What the API said is what the table shows: p-values, and no other function is slower.
  const diff = await api("GET", `/api/v1/diff?${new URLSearchParams({ a, b })}`);
  const g = diff.functions.find((f) => f.name === "gamma");
  assert.ok(g.p_value < 1e-6, `${g.p_value}`);
  assert.equal((await gamma.locator('[data-col="p_value"]').textContent()).trim(), g.p_value === 0 ? "< 1e-300" : g.p_value < 1e-4 ? g.p_value.toExponential(1) : g.p_value.toFixed(4));
  assert.equal(await page.locator('#diff-table tr[data-change="slower"]').count(), diff.functions.filter((f) => f.change === "slower").length);
  // Sortable by any column: by p-value ascending, the smallest first.
  await page.click('#diff-table button.sort[data-key="p_value"]');
  await page.click('#diff-table button.sort[data-key="p_value"]');
  const ps = await page.$$eval('#diff-table tbody [data-col="p_value"]', (td) => td.map((x) => (x.textContent.startsWith("<") ? 0 : Number(x.textContent))));
  assert.deepEqual(ps, [...ps].sort((x, y) => x - y));
  await page.click('#diff-table button.sort[data-key="name"]');
  const names = await page.$$eval("#diff-table tbody th", (th) => th.map((x) => x.textContent));
  assert.deepEqual(names, [...names].sort((x, y) => x.localeCompare(y)));
  // Differential flame graph: b's stacks, gamma's frame coloured red (more time in B).
  await page.waitForSelector('#diff-flame-graph svg g.frame[name="gamma"]');
  const fill = await page.getAttribute('#diff-flame-graph svg g.frame[name="gamma"] rect', "fill");
  const [r, gr, bl] = fill.match(/\d+/g).map(Number);
  assert.ok(r > gr && r > bl, `gamma's frame is red: ${fill}`);
  await screenshot(page, "diff");
  assert.deepEqual(errors, []);
  await close();
});

test("flame graph of one session, every export downloadable, and 'compare with…' opens the Diff", async () => {
  const { page, errors, close } = await open(`/sessions/${sessions.f1}`);
  await page.waitForSelector('#flame-graph svg g.frame[name="gamma"]');
  const names = await frameNames(page, "#flame-graph");
  for (const fn of ["alpha", "beta", "gamma"]) assert.ok(names.includes(fn), `${fn} in ${names}`);
  // The stacks are the server's: the root's children are the folded export's first frames.
  const folded = await (await fetch(`${base}/api/v1/sessions/${sessions.f1}/export/folded`)).text();
  // (Frames narrower than a pixel are not drawn: the roots with 1 % of the samples or more.)
  const byRoot = new Map();
  let total = 0;
  for (const line of folded.split("\n").filter((l) => l.trim())) {
    const m = /^([^;]*?)(;.*)?\s+(\d+)$/.exec(line);
    byRoot.set(m[1], (byRoot.get(m[1]) ?? 0) + Number(m[3]));
    total += Number(m[3]);
  }
  assert.ok(total > 0, folded);
  for (const [root, n] of byRoot) if (n >= total / 100) assert.ok(names.includes(root), `${root} in ${names}`);
  // Every format the export registry has, each a link that answers 200.
  const links = await downloadHrefs(page);
  for (const f of (await formats()).session.filter((f) => !f.startsWith("cct-"))) {
    const href = links.find((l) => l === `/api/v1/sessions/${sessions.f1}/export/${f}`);
    assert.ok(href, `${f} in ${links}`);
    assert.equal((await fetch(base + href)).status, 200, href);
  }
  const [download] = await Promise.all([page.waitForEvent("download"), page.click('a.download[data-kind="folded stacks"]')]);
  assert.match(download.suggestedFilename(), /\.folded|\.txt/);
  await screenshot(page, "profile-flame");
  await page.click("#compare-with");
  await page.waitForSelector("#diff-form");
  assert.equal(new URL(page.url()).pathname, "/diff");
  assert.equal(await page.inputValue("#diff-a"), `session=${sessions.f1}`);
  // The picker fills B with another session.
  await page.selectOption('#diff-form label.side:has(#diff-b) select', `session=${sessions[outlier]}`);
  assert.equal(await page.inputValue("#diff-b"), `session=${sessions[outlier]}`);
  await page.click('#diff-form button[type="submit"]');
  await page.waitForSelector('#diff-table tr[data-function="gamma"][data-change="slower"]');
  assert.deepEqual(errors, []);
  await close();
});

test("the old Compare URL opens the Diff of the same two sessions", async () => {
  const { page, errors, close } = await open(`/compare?a=${sessions.f1}&b=${sessions.f2}`);
  await page.waitForSelector("#diff-form");
  const url = new URL(page.url());
  assert.equal(url.pathname, "/diff");
  assert.equal(url.searchParams.get("a"), `session=${sessions.f1}`);
  assert.equal(url.searchParams.get("b"), `session=${sessions.f2}`);
  assert.equal(await page.getAttribute('nav a[data-nav="diff"]', "aria-current"), "page");
  assert.deepEqual(errors.filter((e) => !/status of 404/.test(e)), []);
  await close();
});
