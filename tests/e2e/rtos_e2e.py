#!/usr/bin/env python3
"""Tasks and time against the truth: target-fw's rtos example (a preemptive round-robin kernel,
three workers of 1:2:3 work units per period, one timer interrupt that fires exactly RUN_TICKS
times) runs under QEMU (mps2-an385, -icount), and the real `rackprof convert` reads its capture.

Checked, for the framed (-pg) and the enter-exit builds:
  - each task's PC samples and calls equal what this test's own reader of the wire
    (framed_wire.py) charges to the task switched in before them, exactly;
  - the sampled share of every task holds its share of the time measured between the switches'
    stamps within its 99 % interval; the workers' shares sit at their designed loads (10, 20,
    30 %) plus at most the profiler's own cost (3 points in the framed build) and the calls of
    the work function are exactly 1:2:3 (320, 640, 960);
  - enter-exit: the timer interrupt's invocations are exactly RUN_TICKS and its total cycles
    equal the calling-context tree's time in that exception; the Trace Event export holds every
    ENTER once, on its task's track (or the interrupts' track), every slice closed, in time
    order per track.

Exit 77 (ctest SKIP) with a SKIP line when QEMU or the firmware is absent.
usage: rtos_e2e.py --rackprof BIN --fw-dir DIR
"""

import argparse
import json
import math
import pathlib
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import framed_wire  # noqa: E402

RUN_TICKS = 400
DESIGNED = {"sensor": 10.0, "control": 20.0, "logger": 30.0}
MIX_CALLS = {"sensor": 320, "control": 640, "logger": 960}
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run_qemu(elf, capture):
    cmd = ["qemu-system-arm", "-M", "mps2-an385", "-display", "none", "-monitor", "none",
           "-serial", f"file:{capture}", "-semihosting-config", "enable=on,target=native",
           "-icount", "shift=5,sleep=off", "-kernel", str(elf)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    check(result.returncode == 0, f"{elf.name} runs to completion (exit {result.returncode})")
    return capture.read_bytes()


def convert(rackprof, capture, elf, fmt):
    out = subprocess.run([rackprof, "convert", str(capture), "--protocol", "framed", "--elf",
                          str(elf), "--export", fmt, "-o", "-"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def z99_interval(k, n):
    """Wilson score interval at 99 %, in percent."""
    z = 2.5758
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return 100 * (centre - half), 100 * (centre + half)


def wire_per_task(cap):
    name = lambda t: cap.task_names.get(t) if isinstance(t, int) else t
    samples = {name(t): sum(p.values()) for t, p in cap.pcs_by_task.items()}
    calls = {name(t): sum(a.values()) for t, a in cap.arcs_by_task.items()}
    return samples, calls


def check_tasks(tag, cap, tasks, elf_funcs, mix, overhead):
    samples, calls = wire_per_task(cap)
    rows = {r["name"]: r for r in tasks["tasks"]}
    for name in ("sensor", "control", "logger", "idle"):
        check(name in rows, f"{tag}: task {name} reported")
    for name, row in rows.items():
        key = None if name == "(no task)" else name
        check(row["samples"] == samples.get(key, 0),
              f"{tag}: {name}: {row['samples']} samples, the wire's {samples.get(key, 0)}")
        check(row["calls"] == calls.get(key, 0),
              f"{tag}: {name}: {row['calls']} calls, the wire's {calls.get(key, 0)}")
    n = tasks["samples"]
    for name in ("sensor", "control", "logger", "idle"):
        row = rows[name]
        lo, hi = z99_interval(row["samples"], n)
        check(lo <= row["cycles_percent"] <= hi,
              f"{tag}: {name}: sampled {row['share_percent']:.2f} % (99 %: {lo:.2f}-{hi:.2f}) "
              f"holds its {row['cycles_percent']:.2f} % of the time between switches")
    for name, load in DESIGNED.items():
        share = rows[name]["cycles_percent"]
        check(load <= share <= load + overhead,
              f"{tag}: {name}: {share:.2f} % of the time, its designed {load:.0f} % "
              f"(+ at most {overhead} points of profiler and kernel cost)")
    for name, expected in MIX_CALLS.items():
        got = mix.get(name, 0)
        check(got == expected, f"{tag}: {name} calls mix {got} times (the program: {expected})")


def mix_calls_from_wire(cap, span):
    """Calls into mix per task: arcs whose callee address (-pg: inside the callee, after its
    mcount call; enter/exit: its entry) lies in mix."""
    lo, hi = span
    out = {}
    for task, arcs in cap.arcs_by_task.items():
        name = cap.task_names.get(task) if isinstance(task, int) else task
        out[name] = sum(n for (frm, slf), n in arcs.items() if lo <= slf & ~1 < hi)
    return out


def symbol(elf, name):
    """[start, end) of a function, from arm-none-eabi-nm -S."""
    out = subprocess.run(["arm-none-eabi-nm", "-S", str(elf)], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3] == name:
            start = int(parts[0], 16) & ~1
            return start, start + int(parts[1], 16)
    raise SystemExit(f"{elf}: no symbol {name}")


def check_trace(tag, cap, trace):
    tracks = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
              if e["ph"] == "M" and e["name"] == "thread_name"}
    begins, depth, last = {}, {}, {}
    ordered = True
    for e in trace["traceEvents"]:
        if e["ph"] not in ("B", "E"):
            continue
        tid = e["tid"]
        if e["ph"] == "B":
            begins[tid] = begins.get(tid, 0) + 1
            depth[tid] = depth.get(tid, 0) + 1
        else:
            depth[tid] = depth.get(tid, 0) - 1
            check(depth[tid] >= 0, f"{tag}: trace track {tracks.get(tid)}: an E with no B") \
                if depth[tid] < 0 else None
        ordered = ordered and e["ts"] >= last.get(tid, -1)
        last[tid] = e["ts"]
    check(all(d == 0 for d in depth.values()), f"{tag}: trace: every slice closed")
    check(ordered, f"{tag}: trace: time order on every track")
    handler_enters = sum(1 for ev in cap.events if ev[0] and ev[4] != 0)
    check(begins.get(2, 0) == handler_enters,
          f"{tag}: trace: {begins.get(2, 0)} handler slices, the wire's {handler_enters} ENTERs")
    wire = {}
    for ev, task in zip(cap.events, cap.event_tasks):
        if ev[0] and ev[4] == 0:
            name = cap.task_names.get(task) if isinstance(task, int) else "(no task)"
            wire[name] = wire.get(name, 0) + 1
    for tid, label in tracks.items():
        if not label.startswith("task "):
            continue
        name = label[5:]
        check(begins.get(tid, 0) == wire.get(name, 0),
              f"{tag}: trace: track {label}: {begins.get(tid, 0)} slices, "
              f"the wire's {wire.get(name, 0)} thread-mode ENTERs")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rackprof", required=True)
    ap.add_argument("--fw-dir", required=True)
    args = ap.parse_args()
    fw = pathlib.Path(args.fw_dir)
    elves = {m: fw / f"rtos-mps2-an385-{m}.elf" for m in ("framed", "enter-exit")}
    if not shutil.which("qemu-system-arm") or not all(e.exists() for e in elves.values()):
        print("SKIP: qemu-system-arm or the rtos firmware (build target target_fw) is absent")
        return 77
    with tempfile.TemporaryDirectory() as work:
        for mode, elf in elves.items():
            capture = pathlib.Path(work) / f"rtos-{mode}.bin"
            cap = framed_wire.read(run_qemu(elf, capture))
            check(cap.frames_bad == 0 and cap.frames_lost == 0 and cap.dropped_total == 0,
                  f"{mode}: the wire is whole")
            tasks = convert(args.rackprof, capture, elf, "tasks-json")
            mix = mix_calls_from_wire(cap, symbol(elf, "mix"))
            if mode == "framed":
                check_tasks(mode, cap, tasks, None, mix, 3.0)
                continue
            # enter-exit: the profiler's events cost more; the 1:2:3 split and the counts hold.
            samples, _ = wire_per_task(cap)
            rows = {r["name"]: r for r in tasks["tasks"]}
            for name, row in rows.items():
                key = None if name == "(no task)" else name
                check(row["samples"] == samples.get(key, 0),
                      f"{mode}: {name}: {row['samples']} samples, the wire's {samples.get(key, 0)}")
            for name, expected in MIX_CALLS.items():
                check(mix.get(name, 0) == expected,
                      f"{mode}: {name} calls mix {mix.get(name, 0)} times (the program: {expected})")
            irq = {e["name"]: e for e in tasks["interrupts"]["exceptions"]}
            tick = irq.get("IRQ8", {})
            check(tick.get("count") == RUN_TICKS and tick.get("incomplete") == 0,
                  f"{mode}: the timer interrupt (IRQ8): {tick.get('count')} invocations, "
                  f"exactly {RUN_TICKS}")
            cct = convert(args.rackprof, capture, elf, "cct-json")
            roots = [n for n in cct.get("nodes", [])
                     if n.get("parent") is None and n.get("exception") == 24]
            if roots:
                check(roots[0]["inclusive_cycles"] == tick.get("total_cycles"),
                      f"{mode}: IRQ8's {tick.get('total_cycles')} cycles equal the calling-context "
                      f"tree's {roots[0]['inclusive_cycles']}")
                thread = [n for n in cct["nodes"] if n.get("parent") is None and n["exception"] == 0]
                check(not any(n["incomplete"] for n in cct["nodes"]),
                      f"{mode}: no path of the tree is incomplete (each task's calls on its own stack)")
            else:
                check(False, f"{mode}: the calling-context tree has IRQ8's root "
                      f"(keys: {list(cct)[:8]})")
            check_trace(mode, cap, convert(args.rackprof, capture, elf, "trace"))
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
