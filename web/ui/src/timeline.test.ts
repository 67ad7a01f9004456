import { describe, expect, it } from "vitest";
import type { TraceEvent } from "./api";
import { nameColor, timelineTracks } from "./timeline";
import { hasTasks, isCapture, isPseudoTask, pickable } from "./pages/tasks";

type Event = TraceEvent;
const meta = (tid: number, name: string): Event => ({
  ph: "M",
  name: "thread_name",
  pid: 1,
  tid,
  args: { name },
});
const b = (tid: number, ts: number, name: string): Event => ({ ph: "B", pid: 1, tid, ts, name });
const e = (tid: number, ts: number, args?: Record<string, unknown>): Event => ({
  ph: "E",
  pid: 1,
  tid,
  ts,
  ...(args ? { args } : {}),
});
const doc = (events: Event[], otherData: Record<string, unknown> = { clock_hz: 25e6 }) => ({
  traceEvents: events,
  otherData,
});

describe("timelineTracks", () => {
  it("nests each track's slices, in ms, the tracks in the daemon's order", () => {
    const t = timelineTracks(
      doc(
        [
          meta(1, "running task"),
          meta(2, "interrupts"),
          meta(10, "task (no task)"),
          meta(12, "task sensor"),
          meta(13, "task control"),
          b(13, 0, "worker"),
          b(2, 100, "isr"),
          b(12, 1000, "worker"),
          b(12, 1500, "mix"),
          e(2, 200),
          b(1, 1000, "sensor"),
          e(12, 2000),
          b(12, 2500, "mix"),
          e(12, 3000),
          e(12, 4000),
          e(1, 4000),
          e(13, 5000),
        ],
        { clock_hz: 25e6, span_cycles: 125000, events_left_out: 3 },
      ),
    );
    expect(t.units).toBe("ms");
    expect(t.slices).toBe(6);
    expect(t.tracks.map((x) => [x.tid, x.kind, x.title, x.task, x.slices, x.depth])).toEqual([
      [1, "running", "running task", undefined, 1, 1],
      [2, "interrupts", "interrupts", undefined, 1, 1],
      [12, "task", "task sensor", "sensor", 3, 2],
      [13, "task", "task control", "control", 1, 1],
    ]);
    const sensor = t.tracks[2].nodes;
    expect(sensor).toHaveLength(1);
    expect(sensor[0]).toMatchObject({ name: "worker", start: 1, duration: 3 });
    expect(sensor[0].children?.map((n) => [n.name, n.start, n.duration])).toEqual([
      ["mix", 1.5, 0.5],
      ["mix", 2.5, 0.5],
    ]);
    expect(t.tracks[1].nodes[0]).toMatchObject({ name: "isr", start: 0.1, duration: 0.1 });
    expect([t.start, t.end, t.leftOut]).toEqual([0, 5, 3]);
    expect(t.spanNs).toBe(5e6);
  });

  it("counts every B as a node, closes what is open at the end and marks cuts", () => {
    const t = timelineTracks(
      doc([
        meta(12, "task sensor"),
        e(12, 5), // its B before the window: dropped
        b(12, 10, "worker"),
        b(12, 20, "mix"),
        e(12, 30, { cut: true }),
        b(12, 40, "mix"),
        { ph: "i", pid: 1, tid: 1, ts: 50, name: "events lost", s: "g" } as Event,
        b(12, 60, "mix"),
      ]),
    );
    const nodes = t.tracks[0].nodes;
    const count = (n: typeof nodes): number =>
      n.reduce((sum, x) => sum + 1 + count(x.children ?? []), 0);
    expect(count(nodes)).toBe(t.slices);
    expect(t.slices).toBe(4);
    const [worker] = nodes;
    expect(worker.duration).toBeCloseTo(0.05); // open: closed at the last time, 60 µs
    expect(worker.badge).toBeDefined();
    const [cut, open1] = worker.children ?? [];
    const open2 = open1.children?.[0];
    expect(cut.badge).toBeDefined();
    expect(cut.duration).toBeCloseTo(0.01);
    expect(open2).toMatchObject({ name: "mix", start: 0.06, duration: 0 }); // inside the first
    expect(t.marks).toEqual([
      { shortName: "lost", fullName: "events lost", timestamp: 0.05, color: "#b42318" },
    ]);
  });

  it("keeps cycles where the clock is unknown, and leaves out empty tracks", () => {
    const t = timelineTracks(
      doc([meta(11, "task (unknown)"), meta(14, "task t"), b(14, 300, "f"), e(14, 900)], {
        clock_hz: 0,
        span_cycles: 1000,
      }),
    );
    expect(t.units).toBe("cycles");
    expect(t.spanNs).toBeUndefined();
    expect(t.tracks.map((x) => x.title)).toEqual(["task t"]);
    expect(t.tracks[0].nodes[0]).toMatchObject({ start: 300, duration: 600 });
  });

  it("gives a name the same colour everywhere", () => {
    expect(nameColor("mix")).toBe(nameColor("mix"));
    expect(nameColor("mix")).toMatch(/^hsl\(\d+, 55%, 72%\)$/);
  });
});

describe("tasks", () => {
  const row = (name: string, samples = 0, calls = 0) => ({
    number: 0,
    name,
    samples,
    calls,
    share_percent: 0,
    share_interval: [0, 0],
    cycles: 0,
  });
  it("tells the pseudo tasks from the real ones", () => {
    expect(isPseudoTask("(no task)")).toBe(true);
    expect(isPseudoTask("(unknown)")).toBe(true);
    expect(isPseudoTask("task@0x20001000")).toBe(false);
    const only = { tasks: [row("(no task)", 5)], samples: 5, cycles: 0, losses: 0 };
    expect(hasTasks(only)).toBe(false);
    expect(hasTasks(undefined)).toBe(false);
    const some = { ...only, tasks: [row("(no task)", 0, 2), row("(unknown)"), row("idle", 3)] };
    expect(hasTasks(some)).toBe(true);
    expect(pickable(some).map((t) => t.name)).toEqual(["(no task)", "idle"]);
  });
  it("asks only a capture's bytes", () => {
    expect(["bin", "hex", "gmon", "tiva"].map(isCapture)).toEqual([true, true, false, false]);
  });
});
