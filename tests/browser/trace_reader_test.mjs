// The `trace` export (Trace Event format, docs/tasks.md) read by a real reader: speedscope's web
// app (npm `speedscope`, its dist/release), served here from a local server on a free port and
// driven in Debian's headless Chromium by playwright-core. It loads the trace through
// `#profileURL=`; what it understood is read twice: from its DOM (the profile selector, one
// profile per track, and the sandwich view's symbol names of each profile) and from its own
// Export (the speedscope file of its model: every slice it opened and closed, exact). Both are
// checked against what this test computes from the JSON it fed it, independently: the tracks
// (pid/tid with B/E slices) and their thread_name, and per track each slice name's count and
// total duration, pairing every E with the innermost open B of its thread as the format says.
//
//   node trace_reader_test.mjs TRACE.json   a given trace (or RACKPROF_TRACE=TRACE.json)
//   node trace_reader_test.mjs --convert    a capture written here (framed v5: two tasks, calls,
//                                           SysTick) through `rackprof convert --export trace`
//                                           ($RACKPROF_BINARY, build/rackprof by default; the
//                                           ELF $RACKPROF_TRACE_ELF, else target-fw's framed
//                                           blinky beside the binary, else none: hex names)
//   node trace_reader_test.mjs              a small hand-made trace, written here
//
// RACKPROF_TRACE_TRACKS=N also requires the trace to have N tracks (--convert knows its own: 4,
// and with the ELF each track's slices: what the capture sent).
// Skips (exit 77) when Chromium, node_modules (playwright-core, speedscope) or, for --convert,
// the binary is missing.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { binary, launchBrowser, source } from "./daemon.mjs";
import { chromium, skipper } from "./harness.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const speedscope = path.join(here, "node_modules/speedscope/dist/release");
const skip = skipper("trace reader test");
if (!fs.existsSync(chromium)) skip(`${chromium} is missing (apt-get install chromium; ./setup.sh)`);
if (!fs.existsSync(path.join(here, "node_modules/playwright-core")) || !fs.existsSync(path.join(speedscope, "index.html")))
  skip("tests/browser/node_modules is missing (./setup.sh installs it)");
const { chromium: playwright } = await import("playwright-core");

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rackprof-trace-reader-"));
const arg = process.argv[2];
let expectedTracks = process.env.RACKPROF_TRACE_TRACKS ? Number(process.env.RACKPROF_TRACE_TRACKS) : undefined;
let tracePath;
let truth; // --convert: the slices the capture holds, per thread name
if (arg === "--convert") {
  if (!fs.existsSync(binary)) skip(`${binary} is not built`);
  tracePath = convertedTrace();
  expectedTracks ??= 4; // running task, interrupts, task sensor, task blink
} else if (arg ?? process.env.RACKPROF_TRACE) {
  tracePath = path.resolve(arg ?? process.env.RACKPROF_TRACE);
} else {
  tracePath = path.join(dir, "hand-made.json");
  fs.writeFileSync(tracePath, JSON.stringify(handMadeTrace()));
}
console.log(`trace: ${tracePath}`);
const doc = JSON.parse(fs.readFileSync(tracePath, "utf8"));

// ---- What the trace says, computed here from its events (not from any reader) ----

// speedscope names a frame by its B event's name and, when it has them, its args.
const frameName = (b) => (b.args ? `${b.name} ${JSON.stringify(b.args)}` : b.name);
// Per track ("pid:tid" with B/E or X events): its process and thread names and its slices.
// Events need not be sorted: per thread, by ts, ties in file order; an E closes the innermost
// open B of its thread whatever its name (the format's rule; the name of an E is optional).
function tracksOf(trace) {
  const events = Array.isArray(trace) ? trace : trace.traceEvents;
  assert.ok(Array.isArray(events), "no traceEvents");
  const processes = new Map();
  const threads = new Map();
  const byThread = new Map();
  for (const e of events) {
    const key = `${e.pid}:${e.tid}`;
    if (e.ph === "M" && e.name === "process_name") processes.set(e.pid, e.args?.name);
    if (e.ph === "M" && e.name === "thread_name") threads.set(key, e.args?.name);
    if (e.ph === "B" || e.ph === "E" || e.ph === "X") {
      if (!byThread.has(key)) byThread.set(key, []);
      byThread.get(key).push(e);
    }
  }
  const tracks = new Map();
  for (const [key, list] of byThread) {
    const sorted = list.map((e, i) => ({ e, i })).sort((a, b) => a.e.ts - b.e.ts || a.i - b.i).map((x) => x.e);
    const open = [];
    const slices = [];
    for (const e of sorted) {
      if (e.ph === "X") slices.push({ name: frameName(e), dur: e.dur ?? 0 });
      else if (e.ph === "B") open.push(e);
      else {
        const b = open.pop();
        assert.ok(b, `track ${key}: an E at ts ${e.ts} closes nothing (the trace is unbalanced)`);
        slices.push({ name: frameName(b), dur: e.ts - b.ts });
      }
    }
    assert.equal(open.length, 0, `track ${key}: ${open.length} B event(s) never closed (${open.map((b) => b.name).join(", ")})`);
    const [pid, tid] = key.split(":").map(Number);
    tracks.set(key, { pid, tid, process: processes.get(pid), thread: threads.get(key), slices });
  }
  return tracks;
}

// name -> { count, total } of a list of { name, dur }.
function bySlice(slices) {
  const out = {};
  for (const s of slices) {
    out[s.name] ??= { count: 0, total: 0 };
    ++out[s.name].count;
    out[s.name].total += s.dur;
  }
  return out;
}

// speedscope's label of a track (its importer's: process, pid, thread, tid).
function label({ pid, tid, process, thread }) {
  if (process != null && thread != null) return `${process} (pid ${pid}), ${thread} (tid ${tid})`;
  if (process != null) return `${process} (pid ${pid}, tid ${tid})`;
  if (thread != null) return `${thread} (pid ${pid}, tid ${tid})`;
  return `pid ${pid}, tid ${tid}`;
}

// The slices of a speedscope file's evented profile: each O paired with its C.
function exportedSlices(file, profile) {
  const open = [];
  const slices = [];
  for (const ev of profile.events) {
    if (ev.type === "O") open.push(ev);
    else {
      const o = open.pop();
      assert.ok(o && o.frame === ev.frame, `${profile.name}: speedscope's export closes frame ${ev.frame} that is not open`);
      slices.push({ name: file.shared.frames[ev.frame].name, dur: ev.at - o.at });
    }
  }
  return slices;
}

// ---- speedscope in Chromium ----

let server;
let browser;
let page;
const warnings = []; // speedscope's import warnings: shown when a check fails
before(async () => {
  server = http.createServer((req, res) => {
    const url = new URL(req.url, "http://localhost").pathname;
    const file = url === "/trace.json" ? tracePath : path.join(speedscope, path.normalize(url === "/" ? "index.html" : url));
    if (!file.startsWith(speedscope) && file !== tracePath) return res.writeHead(403).end();
    if (!fs.existsSync(file) || !fs.statSync(file).isFile()) return res.writeHead(404).end();
    const types = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".json": "application/json", ".png": "image/png", ".woff2": "font/woff2" };
    res.writeHead(200, { "content-type": types[path.extname(file)] ?? "application/octet-stream" });
    fs.createReadStream(file).pipe(res);
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  const base = `http://127.0.0.1:${server.address().port}`;
  browser = await launchBrowser(playwright, chromium, dir, { acceptDownloads: true, viewport: { width: 1400, height: 1600 } });
  page = await browser.newPage();
  page.on("console", (m) => (m.type() === "warning" || m.type() === "error") && !/WebGL|GL Driver/.test(m.text()) && warnings.push(m.text()));
  page.on("pageerror", (e) => warnings.push(String(e)));
  await page.goto(`${base}/index.html#profileURL=${encodeURIComponent(`${base}/trace.json`)}`);
  // Loaded: the toolbar names the profile shown, "(1/N)".
  await page.waitForFunction(() => /\(1\/\d+\)/.test(document.body.innerText), null, { timeout: 60_000 });
});

after(async () => {
  await browser?.close();
  server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const tracks = tracksOf(doc);
const why = () => (warnings.length ? `\nspeedscope warned (first 5 of ${warnings.length}):\n  ${warnings.slice(0, 5).join("\n  ")}` : "");

// The profile selector's rows: "1: name", "2: name", ...
async function selectorNames() {
  await page.getByText(/\(\d+\/\d+\)$/).click();
  await page.waitForSelector('input[placeholder="Filter..."]');
  const names = await page.$$eval("div[title]", (rows) =>
    rows.filter((r) => /^\d+:$/.test(r.querySelector("span")?.textContent ?? "")).map((r) => r.getAttribute("title")),
  );
  await page.keyboard.press("Escape");
  return names;
}

test("speedscope finds one profile per track, named by the track's thread_name", async () => {
  const expected = [...tracks.values()].map(label).sort();
  for (const t of tracks.values()) assert.ok(t.thread, `track pid ${t.pid} tid ${t.tid} has slices but no thread_name`);
  if (expectedTracks !== undefined) assert.equal(tracks.size, expectedTracks, `the trace has ${tracks.size} tracks: ${expected.join("; ")}`);
  const count = Number(/\(1\/(\d+)\)/.exec(await page.evaluate(() => document.body.innerText))[1]);
  assert.equal(count, tracks.size, `speedscope shows ${count} profiles for ${tracks.size} tracks${why()}`);
  assert.deepEqual((await selectorNames()).sort(), expected, why());
});

test("speedscope's sandwich view lists each profile's functions", async () => {
  const names = await selectorNames();
  await page.click("text=Sandwich");
  for (const [i, name] of names.entries()) {
    if (i > 0) {
      await page.getByText(/\(\d+\/\d+\)$/).click();
      await page.getByTitle(name, { exact: true }).click();
      await page.waitForFunction((n) => document.body.innerText.includes(`(${n}/`), i + 1);
    }
    const track = [...tracks.values()].find((t) => label(t) === name);
    const expected = Object.keys(bySlice(track.slices)).sort();
    await page.waitForFunction(() => document.querySelectorAll("tr td:last-child").length > 0);
    const shown = (await page.$$eval("tr td:last-child", (tds) => tds.map((td) => td.textContent))).sort();
    // The table draws the rows in view: all of them when they fit.
    if (expected.length <= 40) assert.deepEqual(shown, expected, `${name}${why()}`);
    else for (const s of shown) assert.ok(expected.includes(s), `${name}: ${s} shown, not in the trace${why()}`);
  }
});

test("speedscope's model, exported: per profile the slices' names, counts and total durations", async () => {
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("text=Export")]);
  const file = JSON.parse(fs.readFileSync(await download.path(), "utf8"));
  assert.match(file.exporter, /^speedscope@/);
  const read = new Map(file.profiles.map((p) => [p.name, p]));
  assert.equal(read.size, tracks.size, `profiles: ${[...read.keys()].join("; ")}${why()}`);
  let slices = 0;
  for (const t of tracks.values()) {
    const profile = read.get(label(t));
    assert.ok(profile, `no profile named ${label(t)}${why()}`);
    assert.equal(profile.type, "evented");
    assert.equal(profile.unit, "microseconds");
    const want = bySlice(t.slices);
    const got = bySlice(exportedSlices(file, profile));
    assert.deepEqual(Object.keys(got).sort(), Object.keys(want).sort(), `${label(t)}: slice names${why()}`);
    for (const [name, w] of Object.entries(want)) {
      const g = got[name];
      assert.equal(g.count, w.count, `${label(t)}: ${name}: ${g.count} slices, the trace has ${w.count}${why()}`);
      assert.ok(Math.abs(g.total - w.total) <= 1e-6 * Math.max(1, w.total),
        `${label(t)}: ${name}: ${g.total} µs in all, the trace has ${w.total} µs${why()}`);
    }
    slices += t.slices.length;
  }
  console.log(`speedscope read ${tracks.size} tracks, ${slices} slices: ${[...tracks.values()].map((t) => `${t.thread} (${t.slices.length})`).join(", ")}`);
});

test("--convert: the trace holds the capture's calls, switches and handlers", { skip: !truth && "not --convert with the ELF" }, () => {
  const counts = Object.fromEntries([...tracks.values()].map((t) => [t.thread, Object.fromEntries(Object.entries(bySlice(t.slices)).map(([n, v]) => [n, v.count]))]));
  assert.deepEqual(counts, truth);
});

// ---- The traces ----

// A small valid trace of rackprof's shape: process and thread names, the running task, an
// interrupt handler, two tasks' nested calls (one open across a switch, one cut by a loss with
// args.cut), an "events lost" instant; ts in µs. Its E events name their B, as the format allows.
function handMadeTrace() {
  const M = (tid, name) => ({ name: tid === 0 ? "process_name" : "thread_name", ph: "M", pid: 1, tid, args: { name } });
  const B = (tid, ts, name, cat) => ({ name, cat, ph: "B", pid: 1, tid, ts });
  const E = (tid, ts, name, args) => ({ name, ph: "E", pid: 1, tid, ts, ...(args ? { args } : {}) });
  return {
    traceEvents: [
      M(0, "capture.bin"), M(1, "running task"), M(2, "interrupts"), M(10, "task idle"), M(11, "task sensor"),
      B(1, 0, "idle", "task"), B(10, 1, "idle_loop", "function"),
      B(2, 3.5, "SysTick_Handler", "interrupt"), E(2, 5, "SysTick_Handler"),
      E(1, 10, "idle"), B(1, 10, "sensor", "task"),
      B(11, 11, "read_sensor", "function"), B(11, 12, "i2c_read", "function"), E(11, 14.25, "i2c_read"),
      B(11, 15, "i2c_read", "function"), E(11, 16, "i2c_read"),
      B(2, 17, "SysTick_Handler", "interrupt"), E(2, 19, "SysTick_Handler"),
      E(1, 20, "sensor"), B(1, 20, "idle", "task"),
      E(10, 24, "idle_loop"), B(10, 24, "wfi", "function"),
      { name: "events lost", ph: "i", s: "p", pid: 1, tid: 1, ts: 26 },
      E(10, 26, "wfi", { cut: "events lost" }), E(1, 26, "idle"),
      B(1, 30, "sensor", "task"), E(11, 31, "read_sensor"), E(1, 32, "sensor"),
    ],
    displayTimeUnit: "ns",
    otherData: { clock_hz: 1000000 },
  };
}

// A framed capture (protocol/framed-protocol.md, version 5) of two tasks calling functions of
// the firmware's ELF, SysTick preempting them, converted by the binary with that ELF.
function convertedTrace() {
  const elf = process.env.RACKPROF_TRACE_ELF ?? path.join(path.dirname(binary), "target-fw/blinky-mps2-an385-framed.elf");
  const nm = "/usr/bin/arm-none-eabi-nm";
  const fn = { main: 0xd4, led_toggle: 0x74, led_set: 0x64, SysTick_Handler: 0x144, text_hi: 0x966 };
  const withElf = fs.existsSync(elf) && fs.existsSync(nm);
  if (withElf) {
    for (const line of execFileSync(nm, ["--defined-only", elf]).toString().split("\n")) {
      const [addr, , name] = line.trim().split(/\s+/);
      if (name in fn) fn[name] = parseInt(addr, 16) & ~1;
      if (name === "__text_end") fn.text_hi = parseInt(addr, 16);
    }
  }
  const frames = [];
  let seq = 0;
  const le = (v, n) => Array.from({ length: n }, (_, i) => (v >>> (8 * i)) & 0xff);
  const crc16 = (bytes) => {
    let crc = 0xffff;
    for (const b of bytes) {
      crc ^= b << 8;
      for (let i = 0; i < 8; ++i) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    return crc;
  };
  const frame = (...items) => {
    const body = [...le(seq++ & 0xffff, 2), ...items.flat()];
    body.push(...le(crc16(body), 2));
    const out = [0];
    let at = 0;
    let code = 1;
    for (const b of body) {
      if (b !== 0) out.push(b), ++code;
      if (b === 0 || code === 0xff) (out[at] = code), (at = out.length), out.push(0), (code = 1);
    }
    out[at] = code;
    frames.push(...out, 0);
  };
  // HELLO v5: 4-byte addresses, events (bit 2) stamped by CYCCNT (bit 3), tasks (bit 6), 1 MHz.
  frame([0x01, 5, 4, 0x4c, ...le(0, 4), ...le(fn.text_hi, 4), ...le(1000, 4), ...le(1_000_000, 4), 0]);
  const tasks = [{ handle: 0x20000100, name: "sensor", fn: fn.led_toggle }, { handle: 0x20000200, name: "blink", fn: fn.led_set }];
  let t = 100;
  for (let round = 0; round < 20; ++round) {
    for (const task of tasks) {
      const name = round === 0 ? [...Buffer.from(task.name)] : [];
      frame([0x13, ...le(task.handle, 4), ...le(t, 4), name.length, ...name], [0x04, ...le(task.fn, 4)]);
      frame([0x09, ...le(task.fn, 4), ...le(fn.main + 0x10, 4), ...le((t += 5), 4)],
        [0x0b, ...le(fn.SysTick_Handler, 4), ...le(0xfffffff9, 4), ...le((t += 5), 4), ...le(15, 2)],
        [0x0c, ...le(fn.SysTick_Handler, 4), ...le(0xfffffff9, 4), ...le((t += 7), 4), ...le(15, 2)],
        [0x0a, ...le(task.fn, 4), ...le(fn.main + 0x10, 4), ...le((t += 5), 4)]);
      t += 3;
    }
  }
  if (withElf) {
    truth = {
      "running task": { sensor: 20, blink: 20 },
      interrupts: { SysTick_Handler: 40 },
      "task sensor": { led_toggle: 20 },
      "task blink": { led_set: 20 },
    };
  }
  const capture = path.join(dir, "capture.bin");
  fs.writeFileSync(capture, Buffer.from(frames));
  const out = path.join(dir, "trace.json");
  const args = ["convert", capture, "--protocol", "framed", ...(withElf ? ["--elf", elf] : []), "--export", "trace", "-o", out];
  console.log(`rackprof ${args.join(" ")}`);
  execFileSync(binary, args, { cwd: dir, stdio: ["ignore", "inherit", "inherit"] });
  return out;
}
