// A session's timeline (GET /api/v1/sessions/{id}/timeline, the Trace Event format) drawn by
// flame-chart-js as rows of slices on a zoomable canvas: the running task, the interrupts, and
// one group per task (its calls, nested). timelineTracks() turns the B/E events into the
// library's nodes (pure, unit-tested); drawTimeline() loads the library (its own chunk, only
// when a session has a timeline) and draws them.
import type { FlameChartNode, Mark } from "flame-chart-js";
import type { TraceEvents } from "./api";
import { h } from "./dom";

// The daemon's tracks (gmon/task_views.cc): 1 which task runs, 2 the handlers, 10 + N task N.
export const kRunningTrack = 1;
export const kInterruptTrack = 2;
export const kFirstTaskTrack = 10;

export type TrackKind = "running" | "interrupts" | "task";

export interface Track {
  tid: number;
  kind: TrackKind;
  title: string; // as the daemon names the track ("running task", "task sensor")
  task?: string; // a task's track: the task's name
  nodes: FlameChartNode[]; // the outermost slices, each with the slices inside it
  slices: number; // every slice of the track (B events)
  depth: number; // rows of nested slices
}

export interface Timeline {
  tracks: Track[]; // the running task, the interrupts, then the tasks; empty tracks left out
  marks: Mark[]; // instants ("events lost")
  slices: number; // every slice of every track: the B events
  units: string; // of the nodes' start and duration: "ms" of target time, or "cycles"
  start: number; // the window's first and last time (units)
  end: number;
  leftOut: number; // events the daemon did not keep (its limit per timeline)
  spanNs?: number; // the whole session's span of target time, where the clock is known
}

// A name's colour: the same name the same colour in every track (a task on the running track
// and its own track's header alike), spread over the hue circle.
export function nameColor(name: string): string {
  let hash = 2166136261;
  for (let i = 0; i < name.length; ++i) hash = Math.imul(hash ^ name.charCodeAt(i), 16777619);
  const hue = (hash >>> 0) % 360;
  return `hsl(${hue}, 55%, 72%)`;
}

const trackKind = (tid: number): TrackKind =>
  tid === kRunningTrack ? "running" : tid === kInterruptTrack ? "interrupts" : "task";

// The Trace Event document into one track of nested nodes per thread. Times (µs in the
// document) become ms of target time, or stay cycles when the daemon knew no clock. Per track,
// each B opens a slice inside the innermost open one and each E closes it; an E with nothing
// open (its B before the window) is dropped, and a slice still open at the end closes at the
// window's last time, marked cut like those a loss cut (args.cut on the E).
export function timelineTracks(doc: TraceEvents): Timeline {
  const other = doc.otherData ?? {};
  const hz = Number(other.clock_hz ?? 0);
  const scale = hz > 0 ? 1e-3 : 1;
  const units = hz > 0 ? "ms" : "cycles";
  const names = new Map<number, string>();
  const tracks = new Map<number, Track>();
  const open = new Map<number, FlameChartNode[]>();
  const marks: Mark[] = [];
  let slices = 0;
  let start = Infinity;
  let end = -Infinity;
  const cut = (node: FlameChartNode) => (node.badge = "#b42318");
  const trackOf = (tid: number) => {
    let track = tracks.get(tid);
    if (!track) {
      const title = names.get(tid) ?? `track ${tid}`;
      const kind = trackKind(tid);
      track = { tid, kind, title, nodes: [], slices: 0, depth: 0 };
      if (kind === "task") track.task = title.replace(/^task /, "");
      tracks.set(tid, track);
    }
    return track;
  };
  for (const e of doc.traceEvents) {
    const tid = e.tid ?? 0;
    if (e.ph === "M") {
      const name = e.args?.name;
      if (e.name === "thread_name")
        names.set(tid, typeof name === "string" ? name : `track ${tid}`);
      continue;
    }
    if (e.ts === undefined) continue;
    const t = e.ts * scale;
    start = Math.min(start, t);
    end = Math.max(end, t);
    if (e.ph === "B") {
      const track = trackOf(tid);
      const stack = open.get(tid) ?? [];
      open.set(tid, stack);
      const name = e.name ?? "?";
      const node: FlameChartNode = { name, start: t, duration: 0, color: nameColor(name) };
      const parent = stack.at(-1);
      if (parent) (parent.children ??= []).push(node);
      else track.nodes.push(node);
      stack.push(node);
      track.depth = Math.max(track.depth, stack.length);
      ++track.slices;
      ++slices;
    } else if (e.ph === "E") {
      const node = open.get(tid)?.pop();
      if (!node) continue;
      node.duration = Math.max(0, t - node.start);
      if (e.args?.cut) cut(node);
    } else if (e.ph === "i" || e.ph === "I") {
      marks.push({
        shortName: "lost",
        fullName: e.name ?? "events lost",
        timestamp: t,
        color: "#b42318",
      });
    }
  }
  for (const stack of open.values())
    for (const node of stack) {
      node.duration = Math.max(0, end - node.start);
      cut(node);
    }
  const order = (t: Track) =>
    t.kind === "running" ? 0 : t.kind === "interrupts" ? 1 : 2 + t.tid / 1e9;
  const spanCycles = Number(other.span_cycles ?? NaN);
  return {
    tracks: [...tracks.values()].filter((t) => t.slices > 0).sort((a, b) => order(a) - order(b)),
    marks,
    slices,
    units,
    start: Number.isFinite(start) ? start : 0,
    end: Number.isFinite(end) ? end : 0,
    leftOut: Number(other.events_left_out ?? 0),
    spanNs: hz > 0 && Number.isFinite(spanCycles) ? (spanCycles * 1e9) / hz : undefined,
  };
}

// What a click on a slice says: the track it is on (its task, if a task's) and its name.
export interface SliceChoice {
  track: Track;
  name: string;
}

// The heights of the drawing: a row of slices, a track's header (TogglePlugin), the overview
// (TimeframeSelectorPlugin), the time grid and the marks (its room to spare).
const kRow = 17;
const kHeader = 17;
const kOverview = 60;
const kGrid = 22;
const kMarks = 24;

// Draws `timeline` on a canvas in `box` (replacing what was there), one collapsible group per
// track (flame-chart-js's TogglePlugin above a FlameChartPlugin), the overview on top for
// choosing a span (drag), the wheel zooming, a drag panning. `onSelect` hears a slice clicked.
// Returns what stops following the box's width.
export async function drawTimeline(
  box: HTMLElement,
  timeline: Timeline,
  onSelect: (choice: SliceChoice) => void,
): Promise<() => void> {
  const [flameChart, { EventEmitter }] = await Promise.all([
    import("flame-chart-js"),
    import("events"),
  ]);
  const {
    FlameChartContainer,
    FlameChartPlugin,
    MarksPlugin,
    TimeGridPlugin,
    TimeframeSelectorPlugin,
    TogglePlugin,
  } = flameChart;
  // Each plugin listens to the chart's input events: more than the emitters' default of 10.
  EventEmitter.defaultMaxListeners = Math.max(
    EventEmitter.defaultMaxListeners,
    2 * timeline.tracks.length + 8,
  );
  const height =
    kOverview +
    kGrid +
    (timeline.marks.length ? kMarks : 0) +
    timeline.tracks.reduce((sum, t) => sum + kHeader + (t.depth + 1) * kRow, 0);
  const width = () => Math.max(200, box.clientWidth);
  // Sized before the chart is made: it lays its groups out in the canvas's size at once.
  const canvas = h("canvas", {
    role: "img",
    width: width(),
    height,
    "aria-label": `timeline: ${timeline.tracks.map((t) => t.title).join(", ")} (wheel to zoom, drag to pan)`,
  });
  box.replaceChildren(canvas);
  const flames = timeline.tracks.map((track) => {
    const plugin = new FlameChartPlugin({ data: track.nodes, name: `track-${track.tid}` });
    plugin.on("select", (event: { node: { source: FlameChartNode } | null }) => {
      if (event.node) onSelect({ track, name: event.node.source.name });
    });
    return { track, plugin };
  });
  const chart = new FlameChartContainer({
    canvas: canvas as HTMLCanvasElement,
    plugins: [
      new TimeframeSelectorPlugin({
        flameChartNodes: timeline.tracks[0]?.nodes ?? [],
        settings: {},
      }),
      new TimeGridPlugin(),
      ...(timeline.marks.length ? [new MarksPlugin({ data: timeline.marks })] : []),
      ...flames.flatMap(({ track, plugin }) => [new TogglePlugin(track.title), plugin]),
    ],
    settings: { options: { timeUnits: timeline.units } },
  });
  // Each group as tall as its track's nesting (the library would split the room evenly), laid
  // out again at once (the chart's own resize waits for the next frame).
  for (const { track, plugin } of flames)
    plugin.renderEngine.resize({ height: (track.depth + 1) * kRow }, true);
  chart.renderEngine.recalcChildrenLayout();
  chart.render();
  const fit = () => chart.resize(width(), height);
  // Where each track's first row is on the canvas (CSS pixels), for a test to click on.
  box.dataset.rows = JSON.stringify(
    flames.map(({ track, plugin }) => ({ title: track.title, top: plugin.renderEngine.position })),
  );
  const observer = new ResizeObserver(fit);
  observer.observe(box);
  return () => observer.disconnect();
}
