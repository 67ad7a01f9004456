// An RTOS session's tasks, interrupts and timeline on its profile page, in headless Chromium
// (Debian's) driven by playwright-core, against a real `rackprof serve`. The capture is made
// here: target-fw's rtos example (enter-exit build: three workers sensor/control/logger and
// idle under a round-robin kernel, one timer interrupt that fires 400 times) runs under QEMU
// (mps2-an385, -icount) and its UART output is imported through the API with its ELF.
// Checks: the task picker lists the tasks; the share table's numbers are /tasks' JSON; choosing
// a task shows that task's flat profile (mix with the task's calls, as /api/v1/profile?task=
// has it); the interrupts table shows IRQ8 invoked 400 times; the timeline is drawn on a canvas
// with as many slices as the /timeline JSON of its window has B events.
// Skips (exit 77) when Chromium, node_modules, the built dashboard, the binary, QEMU or the ELF
// (built by the main build) are missing.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { launchBrowser, source, startDaemon } from "./daemon.mjs";
import { artifacts, chromium, openPage, requireBrowser, screenshot, serverConfig, skipper, tearDown } from "./harness.mjs";

const skip = skipper("tasks browser tests");
requireBrowser(skip);
const elf = process.env.RACKPROF_RTOS_ELF ?? path.join(source, "build/target-fw/rtos-mps2-an385-enter-exit.elf");
const qemu = (() => {
  try {
    return execFileSync("sh", ["-c", "command -v qemu-system-arm"]).toString().trim();
  } catch {
    return "";
  }
})();
if (!qemu) skip("qemu-system-arm is missing (apt-get install qemu-system-arm)");
if (!fs.existsSync(elf)) skip(`${elf} is not built (the main build makes target-fw's examples)`);

const { chromium: playwright } = await import("playwright-core");

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rackprof-tasks-"));
let daemon;
let base;
let browser;
let sid;
const kTasks = ["sensor", "control", "logger", "idle"];
const kTicks = 400; // the example's RUN_TICKS: its timer interrupt's invocations

const api = (method, url, body) => daemon.api(method, url, body);
const number = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

before(async () => {
  fs.mkdirSync(artifacts, { recursive: true });
  const capture = path.join(dir, "rtos.bin");
  execFileSync(qemu, ["-M", "mps2-an385", "-display", "none", "-monitor", "none", "-icount", "shift=5,sleep=off", "-semihosting-config", "enable=on,target=native", "-serial", `file:${capture}`, "-kernel", elf], { timeout: 60000, stdio: ["ignore", "pipe", "pipe"] });
  assert.ok(fs.statSync(capture).size > 1000, "QEMU wrote the capture");
  daemon = await startDaemon(dir, serverConfig(`${dir}/rack.db`));
  base = daemon.base;
  const firmware = await api("PUT", "/api/v1/firmware", fs.readFileSync(elf));
  sid = (await api("POST", `/api/v1/sessions/import?format=bin&protocol=framed&board=rtos&firmware=${firmware.id}`, fs.readFileSync(capture))).id;
  browser = await launchBrowser(playwright, chromium, dir);
});

after(() => tearDown(browser, daemon, dir));

const open = (url) => openPage(browser, base, url);
const flatRows = (page) =>
  page.$$eval("#flat tbody tr", (trs) => trs.map((tr) => [tr.querySelector("th")?.textContent.replace(/overhead$/, "").trim(), ...[...tr.querySelectorAll("td")].map((td) => td.textContent.trim())]));

test("the task picker, the share table as /tasks has it, and a task's own profile", async () => {
  const tasks = await api("GET", `/api/v1/sessions/${sid}/tasks`);
  const { page, errors } = await open(`/sessions/${sid}`);
  await page.waitForSelector("#task option[value='sensor']", { state: "attached" });
  const options = await page.$$eval("#task option", (os) => os.map((o) => [o.value, o.textContent]));
  assert.deepEqual(options[0], ["", "all tasks"]);
  for (const name of kTasks) assert.ok(options.some(([v]) => v === name), `${name} in the picker: ${JSON.stringify(options)}`);

  // The share table: each row's numbers are the API's, as the page formats them.
  await page.waitForSelector("#tasks tbody tr");
  const rows = await page.$$eval("#tasks tbody tr", (trs) =>
    trs.map((tr) => ({ task: tr.dataset.task, cells: [...tr.querySelectorAll("td")].map((td) => td.textContent.trim()), interval: tr.querySelector("td.interval")?.getAttribute("title") })),
  );
  assert.equal(rows.length, tasks.tasks.length);
  for (const t of tasks.tasks) {
    const row = rows.find((r) => r.task === t.name);
    assert.ok(row, `row of ${t.name}`);
    const [share, plusMinus, samples, cycles, switches, calls, deleted] = row.cells;
    assert.equal(share, `${t.share_percent.toFixed(2)} %`, `${t.name} share`);
    assert.equal(plusMinus, `±${((t.share_interval[1] - t.share_interval[0]) / 2).toFixed(2)}`, `${t.name} interval`);
    assert.match(row.interval, new RegExp(`${t.share_interval[0].toFixed(2)}–${t.share_interval[1].toFixed(2)} %`));
    assert.equal(samples, number.format(t.samples), `${t.name} samples`);
    assert.equal(cycles, `${t.cycles_percent.toFixed(2)} %`, `${t.name} cycles %`);
    assert.equal(switches, number.format(t.switches), `${t.name} switches`);
    assert.equal(calls, number.format(t.calls), `${t.name} calls`);
    assert.equal(deleted, t.deleted ? "deleted" : "", `${t.name} deleted`);
  }
  // All tasks: mix called by the three workers together.
  const all = await api("GET", `/api/v1/sessions/${sid}/profile?graph_top=0`);
  const mixAll = all.flat.find((r) => r.name === "mix");
  await page.waitForSelector("#flat tbody tr");
  assert.equal((await flatRows(page)).find((r) => r[0] === "mix")?.[6], number.format(mixAll.calls));

  // Choosing a task: the flat profile becomes that task's, as the API's selection has it.
  for (const name of ["sensor", "logger"]) {
    const own = await api("GET", `/api/v1/profile?session=${sid}&task=${name}&graph_top=0`);
    const mix = own.flat.find((r) => r.name === "mix");
    assert.ok(mix && mix.calls > 0 && mix.calls < mixAll.calls, `${name} calls mix: ${JSON.stringify(mix)}`);
    await page.selectOption("#task", name);
    await page.waitForFunction((n) => document.querySelector("h1")?.textContent.endsWith(`task ${n}`) && document.querySelector("#flat tbody tr"), name);
    assert.equal(new URL(page.url()).searchParams.get("task"), name);
    const flat = await flatRows(page);
    assert.equal(flat.length, own.flat.length, `${name}: the task's flat rows`);
    const row = flat.find((r) => r[0] === "mix");
    assert.ok(row, `mix in ${name}'s flat profile`);
    assert.equal(row[1], `${mix.percent.toFixed(2)} %`, `${name}: mix self %`);
    assert.equal(row[6], number.format(mix.calls), `${name}: mix calls`);
    assert.ok(await page.$(`#tasks tr.selected[data-task='${name}']`), `${name} highlighted in the table`);
    // The downloads are the task's selection's.
    const href = await page.$eval("p.downloads a.download[data-format='folded']", (a) => a.getAttribute("href"));
    assert.equal(href, `/api/v1/profile/export/folded?session=${sid}&task=${name}`);
  }
  await screenshot(page, "tasks");
  // Back to all tasks.
  await page.selectOption("#task", "");
  await page.waitForFunction(() => !document.querySelector("h1")?.textContent.includes("· task "));
  await page.waitForSelector("#flat tbody tr");
  assert.equal((await flatRows(page)).find((r) => r[0] === "mix")?.[6], number.format(mixAll.calls));
  assert.deepEqual(errors, []);
  await page.close();
});

test("the interrupts table: IRQ8 invoked once per tick, every row as /interrupts has it", async () => {
  const interrupts = await api("GET", `/api/v1/sessions/${sid}/interrupts`);
  const { page, errors } = await open(`/sessions/${sid}`);
  await page.waitForSelector("#interrupts tbody tr");
  const rows = await page.$$eval("#interrupts tbody tr", (trs) => trs.map((tr) => [tr.querySelector("th").textContent.trim(), ...[...tr.querySelectorAll("td")].map((td) => td.textContent.trim())]));
  const irq = rows.find((r) => r[0] === "IRQ8");
  assert.ok(irq, JSON.stringify(rows));
  assert.equal(irq[1], number.format(kTicks));
  assert.equal(rows.length, interrupts.exceptions.length);
  for (const e of interrupts.exceptions) {
    const row = rows.find((r) => r[0] === e.name);
    assert.deepEqual(row.slice(1, 4), [number.format(e.count), number.format(e.total_cycles), e.mean_cycles.toFixed(1)], e.name);
  }
  assert.deepEqual(errors, []);
  await page.close();
});

test("the timeline: a canvas of flame-chart-js with a slice per B event of its window", async () => {
  const { page, errors } = await open(`/sessions/${sid}`);
  await page.waitForSelector("#timeline canvas");
  await page.waitForFunction(() => document.querySelector("#timeline")?.dataset.slices);
  const shown = await page.$eval("#timeline", (el) => ({ ...el.dataset }));
  const window = (from, to) => `/api/v1/sessions/${sid}/timeline?from=${from}${to ? `&to=${to}` : ""}`;
  const beginnings = (doc) => doc.traceEvents.filter((e) => e.ph === "B").length;
  const first = await api("GET", window(shown.fromNs, shown.toNs));
  assert.ok(beginnings(first) > 0, "the first window has slices");
  assert.equal(Number(shown.slices), beginnings(first));
  const size = await page.$eval("#timeline canvas", (c) => [c.width, c.height]);
  assert.ok(size[0] > 200 && size[1] > 100, `canvas drawn: ${size}`);
  const note = await page.textContent("#timeline-note");
  for (const name of kTasks) assert.ok(first.traceEvents.some((e) => e.ph === "M" && e.args?.name === `task ${name}`), `track of ${name}`);
  assert.match(note, /slices on \d+ tracks/);
  // The whole session (an empty end): the library's nodes are again the document's B events.
  await page.fill("#timeline-form input[name=to]", "");
  await page.click("#timeline-form button[type=submit]");
  await page.waitForFunction(() => document.querySelector("#timeline")?.dataset.toNs === "");
  const whole = await api("GET", window(0));
  const slices = Number(await page.$eval("#timeline", (el) => el.dataset.slices));
  assert.equal(slices, beginnings(whole));
  assert.ok(slices > Number(shown.slices), `the whole session (${slices}) has more than its first second (${shown.slices})`);
  await page.locator("#h-timeline").scrollIntoViewIfNeeded();
  await screenshot(page, "timeline");
  assert.deepEqual(errors, []);
  await page.close();
});

test("a slice clicked: a task's call selects the function, the running task narrows the profile", async () => {
  const { page, errors } = await open(`/sessions/${sid}`);
  await page.waitForFunction(() => document.querySelector("#timeline")?.dataset.rows);
  const rows = JSON.parse(await page.$eval("#timeline", (el) => el.dataset.rows));
  const top = (title) => rows.find((r) => r.title === title)?.top;
  assert.ok(top("running task") !== undefined && top("task sensor") !== undefined, JSON.stringify(rows));
  const canvas = page.locator("#timeline canvas");
  await canvas.scrollIntoViewIfNeeded();
  // The sensor task's outermost slice (worker, its whole life) in the middle of the window.
  const { width } = await canvas.boundingBox();
  await canvas.click({ position: { x: width / 2, y: top("task sensor") + 8 } });
  await page.waitForFunction(() => document.querySelector("#focus h3")?.textContent === "worker");
  assert.ok(await page.$("#flat tr.selected button.fn:text-is('worker')"), "worker selected in the flat profile");
  // The running task: a click narrows the profile to the task running there.
  await canvas.click({ position: { x: width / 2, y: top("running task") + 8 } });
  await page.waitForFunction(() => new URL(location.href).searchParams.get("task"));
  const task = new URL(page.url()).searchParams.get("task");
  assert.ok(kTasks.includes(task), `a task chosen: ${task}`);
  await page.waitForFunction((n) => document.querySelector("h1")?.textContent.endsWith(`task ${n}`), task);
  assert.deepEqual(errors, []);
  await page.close();
});
