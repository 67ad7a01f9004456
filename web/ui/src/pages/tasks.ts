// The profile page's RTOS part (docs/tasks.md): the task picker and each task's share, the
// interrupts' invocations, and the timeline of a window of the session (flame-chart-js).
// All three are decoded again from the session's raw bytes on request.
import { api, type ExceptionRow, type Interrupts, type TaskRow, type Tasks } from "../api";
import { alertText, form, formText, h, replace } from "../dom";
import { count, intervalTitle, percent, plusMinus } from "../format";
import { drawTimeline, timelineTracks, type SliceChoice } from "../timeline";

// A session stored from a capture's bytes (bin, hex), which the views decode again; an imported
// gmon.out or Tiva report has none.
export const isCapture = (format: string) => format === "bin" || format === "hex";

// The pseudo tasks the daemon charges what no task can be: "(no task)" before the first switch,
// "(unknown)" after a loss until the next. A session has tasks when it has any other.
export const isPseudoTask = (name: string) => /^\(.*\)$/.test(name);
export const hasTasks = (tasks: Tasks | undefined) =>
  !!tasks && tasks.tasks.some((t) => !isPseudoTask(t.name));

// The tasks a profile can be narrowed to: the real ones, and a pseudo task with samples or calls.
export const pickable = (tasks: Tasks): TaskRow[] =>
  tasks.tasks.filter((t) => !isPseudoTask(t.name) || t.samples > 0 || (t.calls ?? 0) > 0);

// "all tasks" (value "") and each pickable task; choosing one calls `choose` with its name
// ("" for all).
export function taskPicker(tasks: Tasks, current: string | undefined, choose: (t: string) => void) {
  return h(
    "label",
    {},
    "Task ",
    h(
      "select",
      {
        id: "task",
        name: "task",
        onchange: (e: Event) => choose((e.target as HTMLSelectElement).value),
      },
      h("option", { value: "", selected: current === undefined }, "all tasks"),
      pickable(tasks).map((t) =>
        h("option", { value: t.name, selected: t.name === current }, t.name),
      ),
    ),
  );
}

// Each task's share of the PC samples with its 95 % interval, its samples, its share of the
// cycles between switches, its switches and calls, and whether it was deleted; a task's name
// narrows the profile to it.
export function tasksTable(tasks: Tasks, current: string | undefined, choose: (t: string) => void) {
  const row = (t: TaskRow) =>
    h(
      "tr",
      { class: t.name === current ? "selected" : undefined, "data-task": t.name },
      h(
        "th",
        { scope: "row", class: "mono" },
        h(
          "button",
          {
            type: "button",
            class: "fn",
            title: `the profile of ${t.name}`,
            onclick: () => choose(t.name),
          },
          t.name,
        ),
      ),
      h("td", { class: "num share" }, percent(t.share_percent)),
      h(
        "td",
        { class: "num interval", title: intervalTitle(t.share_interval as [number, number], "%") },
        plusMinus(t.share_interval as [number, number]),
      ),
      h("td", { class: "num samples" }, count(t.samples)),
      h(
        "td",
        { class: "num cycles" },
        t.cycles_percent === undefined ? "—" : percent(t.cycles_percent),
      ),
      h("td", { class: "num switches" }, count(t.switches)),
      h("td", { class: "num calls" }, count(t.calls)),
      h("td", { class: "deleted" }, t.deleted ? "deleted" : ""),
    );
  return [
    h(
      "table",
      { class: "data", id: "tasks" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", { scope: "col" }, "Task"),
          h("th", { scope: "col", title: "share of the PC samples" }, "Share %"),
          h("th", { scope: "col" }, "± (95 %)"),
          h("th", { scope: "col" }, "Samples"),
          h(
            "th",
            {
              scope: "col",
              title: "share of the cycles between its switch-ins and the next switches",
            },
            "Cycles %",
          ),
          h("th", { scope: "col" }, "Switches"),
          h("th", { scope: "col" }, "Calls"),
          h("th", { scope: "col" }, ""),
        ),
      ),
      h("tbody", {}, tasks.tasks.map(row)),
    ),
    h(
      "p",
      { class: "muted" },
      `${count(tasks.samples)} samples · ${count(tasks.cycles)} cycles between switches`,
      tasks.losses
        ? ` · ${count(tasks.losses)} losses (what followed each, until the next switch, is "(unknown)")`
        : "",
    ),
  ];
}

// Per exception: invocations, total, mean, max and p99 cycles, share of the session's span,
// and invocations a loss or the capture's end left incomplete.
export function interruptsTable(interrupts: Interrupts) {
  const row = (e: ExceptionRow) =>
    h(
      "tr",
      { "data-exception": e.exception },
      h(
        "th",
        { scope: "row", class: "mono" },
        e.name,
        e.source === "dwt"
          ? h("span", { class: "tag", title: "from the DWT exception trace's timestamps" }, "dwt")
          : "",
      ),
      h("td", { class: "num count" }, count(e.count)),
      h("td", { class: "num" }, count(e.total_cycles)),
      h("td", { class: "num" }, e.mean_cycles === undefined ? "—" : e.mean_cycles.toFixed(1)),
      h("td", { class: "num" }, count(e.max_cycles)),
      h("td", { class: "num" }, count(e.p99_cycles)),
      h("td", { class: "num" }, e.share_percent == null ? "—" : percent(e.share_percent)),
      h("td", { class: "num" }, count(e.incomplete)),
    );
  return h(
    "table",
    { class: "data", id: "interrupts" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ...[
          "Exception",
          "Invocations",
          "Total cycles",
          "Mean",
          "Max",
          "p99",
          "Share",
          "Incomplete",
        ].map((t) => h("th", { scope: "col" }, t)),
      ),
    ),
    h("tbody", {}, interrupts.exceptions.map(row)),
  );
}

// The timeline of a window of the session: a form for the window (ms of target time from the
// first stamp; the first second at first) and the drawing. `box` carries what was drawn as data
// attributes (data-slices: the library's nodes, data-from-ns, data-to-ns: the window asked for).
export const kTimelineFirstMs = 1000;
export function timelineView(sid: number, onSlice: (choice: SliceChoice) => void) {
  const box = h("div", { class: "timeline", id: "timeline" });
  const note = h("p", { class: "muted", id: "timeline-note", "aria-live": "polite" });
  // The window's unit: ms (the API's ns), or cycles where the daemon knows no clock.
  let perUnit = 1e6;
  const unitLabels = [" ms", " ms"].map((t) => h("span", { class: "unit" }, t));
  let stop: (() => void) | undefined;
  const show = async (fromUnits: number, toUnits: number | undefined) => {
    stop?.();
    stop = undefined;
    replace(note, "Loading the timeline…");
    const from = Math.round(fromUnits * perUnit);
    const to = toUnits === undefined ? undefined : Math.round(toUnits * perUnit);
    try {
      const timeline = timelineTracks(await api.timeline(sid, { from, to }));
      if (timeline.units === "cycles") {
        perUnit = 1;
        for (const u of unitLabels) u.textContent = " cycles";
      }
      box.dataset.fromNs = String(from);
      box.dataset.toNs = to === undefined ? "" : String(to);
      box.dataset.slices = String(timeline.slices);
      if (!timeline.slices) {
        box.replaceChildren();
        replace(note, "No slices in this window.");
        return;
      }
      stop = await drawTimeline(box, timeline, onSlice);
      const span =
        timeline.spanNs === undefined
          ? ""
          : ` of the session's ${(timeline.spanNs / 1e6).toFixed(1)} ms`;
      replace(
        note,
        `${count(timeline.slices)} slices on ${timeline.tracks.length} tracks${span}; wheel to zoom, drag to pan, drag on the overview to choose a span; click a slice: a function's callers and callees and source, a task's profile.`,
        timeline.leftOut
          ? h(
              "span",
              { class: "worse" },
              ` ${count(timeline.leftOut)} events left out (the daemon's limit): choose a shorter window.`,
            )
          : "",
      );
    } catch (e) {
      box.replaceChildren();
      replace(note, alertText(`The timeline could not be loaded: ${(e as Error).message}`));
    }
  };
  const windowForm = form(
    { class: "inline", id: "timeline-form" },
    (data) => {
      const from = Number(formText(data, "from") || 0);
      const toText = formText(data, "to").trim();
      void show(Math.max(0, from), toText ? Number(toText) : undefined);
    },
    h(
      "label",
      {},
      "from ",
      h("input", { name: "from", type: "number", min: 0, step: "any", value: 0, size: 8 }),
      unitLabels[0],
    ),
    " ",
    h(
      "label",
      {},
      "to ",
      h("input", {
        name: "to",
        type: "number",
        min: 0,
        step: "any",
        value: kTimelineFirstMs,
        size: 8,
        placeholder: "the end",
      }),
      unitLabels[1],
    ),
    " ",
    h("button", { type: "submit" }, "Show"),
    h(
      "span",
      { class: "muted" },
      " (target time from the first stamp; an empty end: to the session's end)",
    ),
  );
  return {
    nodes: [windowForm, note, box],
    show: () => show(0, kTimelineFirstMs),
    stop: () => stop?.(),
  };
}
