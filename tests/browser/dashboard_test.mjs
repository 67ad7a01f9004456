// The dashboard in headless Chromium (Debian's), driven by playwright-core, against a real
// `rackprof serve` with simulated boards and two imported sessions whose truth is known.
// Skips (exit 77, which ctest shows as skipped) when Chromium, node_modules, the built
// dashboard or arm-none-eabi-gprof are missing.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { binary, eventually, launchBrowser, rackprofIn, source, startDaemon } from "./daemon.mjs";
import { artifacts, chromium, openPage, requireBrowser, screenshot, serverConfig, skipper, tearDown } from "./harness.mjs";

const skip = skipper("browser tests");
const gprof = (() => {
  try {
    return execFileSync("sh", ["-c", "command -v arm-none-eabi-gprof"]).toString().trim();
  } catch {
    return "";
  }
})();
requireBrowser(skip);
if (!gprof) skip("arm-none-eabi-gprof is missing");

const { chromium: playwright } = await import("playwright-core");

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rackprof-browser-"));
const rackprof = rackprofIn(dir);
let daemon;
let base;
let browser;
const truth = {};
const sessions = {};

// Per function of a simulator's ground truth: self % from its PC samples, calls from its arcs.
function truthProfile(file) {
  const t = JSON.parse(fs.readFileSync(file, "utf8"));
  const owner = (pc) => t.functions.find((f) => parseInt(f.addr, 16) <= parseInt(pc, 16) && parseInt(pc, 16) < parseInt(f.addr, 16) + f.size)?.name;
  const total = t.pc_samples.reduce((n, s) => n + s.count, 0);
  const out = {};
  // calls: all calls of the function; recursive: those from itself.
  for (const f of t.functions) out[f.name] = { self: 0, calls: 0, recursive: 0 };
  for (const s of t.pc_samples) out[owner(s.pc)].self += (100 * s.count) / total;
  for (const a of t.arcs) {
    out[owner(a.self)].calls += a.count;
    if (owner(a.from) === owner(a.self)) out[owner(a.self)].recursive += a.count;
  }
  return out;
}

const api = (method, url, body) => daemon.api(method, url, body);

before(async () => {
  fs.mkdirSync(artifacts, { recursive: true });
  // Two builds of the deterministic firmware: A runs its loop 100 times.
  rackprof("simulate", "--model", "deterministic", "--iterations", "100", "--seed", "1", "-o", "a.bin", "--truth", "a.json", "--write-elf", "model.elf");
  // Build B: three times the passes, and gamma three times slower (its self % grows, the
  // others shrink), so the comparison has a known difference in both calls and self %.
  rackprof("simulate", "--model", "deterministic", "--iterations", "300", "--seed", "2", "--slower", "gamma=3", "-o", "b.bin", "--truth", "b.json");
  rackprof("simulate", "--model", "blinky", "--iterations", "3", "-o", "blinky.bin", "--truth", "blinky.json", "--write-elf", "blinky.elf");
  truth.a = truthProfile(path.join(dir, "a.json"));
  truth.b = truthProfile(path.join(dir, "b.json"));
  daemon = await startDaemon(
    dir,
    serverConfig(`${dir}/rack.db`) +
      `[[boards]]\nname = "det"\nlink = "sim://deterministic?rate=40000"\nelf = "${dir}/model.elf"\n` +
      `[[boards]]\nname = "blinky"\nlink = "sim://blinky?rate=20000"\nelf = "${dir}/blinky.elf"\n`,
    (log) => log.includes("[det] session") && log.includes("[blinky] session"),
  );
  base = daemon.base;
  const firmware = await api("PUT", "/api/v1/firmware", fs.readFileSync(path.join(dir, "model.elf")));
  sessions.a = (await api("POST", `/api/v1/sessions/import?format=bin&board=build-a&firmware=${firmware.id}`, fs.readFileSync(path.join(dir, "a.bin")))).id;
  sessions.b = (await api("POST", `/api/v1/sessions/import?format=bin&board=build-b&firmware=${firmware.id}`, fs.readFileSync(path.join(dir, "b.bin")))).id;
  sessions.live = (await api("GET", "/api/v1/boards")).find((b) => b.name === "det").session;
  browser = await launchBrowser(playwright, chromium, dir, { acceptDownloads: true });
});

after(() => tearDown(browser, daemon, dir));

// A page at 1280x800 whose console errors and uncaught exceptions are collected.
const open = (url) => openPage(browser, base, url);

test("rack: every board with its link state, a moving records/s, live events, start", async () => {
  const { page, errors, close } = await open("/");
  await page.waitForSelector('#boards tr[data-board="det"]');
  assert.equal(await page.textContent('tr[data-board="det"] .state'), "connected");
  assert.equal(await page.textContent('tr[data-board="blinky"] .state'), "connected");
  await page.waitForFunction(() => /^[1-9][0-9,]*$/.test(document.querySelector('tr[data-board="det"] [data-col="rate"]')?.textContent ?? ""), null, { timeout: 5000 });
  assert.match(await page.textContent('tr[data-board="det"]'), /bytes in/);
  // A legacy board's counters: its totals and its losses, not the framed or SWO ones' zeros.
  await page.waitForSelector('tr[data-board="det"] dl.counters[data-protocol="legacy"]');
  const shown = await page.$$eval('tr[data-board="det"] dl.counters dt', (d) => d.map((x) => x.textContent));
  assert.deepEqual(shown.slice(0, 3), ["bytes in", "arcs", "pc samples"]);
  for (const irrelevant of ["frames", "frames lost", "target dropped", "overflows", "sleep samples"]) assert.ok(!shown.includes(irrelevant), `${irrelevant} in ${shown}`);
  assert.ok(shown.length <= 5, `${shown}`);
  // A change elsewhere (blinky's session stopped through the API) shows up by itself.
  const blinky = (await api("GET", "/api/v1/boards")).find((b) => b.name === "blinky").session;
  await page.waitForSelector("h2 .pill.ok");
  await api("POST", `/api/v1/sessions/${blinky}/stop`);
  await page.waitForSelector(`ol.events li:has-text("blinky")`, { timeout: 2000 });
  await page.waitForFunction(() => document.querySelector('tr[data-board="blinky"] td:nth-of-type(4)')?.textContent === "—", null, { timeout: 2000 });
  await screenshot(page, "rack");
  // ... and a board without a session can start one from here.
  await page.click('tr[data-board="blinky"] button.start');
  await page.waitForSelector('tr[data-board="blinky"] a[href^="/live/"]', { timeout: 2000 });
  assert.notEqual((await api("GET", "/api/v1/boards")).find((b) => b.name === "blinky").session, null);
  assert.deepEqual(errors, []);
  await close();
});

test("rack: a board added from the page, and the API's refusal shown as it says it", async () => {
  const { page, errors, close } = await open("/");
  await page.waitForSelector("#add-board");
  await page.fill('#add-board input[name="name"]', "added");
  await page.fill('#add-board input[name="link"]', "sim://conflation?rate=20000");
  await page.click('#add-board button[type="submit"]');
  await page.waitForSelector('#boards tr[data-board="added"]', { timeout: 3000 });
  assert.match(await page.textContent("#add-board-result"), /Added board added/);
  assert.ok((await api("GET", "/api/v1/boards")).some((b) => b.name === "added"));
  // A link server.api_links does not allow: the API's 403, with what it allows.
  await page.fill('#add-board input[name="name"]', "outside");
  await page.fill('#add-board input[name="link"]', "file:///etc/passwd");
  await page.click('#add-board button[type="submit"]');
  await page.waitForSelector("#add-board-result .error");
  assert.match(await page.textContent("#add-board-result"), /Cannot add the board: link: 'file:\/\/\/etc\/passwd' is not allowed over the API \(server\.api_links allows: .*sim:\/\/\*/);
  assert.ok(!(await api("GET", "/api/v1/boards")).some((b) => b.name === "outside"));
  assert.deepEqual(errors.filter((e) => !/status of 403/.test(e)), []);
  await close();
  assert.equal((await fetch(`${base}/api/v1/boards/added`, { method: "DELETE" })).status, 204);
});

test("live: the view changes within 2 s, and stop stops the session", async () => {
  const { page, errors, close } = await open(`/live/${sessions.live}`);
  await page.waitForSelector("#top-functions tbody tr");
  const first = await page.textContent("#totals");
  const changed = await eventually(async () => (await page.textContent("#totals")) !== first, 2000, "the totals to change");
  assert.ok(changed);
  assert.match(await page.textContent("#top-functions"), /gamma/);
  assert.equal(await page.textContent("#link-state"), "connected");
  assert.equal(await page.locator(".chart canvas").count(), 1);
  await page.waitForTimeout(2000); // a few points on the chart for the screenshot
  await screenshot(page, "live");
  await page.click("#stop");
  // Said in words, and the rate no longer shows the last one seen.

  await page.waitForFunction(() => document.querySelector("#capture-state")?.textContent === "not capturing", null, { timeout: 3000 });
  assert.equal(await page.textContent("#records-rate"), "—");
  const stopped = await api("GET", `/api/v1/sessions/${sessions.live}`);
  assert.equal(stopped.state, "completed");
  assert.deepEqual(errors, []);
  await close();
});

// A simulated board samples in real time, at the 1000 Hz its profile assumes, whatever its
// wire's byte rate: the seconds a profile shows as sampled are the seconds the capture took.
test("simulated board: the seconds sampled are the seconds captured", async () => {
  const session = await api("GET", `/api/v1/sessions/${sessions.live}`);
  assert.notEqual(session.ended_ns, null, "the live test stopped the session");
  const wall = (session.ended_ns - session.started_ns) / 1e9;
  const { page, errors, close } = await open(`/sessions/${sessions.live}`);
  await page.waitForSelector("#flat tbody tr");
  // A number, not whatever digits and dots precede it (text before it may end in a '.').
  const sampled = Number(/(\d+(?:\.\d+)?) s sampled/.exec(await page.textContent("main"))?.[1]);
  assert.ok(wall > 1, `the capture ran ${wall} s`);
  assert.ok(sampled <= wall * 1.05 + 0.1, `${sampled} s sampled in a ${wall.toFixed(2)} s capture`);
  assert.ok(sampled >= wall * 0.5, `${sampled} s sampled in a ${wall.toFixed(2)} s capture`);
  assert.deepEqual(errors, []);
  await close();
});

test("profile: sorting (mouse and keyboard), search, call graph and its navigation, gprof table", async () => {
  const { page, errors, close } = await open(`/sessions/${sessions.a}`);
  await page.waitForSelector("#call-graph svg g.node");
  const column = (n) => page.$$eval(`#flat tbody tr`, (rows, i) => rows.map((r) => r.children[i].textContent.trim()), n);
  const numbers = (texts) => texts.map((t) => (t === "—" ? -1 : Number(t.replace(/[,%\s]/g, ""))));
  // Default: self % descending, as gprof.
  const self = numbers(await column(1));
  assert.deepEqual(self, [...self].sort((x, y) => y - x));
  // The sampling error: each row's ± (half the 95 % Wilson interval the API gives), its bounds
  // in the title, the share inside them.
  assert.equal((await page.textContent('th:has(button[data-key="self_percent_interval"])')).trim(), "± (95 %)");
  const profile = await api("GET", `/api/v1/sessions/${sessions.a}/profile`);
  const plusMinus = await column(2);
  const shown = await column(0);
  assert.equal(plusMinus.length, profile.flat.length);
  for (const [i, name] of shown.entries()) {
    const row = profile.flat.find((r) => r.name === name);
    const [low, high] = row.self_percent_interval;
    assert.ok(low <= row.percent && row.percent <= high, `${name}: ${row.percent} in [${low}, ${high}]`);
    assert.equal(plusMinus[i], `±${((high - low) / 2).toFixed(2)}`, name);
    const title = await page.getAttribute(`#flat tbody tr:has(button.fn:text-is("${name}")) td.interval`, "title");
    assert.equal(title, `95 % Wilson score interval: ${low.toFixed(2)}–${high.toFixed(2)} %`);
  }
  // Inclusive time has its own column (the call graph's self + children); gprof's running sum
  // is named for what it is, not "cumulative", which pprof and speedscope users read as inclusive.
  assert.equal((await page.textContent('th:has(button[data-key="cumulative_seconds"])')).trim(), "Running sum s");
  assert.match(await page.getAttribute('th:has(button[data-key="cumulative_seconds"])', "title"), /not inclusive/);
  const totals = numbers(await column(4));
  for (const [i, name] of shown.entries()) {
    const entry = profile.call_graph.find((e) => e.name === name);
    if (!entry || entry.cycle !== null) continue;
    assert.equal(totals[i], Number((entry.self_seconds + entry.children_seconds).toFixed(2)), `total s of ${name}`);
  }
  await page.click('button.sort[data-key="calls"]');
  const calls = numbers(await column(6));
  assert.deepEqual(calls, [...calls].sort((x, y) => y - x));
  assert.equal(calls[0], truth.a.gamma.calls);
  await page.click('button.sort[data-key="calls"]');
  const up = numbers(await column(6));
  assert.deepEqual(up, [...up].sort((x, y) => x - y));
  await page.click('button.sort[data-key="name"]');
  const names = await column(0);
  assert.deepEqual(names, [...names].sort((x, y) => x.localeCompare(y)));
  // Keyboard: the headers are buttons, Tab reaches them, Enter sorts.
  await page.focus("#search");
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.key), "name");
  await page.keyboard.press("Tab");
  await page.keyboard.press("Enter");
  const byKeyboard = numbers(await column(1));
  assert.deepEqual(byKeyboard, [...byKeyboard].sort((x, y) => y - x));
  assert.equal(await page.getAttribute('th:has(button[data-key="percent"])', "aria-sort"), "descending");
  await page.fill("#search", "amm");
  assert.deepEqual(await column(0), ["gamma"]);
  await page.fill("#search", "");
  assert.equal((await column(0)).length, names.length);
  // The graph: one node per function, edges labeled with exact call counts.
  const labels = await page.$$eval("#call-graph svg g.edge text", (t) => t.map((x) => x.textContent));
  assert.ok(labels.includes(String(truth.a.gamma.calls)), `edge labels ${labels}`);
  // A recursive function's calls as gprof counts them: from elsewhere + from itself, the first
  // number the flat profile's; never their sum.
  const fact = truth.a.factorial;
  assert.ok(fact.recursive > 0);
  const outside = (fact.calls - fact.recursive).toLocaleString("en-US");
  const factNode = await page.$$eval("#call-graph svg g.node", (nodes) =>
    nodes.filter((n) => n.querySelector("title")?.textContent === "factorial").map((n) => [...n.querySelectorAll("text")].map((t) => t.textContent).join(" ")),
  );
  assert.equal(factNode.length, 1);
  assert.match(factNode[0], new RegExp(`\\b${outside}\\+${fact.recursive.toLocaleString("en-US")} calls`), factNode[0]);
  assert.equal((await page.locator('#flat tbody tr:has(button.fn:text-is("factorial")) td').nth(5).textContent()).trim(), outside);
  assert.match(await page.textContent('#call-graph-table tr.primary:has-text("factorial [")'), new RegExp(`${outside}\\+${fact.recursive}`));
  // Navigation: select gamma, then its caller.
  await page.click('#flat button.fn:text-is("gamma")');
  await page.waitForSelector('#focus h3:has-text("gamma")');
  const callers = await page.$$eval("#focus .pair > div:first-child button.fn", (b) => b.map((x) => x.textContent));
  assert.ok(callers.length > 0);
  await page.click(`#focus .pair > div:first-child button.fn >> nth=0`);
  await page.waitForSelector(`#focus h3:has-text("${callers[0]}")`);
  assert.match(await page.textContent("#call-graph-table"), /\[1\]/);
  // The selected function's source view: the model ELF has no DWARF, so with the disassembly on
  // its instructions alone, their samples those /disasm gives, and a search narrows them.
  await page.check("#disasm");
  await page.waitForSelector("#source-view tr.instruction");
  const disasm = await api("GET", `/api/v1/sessions/${sessions.a}/disasm?function=${encodeURIComponent(callers[0])}`);
  const instructionSamples = await page.$$eval("#source-view tr.instruction", (rows) => rows.map((r) => r.children[0].textContent.trim()));
  assert.equal(instructionSamples.length, disasm.functions[0].instructions.length);
  assert.deepEqual(instructionSamples, disasm.functions[0].instructions.map((i) => (i.samples ? i.samples.toLocaleString("en-US") : ".")));
  const first = disasm.functions[0].instructions[0].address.replace(/^0x/, "");
  await page.fill("#source-search", first);
  await page.waitForFunction((n) => document.querySelectorAll("#source-view tr.instruction").length === n, 1);
  // The flat profile is part of the page, not a box of its own that scrolls (and cuts it).
  const scroller = await page.$eval("#flat", (el) => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      if (/auto|scroll/.test(getComputedStyle(p).overflowY)) return p.outerHTML.slice(0, 80);
    }
    return null;
  });
  assert.equal(scroller, null);
  await screenshot(page, "profile");
  // The picture in README.md's quick start (docs/dashboard.png): the page as it opens.
  await page.click('#flat button.fn:text-is("gamma")');
  await page.waitForSelector('#focus h3:has-text("gamma")');
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: path.join(artifacts, "dashboard-profile-1280x800.png") });
  assert.deepEqual(errors, []);
  await close();
});

// A firmware with many functions: the page asks for the call graph's busiest entries only
// (?graph_top=N, 50 unless its URL says), and a function past them is asked for when selected.
test("profile: only the busiest call-graph entries come with the page; others on selection", async () => {
  const whole = await api("GET", `/api/v1/sessions/${sessions.a}/profile`);
  assert.ok(whole.call_graph.length > 3, `${whole.call_graph.length} entries`);
  const { page, errors, close } = await open(`/sessions/${sessions.a}?graph_top=2`);
  await page.waitForSelector("#call-graph-table");
  // The table holds the two busiest entries, and says so.
  const indices = await page.$$eval("#call-graph-table tbody", (b) => b.map((x) => x.id));
  assert.deepEqual(indices, whole.call_graph.slice(0, 2).map((e) => `cg-${e.index}`));
  assert.match(await page.textContent("#call-graph-trimmed"), /The 2 busiest entries/);
  // The flat profile is whole.
  assert.equal(await page.locator("#flat tbody tr").count(), whole.flat.length);
  // A function past them: its callers and callees come from the server when it is selected.
  const far = whole.call_graph.slice(2).find((e) => e.cycle === null && e.parents?.length && whole.flat.some((r) => r.name === e.name));
  assert.ok(far, "a function past the first two entries");
  const asked = page.waitForRequest((r) => r.url().includes("graph_function=" + encodeURIComponent(far.name)));
  await page.click(`#flat button.fn:text-is("${far.name}")`);
  await asked;
  await page.waitForSelector(`#focus h3:has-text("${far.name}")`);
  const callers = await page.$$eval("#focus .pair > div:first-child button.fn", (b) => b.map((x) => x.textContent));
  assert.deepEqual(callers, far.parents.map((l) => l.name));
  const callees = await page.$$eval("#focus .pair > div:last-child li", (l) => l.map((x) => x.textContent.trim()));
  assert.deepEqual(callees, (far.children ?? []).map((l) => `${l.name} ${l.count.toLocaleString("en-US")}/${l.of.toLocaleString("en-US")} calls`));
  // "show more" asks for ten times as many.
  await page.click("#call-graph-more");
  await page.waitForFunction(() => location.search.includes("graph_top=20"));
  await page.waitForSelector("#call-graph-table");
  const more = await page.$$eval("#call-graph-table tbody", (b) => b.length);
  assert.equal(more, Math.min(20, whole.call_graph.length));
  assert.deepEqual(errors, []);
  await close();
});

// gprof -b's call graph, one line per caller, entry or callee, spaces collapsed.
const gprofCallGraph = (report) =>
  report
    .slice(report.indexOf("index % time"), report.indexOf("Index by function name"))
    .split("\n")
    .slice(1)
    .filter((l) => l.trim() && !/^-+$/.test(l.trim()))
    .map((l) => l.trim().replace(/\s+/g, " "));

// The dashboard's "as gprof prints it" table read the same way (the overhead tags left out).
async function shownCallGraph(page) {
  await page.waitForSelector("#call-graph-table tbody tr.primary");
  return page.$$eval("#call-graph-table tbody tr", (rows) =>
    rows.map((r) =>
      [...r.children]
        .map((cell) => {
          const copy = cell.cloneNode(true);
          copy.querySelectorAll(".tag").forEach((t) => t.remove());
          return copy.textContent.trim();
        })
        .filter((t) => t)
        .join(" "),
    ),
  );
}

test("the gmon.out button downloads a file arm-none-eabi-gprof reads", async () => {
  const { page, errors, close } = await open(`/sessions/${sessions.a}`);
  const [download] = await Promise.all([page.waitForEvent("download"), page.click('a.download[data-kind="gmon.out"]')]);
  assert.equal(download.suggestedFilename(), `build-a-${sessions.a}.gmon.out`);
  const file = path.join(dir, "downloaded.gmon.out");
  await download.saveAs(file);
  const report = execFileSync(gprof, ["-b", path.join(dir, "model.elf"), file]).toString();
  const gammaLine = report.split("\n").find((l) => / gamma$/.test(l));
  assert.ok(gammaLine, report);
  assert.match(gammaLine, new RegExp(`\\s${truth.a.gamma.calls}\\s`));
  // The dashboard's "as gprof prints it" table is gprof's call graph, line for line: the model
  // has a recursive function (factorial) and a cycle (ping and pong), where gprof leaves times
  // blank, prints a count alone and tags names with their cycle.
  const gprofLines = gprofCallGraph(report);
  const shownLines = await shownCallGraph(page);
  assert.ok(gprofLines.some((l) => /<cycle 1 as a whole>/.test(l)) && gprofLines.some((l) => /\+\d+ +factorial/.test(l)), report);
  assert.deepEqual(shownLines, gprofLines);
  // The focus panel says the same: pong's calls of ping are within the cycle, not "n/m".
  await page.click('#flat button.fn:text-is("ping")');
  await page.waitForSelector('#focus h3:has-text("ping")');
  assert.match(await page.textContent("#focus"), /pong \d[\d,]* calls within cycle 1/);
  assert.deepEqual(errors, []);
  await close();
});

test("profile of a capture without its ELF: the firmware is attached on that page", async () => {
  const bare = (await api("POST", "/api/v1/sessions/import?format=bin&board=no-elf", fs.readFileSync(path.join(dir, "a.bin")))).id;
  const { page, errors, close } = await open(`/sessions/${bare}`);
  await page.waitForSelector("main .error");
  assert.match(await page.textContent("main .error"), /no usable ELF/);
  await page.setInputFiles("#attach-elf", path.join(dir, "model.elf"));
  await page.click('#attach-form button[type="submit"]');
  await page.waitForSelector('#flat button.fn:text-is("gamma")', { timeout: 5000 });
  assert.match((await api("GET", `/api/v1/sessions/${bare}`)).elf.sha256, /^[0-9a-f]{64}$/);
  assert.deepEqual(errors.filter((e) => !/status of 422/.test(e)), []);
  await close();
  assert.equal((await fetch(`${base}/api/v1/sessions/${bare}`, { method: "DELETE" })).status, 204);
});

test("sessions: list, filter, downloads", async () => {
  const { page, errors, close } = await open("/sessions");
  await page.waitForSelector(`#sessions tr[data-session="${sessions.a}"]`);
  assert.equal(await page.locator(`#sessions tr[data-session="${sessions.b}"] a.download`).count(), 3);
  await screenshot(page, "sessions");
  await page.selectOption('select[name="board"]', "build-b");
  await page.click('form.filters button[type="submit"]');
  await page.waitForFunction(() => document.querySelectorAll("#sessions tbody tr").length === 1);
  assert.equal(await page.getAttribute("#sessions tbody tr", "data-session"), String(sessions.b));
  assert.deepEqual(errors, []);
  await close();
});

test("diff: the known difference between two builds, gamma marked slower", async () => {
  const { page, errors, close } = await open("/sessions");
  await page.waitForSelector("#diff-form #diff-a");
  await page.fill("#diff-a", `session=${sessions.a}`);
  await page.fill("#diff-b", `session=${sessions.b}`);
  await page.click('#diff-form button[type="submit"]');
  await page.waitForSelector("#diff-table tbody tr");
  assert.equal(new URL(page.url()).pathname, "/diff");
  // The known difference is there to be found: gamma's self % grew by well over 5 points.
  assert.ok(truth.b.gamma.self - truth.a.gamma.self > 5, "build B's gamma is slower");
  const diffApi = await api("GET", `/api/v1/diff?${new URLSearchParams({ a: `session=${sessions.a}`, b: `session=${sessions.b}` })}`);
  for (const fn of ["alpha", "beta", "gamma"]) {
    const row = page.locator(`#diff-table tr[data-function="${fn}"]`);
    const cell = async (col) => (await row.locator(`[data-col="${col}"]`).textContent()).trim();
    assert.equal(await cell("a_calls"), truth.a[fn].calls.toLocaleString("en-US"));
    assert.equal(await cell("b_calls"), truth.b[fn].calls.toLocaleString("en-US"));
    const delta = Number((await cell("delta")).replace("−", "-"));
    // Each side's share with its sampling error (the API's 95 % Wilson interval).
    const api_fn = diffApi.functions.find((f) => f.name === fn);
    for (const side of ["a", "b"]) {
      const [low, high] = api_fn[side].self_percent_interval;
      assert.equal(await cell(`${side}_share`), `${api_fn[side].self_percent.toFixed(2)} ±${((high - low) / 2).toFixed(2)}`, `${fn} ${side}`);
    }
    assert.ok(Math.abs(delta - (truth.b[fn].self - truth.a[fn].self)) < 0.011, `${fn}: ${delta} vs truth ${truth.b[fn].self - truth.a[fn].self}`);
  }
  assert.equal(await page.getAttribute('#diff-table tr[data-function="gamma"]', "data-change"), "slower");
  // Both builds ran the same firmware (one ELF): no warning.
  assert.equal(await page.locator("#firmware-warning").count(), 0);
  await screenshot(page, "diff-builds");
  assert.deepEqual(errors, []);
  await close();
});

test("diff: in the navigation; another build refused, then compared by name with a warning", async () => {
  const blinky = await api("PUT", "/api/v1/firmware", fs.readFileSync(path.join(dir, "blinky.elf")));
  const other = (await api("POST", `/api/v1/sessions/import?format=bin&board=other-fw&firmware=${blinky.id}`, fs.readFileSync(path.join(dir, "blinky.bin")))).id;
  const { page, errors, close } = await open("/");
  await page.click('nav a[data-nav="diff"]');
  await page.waitForSelector("#diff-form #diff-a");
  assert.equal(new URL(page.url()).pathname, "/diff");
  assert.equal(await page.getAttribute('nav a[data-nav="diff"]', "aria-current"), "page");
  await page.fill("#diff-a", `session=${sessions.a}`);
  await page.fill("#diff-b", `session=${other}`);
  await page.click('#diff-form button[type="submit"]');
  // Two builds are refused as the API refuses them, both build-ids named; matching functions
  // by name is one click, and then the page says what that means.
  await page.waitForSelector("main .error");
  const refusal = await page.textContent("main .error");
  const [a, b] = await Promise.all([api("GET", `/api/v1/sessions/${sessions.a}`), api("GET", `/api/v1/sessions/${other}`)]);
  assert.ok(refusal.includes(a.build_id) && refusal.includes(b.build_id), refusal);
  assert.match(refusal, /different builds/);
  await page.click("#compare-by-name");
  await page.waitForSelector("#diff-table tbody tr");
  assert.equal(new URL(page.url()).searchParams.get("merge"), "by_name");
  assert.match(await page.textContent("#firmware-warning"), /Different firmware \(build-id [0-9a-f]+ vs [0-9a-f]+\)/);
  assert.deepEqual(errors.filter((e) => !/status of 409/.test(e)), []);
  await close();
  assert.equal((await fetch(`${base}/api/v1/sessions/${other}`, { method: "DELETE" })).status, 204);
});

test("firmware: an ELF uploads and a capture imports into a session", async () => {
  const { page, errors, close } = await open("/firmware");
  await page.setInputFiles("#elf-file", path.join(dir, "blinky.elf"));
  await page.click('#elf-form button[type="submit"]');
  await page.waitForSelector("#elf-result code");
  const uploadedId = await page.inputValue("#firmware-id");
  assert.match(uploadedId, /^[0-9a-f]+$/);
  // The page lists the uploaded images, as GET /api/v1/firmware does; one is a click from an
  // import's firmware field.
  await page.waitForSelector(`#firmware-list tr[data-firmware="${uploadedId}"]`);
  const listed = await api("GET", "/api/v1/firmware");
  assert.deepEqual(await page.$$eval("#firmware-list tbody tr", (rows) => rows.map((r) => r.dataset.firmware)), listed.map((f) => f.id));
  assert.ok(listed.length >= 2, "the test's earlier uploads are listed too");
  await page.fill("#firmware-id", "");
  await page.click(`#firmware-list tr[data-firmware="${uploadedId}"] button.use`);
  assert.equal(await page.inputValue("#firmware-id"), uploadedId);
  await page.setInputFiles("#capture-file", path.join(dir, "blinky.bin"));
  await page.fill('input[name="board"]', "bench-blinky");
  await page.click('#import-form button[type="submit"]');
  await page.waitForSelector('#import-result a:has-text("open its profile")');
  const sent = JSON.parse(fs.readFileSync(path.join(dir, "blinky.json"), "utf8"));
  assert.match(await page.textContent("#import-result"), new RegExp(`\\(${sent.arcs_sent} arcs, ${sent.pc_samples_sent} samples, 0 bytes discarded\\)`));
  await screenshot(page, "firmware");
  // The form imports every wire the API takes: a framed capture, named as such.
  rackprof("simulate", "--model", "blinky", "--iterations", "20", "--protocol", "framed", "-o", "framed.bin", "--truth", "framed.json");
  await page.setInputFiles("#capture-file", path.join(dir, "framed.bin"));
  await page.selectOption('select[name="protocol"]', "framed");
  await page.fill('input[name="board"]', "bench-framed");
  await page.click('#import-form button[type="submit"]');
  const framed = JSON.parse(fs.readFileSync(path.join(dir, "framed.json"), "utf8"));
  await page.waitForFunction((text) => document.querySelector("#import-result")?.textContent?.includes(text), `(${framed.arcs_sent} arcs, ${framed.pc_samples_sent} samples`);
  assert.deepEqual(await page.$$eval('select[name="format"] option', (os) => os.map((o) => o.value)), ["bin", "hex", "gmon", "tiva"]);
  // A Tiva file of three reports as a report task prints them: a session each, each a link,
  // then one session of their sum.
  const report = (n) =>
    `DONE COLLECTING (${n})- BEGIN OUTPUT\r\n` +
    Array.from({ length: 512 }, (_, bin) => `${String(6600000 * n + bin).padStart(8, "0")},0042,+${String(bin).padStart(7, "0")},+${String(bin === 7 ? n * 10 : 0).padStart(7, "0")},+0000000,+0000000\r\n`).join("");
  fs.writeFileSync(path.join(dir, "tiva.txt"), "boot\r\n" + report(1) + report(2) + report(3));
  await page.setInputFiles("#capture-file", path.join(dir, "tiva.txt"));
  await page.selectOption('select[name="format"]', "tiva");
  await page.fill('input[name="board"]', "bench-tiva");
  await page.click('#import-form button[type="submit"]');
  await page.waitForSelector("#imported-several");
  assert.match(await page.textContent("#imported-several"), /^Imported as 3 sessions, one per report/);
  const reportIds = await page.$$eval("#imported-several a", (as) => as.map((a) => Number(a.getAttribute("href").split("/").pop())));
  assert.equal(reportIds.length, 3);
  for (const [i, id] of reportIds.entries()) assert.equal((await api("GET", `/api/v1/sessions/${id}/profile`)).total_samples, 10 * (i + 1));
  await page.selectOption('select[name="reports"]', "sum");
  await page.click('#import-form button[type="submit"]');
  await page.waitForFunction(() => document.querySelector("#import-result a")?.textContent === "open its profile");
  const summed = Number((await page.getAttribute("#import-result a", "href")).split("/").pop());
  assert.equal((await api("GET", `/api/v1/sessions/${summed}/profile`)).total_samples, 60);
  await page.selectOption('select[name="format"]', "bin");
  // A wrong file gets a clear error, not a crash.
  await page.setInputFiles("#elf-file", path.join(dir, "a.json"));
  await page.click('#elf-form button[type="submit"]');
  await page.waitForSelector("#elf-result .error");
  assert.match(await page.textContent("#elf-result"), /not a usable ELF/);
  // The imported session's profile is one click away.
  await page.click('#import-result a:has-text("open its profile")');
  await page.waitForSelector("#flat tbody tr");
  assert.match(await page.textContent("h1"), /bench-tiva/); // the last one imported: the sum
  assert.deepEqual(errors.filter((e) => !/status of 422/.test(e)), []);
  await close();
});

// The thesis' real capture from a real board: the profiler's own functions are marked as
// overhead, and the flat profile says what GNU gprof said about the same capture.
const thesis = process.env.RACKPROF_SHARED_DATA ?? path.resolve(source, "../shared/data/thesis");
// speedscope's views of the flame graph: the icicle top-down (main above alpha above beta
// above gamma), and inverted (gamma, where the time went, on top with its callers below).
test("profile: the flame graph's left-heavy, inverted and sandwich views, pprof's focus, ignore and hide on both graphs, the call graph's pan and zoom, hover figures", async () => {
  const { page, errors, close } = await open(`/sessions/${sessions.a}`);
  await page.waitForSelector("#flame-graph svg g.frame");
  // d3 lays the frames out on its next animation frame: wait until they stand at several depths.
  const settled = () =>
    page.waitForFunction(() => {
      const ys = [...document.querySelectorAll("#flame-graph svg g.frame")].map((g) => g.getAttribute("transform")?.split(",")[1]);
      return new Set(ys).size > 3;
    });
  const depth = () =>
    page.$$eval("#flame-graph svg g.frame", (frames) => {
      const y = {};
      for (const g of frames) {
        const name = g.getAttribute("name")?.split(" ")[0];
        const at = Number(/translate\([^,]+,\s*([-\d.]+)\)/.exec(g.getAttribute("transform") ?? "")?.[1]);
        if (name && Number.isFinite(at)) y[name] = Math.min(y[name] ?? Infinity, at);
      }
      return y;
    });
  await settled();
  const down = await depth();
  assert.ok(down.main < down.alpha && down.alpha < down.beta && down.beta < down.gamma, JSON.stringify(down));
  // speedscope's hover: a frame's figures appear under the flame graph when the pointer is on it.
  await page.hover("#flame-graph svg g.frame[name^='gamma']");
  await page.waitForFunction(() => /^gamma: [\d.]+ % \(/.test(document.querySelector("#flame-graph .flame-details")?.textContent ?? ""));
  await page.selectOption("#flame-graph select.flame-view", "inverted");
  await settled();
  // Inverted: every function with time of its own at the top, gamma the widest, and right below
  // gamma (same left edge) the function that called it, beta.
  const frames = await page.$$eval("#flame-graph svg g.frame", (gs) =>
    gs.map((g) => {
      const [x, y] = (/translate\(([-\d.]+),\s*([-\d.]+)\)/.exec(g.getAttribute("transform") ?? "") ?? []).slice(1).map(Number);
      return { name: g.getAttribute("name")?.split(" ")[0], x, y, width: Number(g.querySelector("rect")?.getAttribute("width") ?? 0) };
    }),
  );
  const top = frames.filter((f) => f.y === 18).sort((a, b) => b.width - a.width);
  assert.equal(top[0].name, "gamma", JSON.stringify(top));
  assert.ok(frames.some((f) => f.name === "beta" && f.y === 36 && Math.abs(f.x - top[0].x) < 0.5), JSON.stringify(frames));
  await page.selectOption("#flame-graph select.flame-view", "left-heavy");
  await settled();
  const heavy = await depth();
  assert.ok(heavy.main < heavy.gamma, JSON.stringify(heavy));
  // pprof's filters, typed as a person would: focus on the cycle, then ignore alpha's subtree,
  // then hide main (its callees move up to the top).
  const names = () => page.$$eval("#flame-graph svg g.frame", (gs) => [...new Set(gs.map((g) => g.getAttribute("name")?.split(" ")[0]))].sort());
  await page.selectOption("#flame-graph select.flame-view", "top-down");
  await page.fill("#flame-graph input.flame-focus", "^ping$");
  await page.press("#flame-graph input.flame-focus", "Enter");
  await page.waitForFunction(() => ![...document.querySelectorAll("#flame-graph svg g.frame")].some((g) => g.getAttribute("name")?.startsWith("gamma")));
  assert.deepEqual(await names(), ["all", "main", "ping", "pong"]);
  await page.fill("#flame-graph input.flame-focus", "");
  await page.press("#flame-graph input.flame-focus", "Enter");
  await page.fill("#flame-graph input.flame-ignore", "alpha");
  await page.press("#flame-graph input.flame-ignore", "Enter");
  await page.waitForFunction(() => ![...document.querySelectorAll("#flame-graph svg g.frame")].some((g) => g.getAttribute("name")?.startsWith("beta")));
  assert.deepEqual(await names(), ["all", "factorial", "main", "ping", "pong"]);
  await page.fill("#flame-graph input.flame-hide", "^main$");
  await page.press("#flame-graph input.flame-hide", "Enter");
  await page.waitForFunction(() => ![...document.querySelectorAll("#flame-graph svg g.frame")].some((g) => g.getAttribute("name")?.startsWith("main")));
  assert.deepEqual(await names(), ["all", "factorial", "ping", "pong"]);
  // The call graph's focus and hide (pprof's), typed as a person would.
  const graphNodes = () => page.$$eval("#call-graph svg g.node title", (ts) => ts.map((t) => t.textContent).sort());
  await page.fill(".graph-tools input.graph-focus", "^beta$");
  await page.press(".graph-tools input.graph-focus", "Enter");
  await page.waitForFunction(() => document.querySelectorAll("#call-graph svg g.node").length === 3);
  assert.deepEqual(await graphNodes(), ["alpha", "beta", "gamma"]);
  await page.fill(".graph-tools input.graph-focus", "");
  await page.fill(".graph-tools input.graph-hide", "^(ping|pong)$");
  await page.press(".graph-tools input.graph-hide", "Enter");
  await page.waitForFunction(() => ![...document.querySelectorAll("#call-graph svg g.node title")].some((t) => t.textContent === "ping"));
  assert.deepEqual(await graphNodes(), ["alpha", "beta", "factorial", "gamma", "main"]);
  // ignore: alpha goes, and beta and gamma, which only alpha's calls reach, with it.
  await page.fill(".graph-tools input.graph-hide", "");
  await page.fill(".graph-tools input.graph-ignore", "^alpha$");
  await page.press(".graph-tools input.graph-ignore", "Enter");
  await page.waitForFunction(() => ![...document.querySelectorAll("#call-graph svg g.node title")].some((t) => t.textContent === "alpha"));
  assert.deepEqual(await graphNodes(), ["factorial", "main", "ping", "pong"]);
  await page.fill(".graph-tools input.graph-ignore", "");
  await page.press(".graph-tools input.graph-ignore", "Enter");
  await page.waitForFunction(() => document.querySelectorAll("#call-graph svg g.node").length === 7);
  // Pan and zoom as a person would: the wheel zooms in about the pointer, a drag pans, "+"
  // zooms further, Fit shows the whole graph again, and a click on a node still selects it.
  const viewport = () => page.$eval("#call-graph svg g.viewport", (g) => g.getAttribute("transform") ?? "");
  const scale = (t) => Number(/scale\(([-\d.e]+)\)/.exec(t)?.[1] ?? 1);
  const shift = (t) => (/translate\(([-\d.e]+),\s*([-\d.e]+)\)/.exec(t) ?? [0, 0, 0]).slice(1).map(Number);
  const box = await page.$eval("#call-graph svg", (svg) => { const r = svg.getBoundingClientRect(); return { x: r.x, y: r.y, w: r.width, h: r.height }; });
  await page.mouse.move(box.x + box.w / 2, box.y + box.h / 2);
  await page.mouse.wheel(0, -400);
  await page.waitForFunction(() => /scale/.test(document.querySelector("#call-graph svg g.viewport")?.getAttribute("transform") ?? ""));
  const zoomed = await viewport();
  assert.ok(scale(zoomed) > 1.2, zoomed);
  await page.mouse.down();
  await page.mouse.move(box.x + box.w / 2 + 80, box.y + box.h / 2 + 40, { steps: 5 });
  await page.mouse.up();
  const panned = await viewport();
  // The drawing follows the pointer: 80 by 40 px, in the viewBox's units (its scale to pixels).
  const [dx, dy] = [0, 1].map((i) => shift(panned)[i] - shift(zoomed)[i]);
  assert.ok(dx > 0 && dy > 0 && Math.abs(dx / dy - 2) < 0.2, `${zoomed} -> ${panned}`);
  await page.click(".graph-tools button.graph-view[title='zoom in']");
  await page.waitForFunction((before) => document.querySelector("#call-graph svg g.viewport")?.getAttribute("transform") !== before, panned);
  assert.ok(scale(await viewport()) > scale(panned) * 1.4);
  await page.click(".graph-tools button.graph-view[title='the whole graph']");
  await page.waitForFunction(() => document.querySelector("#call-graph svg g.viewport")?.getAttribute("transform") === "translate(0,0) scale(1)");
  await page.click("#call-graph svg g.node:has(title:text-is('gamma'))");
  await page.waitForFunction(() => document.querySelector("#focus h3")?.textContent?.startsWith("gamma"));
  // speedscope's sandwich of beta: its callers (alpha, then main) and its callee (gamma).
  await page.fill("#flame-graph input.flame-hide", "");
  await page.fill("#flame-graph input.flame-ignore", "");
  await page.fill("#flame-graph input.flame-focus", "^beta$");
  await page.selectOption("#flame-graph select.flame-view", "sandwich");
  await page.waitForSelector("#flame-graph .sandwich-callees svg g.frame");
  const part = (which) => page.$$eval(`#flame-graph .sandwich-${which} svg g.frame`, (gs) => gs.map((g) => g.getAttribute("name")?.split(" ")[0]).sort());
  assert.deepEqual(await part("callers"), ["alpha", "beta", "main"]);
  assert.deepEqual(await part("callees"), ["beta", "gamma"]);
  assert.deepEqual(errors, []);
  await close();
});

// A time window on a session: "its last 10 s" sums the records received then, in the flat
// profile, the call graph and the flame graph alike (the API's from=), and says so.
test("profile: a time window, the session's last seconds, from the page's choice", async () => {
  const live = await api("GET", `/api/v1/sessions/${sessions.live}`);
  assert.equal(live.state, "completed", "the live test stopped it: its windows are fixed");
  const requests = [];
  const { page, errors, close } = await open(`/sessions/${sessions.live}`);
  page.on("request", (r) => requests.push(r.url()));
  await page.waitForSelector("#flat tbody tr");
  await page.selectOption("#window", "10");
  await page.waitForFunction(() => location.search.includes("last=10"));
  await page.waitForSelector("#flat tbody tr");
  await page.waitForSelector("#flame-graph svg g.frame");
  const from = BigInt(live.ended_ns) - 10_000_000_000n;
  const windowed = await api("GET", `/api/v1/sessions/${sessions.live}/profile?from=${from}`);
  const meta = await page.textContent("main p.meta:has-text('samples')");
  assert.match(meta, new RegExp(`\\(${windowed.total_samples.toLocaleString("en-US")} samples\\)`), meta);
  for (const part of ["/profile?", "/export/folded?"]) {
    const asked = requests.filter((u) => u.includes(part) && u.includes("from="));
    assert.ok(asked.length > 0, `${part} asked with from=: ${requests.join(" ")}`);
    assert.equal(BigInt(new URL(asked[0]).searchParams.get("from")), from);
  }
  // Back to the whole session.
  await page.selectOption("#window", "");
  await page.waitForFunction(() => !location.search.includes("last="));
  const whole = await api("GET", `/api/v1/sessions/${sessions.live}/profile`);
  await page.waitForFunction((n) => document.querySelector("main")?.textContent?.includes(`(${n} samples)`), whole.total_samples.toLocaleString("en-US"));
  assert.ok(whole.total_samples >= windowed.total_samples);
  assert.deepEqual(errors, []);
  await close();
});

test("real firmware: profiler-runtime functions marked as overhead, figures as gprof's", async (t) => {
  if (!fs.existsSync(path.join(thesis, "blink1hex.txt"))) {
    console.log(`SKIP real-firmware browser test: ${thesis} is absent`);
    t.skip(`${thesis} is absent`);
    return;
  }
  const firmware = await api("PUT", "/api/v1/firmware", fs.readFileSync(path.join(thesis, "blinky.elf")));
  const session = await api("POST", `/api/v1/sessions/import?format=hex&board=thesis&firmware=${firmware.id}`, fs.readFileSync(path.join(thesis, "blink1hex.txt")));
  const { page, errors, close } = await open(`/sessions/${session.id}`);
  await page.waitForSelector("#call-graph svg g.node");
  // gprof's flat profile: "  9.51     16.58     1.64                             _mcount_internal"
  const gprofPercent = (name) => {
    const line = fs.readFileSync(path.join(thesis, "blink1gprof.txt"), "utf8").split("\n").find((l) => l.trim().endsWith(` ${name}`) && /^\s*[0-9.]+\s+[0-9.]+\s+[0-9.]+/.test(l));
    return line.trim().split(/\s+/)[0];
  };
  for (const name of ["_mcount_internal", "__gnu_mcount_nc"]) {
    const row = page.locator(`#flat tbody tr:has(button.fn:text-is("${name}"))`);
    assert.match(await row.getAttribute("class"), /overhead/, name);
    assert.equal(await row.locator(".tag").textContent(), "overhead");
    assert.equal((await row.locator("td").first().textContent()).trim(), `${gprofPercent(name)} %`, name);
  }
  const marked = await page.$$eval("#flat tbody tr.overhead button.fn", (b) => b.map((x) => x.textContent).sort());
  assert.deepEqual(marked, ["__gnu_mcount_nc", "_mcount_internal"]);
  await screenshot(page, "profile-thesis");
  assert.deepEqual(errors, []);
  await close();
});

// Real firmware in QEMU: target-fw's nested example (a -pg timer interrupt preempting -pg calls,
// so spontaneous callers and the profiler's own functions), the table line for line as gprof -b
// prints the gmon.out the page downloads.
test("real firmware: the nested example's call-graph table is gprof's, line for line", async (t) => {
  const qemu = (() => {
    try {
      return execFileSync("sh", ["-c", "command -v qemu-system-arm"]).toString().trim();
    } catch {
      return "";
    }
  })();
  if (!qemu || !fs.existsSync(path.join(path.dirname(binary), "target-fw", "nested-mps2-an385-framed.elf"))) {
    console.log("SKIP the nested-firmware browser test: qemu-system-arm or the built target-fw is missing (./setup.sh; cmake --build build)");
    t.skip("qemu-system-arm or target-fw missing");
    return;
  }
  rackprof("demo", "--qemu", "--example", "nested", "--dir", "nested");
  const firmware = await api("PUT", "/api/v1/firmware", fs.readFileSync(path.join(dir, "nested", "firmware.elf")));
  const session = await api("POST", `/api/v1/sessions/import?format=bin&protocol=framed&board=nested&firmware=${firmware.id}`, fs.readFileSync(path.join(dir, "nested", "capture.bin")));
  const { page, errors, close } = await open(`/sessions/${session.id}`);
  const [download] = await Promise.all([page.waitForEvent("download"), page.click('a.download[data-kind="gmon.out"]')]);
  const file = path.join(dir, "nested-downloaded.gmon.out");
  await download.saveAs(file);
  const report = execFileSync(gprof, ["-b", path.join(dir, "nested", "firmware.elf"), file]).toString();
  const gprofLines = gprofCallGraph(report);
  assert.ok(gprofLines.some((l) => /<spontaneous>/.test(l)) && gprofLines.some((l) => /\b3000\/3000 +work \[/.test(l)), report);
  assert.deepEqual(await shownCallGraph(page), gprofLines);
  assert.deepEqual(errors, []);
  await close();
});

// The synchronisation alarm: the synced model's loop lasts exactly the sampling period, so a
// fixed period samples one PC; against its dithered run the profile page warns, and a run
// against itself does not.
test("profile: the synchronisation alarm against a dithered session, from the page's form", async () => {
  rackprof("simulate", "--model", "synced", "--iterations", "2000", "-o", "synced-fixed.bin", "--write-elf", "synced.elf");
  rackprof("simulate", "--model", "synced", "--iterations", "2000", "--dither", "125", "-o", "synced-dithered.bin");
  const firmware = await api("PUT", "/api/v1/firmware", fs.readFileSync(path.join(dir, "synced.elf")));
  const fixed = (await api("POST", `/api/v1/sessions/import?format=bin&board=synced&firmware=${firmware.id}`, fs.readFileSync(path.join(dir, "synced-fixed.bin")))).id;
  const dithered = (await api("POST", `/api/v1/sessions/import?format=bin&board=synced&firmware=${firmware.id}`, fs.readFileSync(path.join(dir, "synced-dithered.bin")))).id;
  const { page, errors, close } = await open(`/sessions/${fixed}`);
  await page.waitForSelector("#flat tbody tr");
  assert.equal(await page.locator("#sync-warning").count(), 0);
  await page.fill('#sync-form input[name="sync_reference"]', String(dithered));
  await page.click('#sync-form button[type="submit"]');
  await page.waitForSelector("#sync-warning");
  const profile = await api("GET", `/api/v1/sessions/${fixed}/profile?sync_reference=${dithered}`);
  assert.equal(profile.sync_check.synchronised, true);
  assert.equal((await page.textContent("#sync-warning")).trim(), profile.sync_check.warning);
  assert.match(profile.sync_check.warning, /compute \(100\.0 % fixed/);
  await screenshot(page, "profile-sync-warning");
  await page.goto(`${base}/sessions/${dithered}?sync_reference=${dithered}`);
  await page.waitForSelector("#sync-ok");
  assert.equal(await page.locator("#sync-warning").count(), 0);
  // The field says what the other session must be.
  assert.match(await page.textContent("#sync-help"), /same build with the sampling period dithered/);
  assert.deepEqual(errors, []);
  await close();
  // A session of another build is refused (409), and the page says why instead of flagging
  // every function.
  const other = await open(`/sessions/${fixed}?sync_reference=${sessions.a}`);
  await other.page.waitForSelector('p.error[role="alert"]');
  assert.match(await other.page.textContent('p.error[role="alert"]'), /another build/);
  assert.equal(await other.page.locator("#sync-warning").count(), 0);
  await other.close();
});
