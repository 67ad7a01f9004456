"""Reads a capture of target-fw's rtos example (framed protocol v5; a Cortex-M or a RISC-V
build, told apart by the ELF) with framed_wire.py and
prints what its task items say: the switches in order, the items counted, PC samples per task
(each charged to the task switched in before it), ENTER events of the tick handler, losses.

    python3 tests/e2e/rtos_wire.py CAPTURE ELF [--switches N]

Exit 0 when the wire is whole (no bad or lost frame, nothing dropped, HELLO version 5 with
flags bit 6); the numbers are for a reader to hold against the example's designed loads."""

import argparse
import bisect
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import framed_wire  # noqa: E402  (beside this file)


EM_RISCV = 243


def is_riscv(elf):
    """True for a RISC-V ELF (e_machine 243), else an ARM one."""
    with open(elf, "rb") as f:
        return int.from_bytes(f.read(20)[18:20], "little") == EM_RISCV


def nm(elf):
    """The binutils nm that reads the ELF: riscv64-unknown-elf-nm or arm-none-eabi-nm."""
    return "riscv64-unknown-elf-nm" if is_riscv(elf) else "arm-none-eabi-nm"


def tick_exception(elf):
    """The tick handler's exception number in ENTER_IN_HANDLER: TIMER0's IRQ 8 (exception 24)
    on mps2-an385; on RISC-V the machine timer trap (rp_handler(): 0x8000 | mcause 7)."""
    return 0x8007 if is_riscv(elf) else 24


def functions(elf):
    """Sorted (start, name) of the ELF's functions, from nm."""
    out = subprocess.run([nm(elf), "-n", elf], capture_output=True, text=True,
                         check=True).stdout
    funcs = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            funcs.append((int(parts[0], 16) & ~1, parts[2]))
    return funcs


def function_of(funcs, pc):
    i = bisect.bisect_right([a for a, _ in funcs], pc & ~1) - 1
    return funcs[i][1] if i >= 0 else "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("capture")
    ap.add_argument("elf")
    ap.add_argument("--switches", type=int, default=24, help="switches to list in order")
    args = ap.parse_args()
    cap = framed_wire.read(Path(args.capture).read_bytes())
    funcs = functions(args.elf)
    hello = cap.hellos[0]
    name = lambda task: cap.task_names.get(task, f"{task:#x}") if isinstance(task, int) \
        else str(task)
    print(f"HELLO version {hello.version}, flags {hello.flags:#04x}, {hello.addr_bytes}-byte "
          f"addresses, {hello.sample_hz} Hz, core {hello.core_clock_hz} Hz")
    print(f"frames good {cap.frames_good}, bad {cap.frames_bad}, lost {cap.frames_lost}, "
          f"dropped {cap.dropped_total}; markers {cap.markers}")
    switches = [t for t in cap.task_items if t[0] == "switch"]
    deleted = [t for t in cap.task_items if t[0] == "deleted"]
    named = [t for t in switches if t[3] is not None]
    print(f"TASK_SWITCH {len(switches)} ({len(named)} with a name: "
          f"{', '.join(f'{t[3]}={t[1]:#x}' for t in named)}), TASK_DELETED {len(deleted)} "
          f"({', '.join(name(t[1]) for t in deleted)})")
    first = [f"{name(t[1])}@{t[2]}" for t in cap.task_items[: args.switches]]
    print(f"first {len(first)} task items (name@stamp): {' '.join(first)}")
    per_task = {}
    for t in switches:
        per_task[t[1]] = per_task.get(t[1], 0) + 1
    print("switches in, per task: " + ", ".join(f"{name(t)} {n}" for t, n in per_task.items()))
    # Time per task from the switches' stamps (core cycles, unwrapped): from each switch to the
    # next, and the last one to the end of the task items.
    stamps = []
    for item in cap.task_items:
        stamp = item[2]
        if stamps:
            stamp = stamps[-1][1] + ((stamp - stamps[-1][1]) & 0xFFFFFFFF)
        stamps.append((item, stamp))
    spans = {}
    for (item, start), (_, end) in zip(stamps, stamps[1:]):
        if item[0] == "switch":
            spans[item[1]] = spans.get(item[1], 0) + end - start
    span_total = sum(spans.values())
    if span_total:
        print(f"time per task from TASK_SWITCH stamps ({span_total / hello.core_clock_hz:.3f} s): " +
              ", ".join(f"{name(t)} {100.0 * c / span_total:.1f} %" for t, c in spans.items()))
    total = sum(cap.pcs.values())
    print(f"PC samples {total}, per task:")
    for task, pcs in sorted(cap.pcs_by_task.items(), key=lambda kv: -sum(kv[1].values())):
        n = sum(pcs.values())
        by_fn = {}
        for pc, c in pcs.items():
            fn = function_of(funcs, pc)
            by_fn[fn] = by_fn.get(fn, 0) + c
        top = ", ".join(f"{f} {c}" for f, c in sorted(by_fn.items(), key=lambda kv: -kv[1])[:5])
        print(f"  {name(task):8} {n:6} {100.0 * n / total:5.1f} %   ({top})")
    if cap.arcs:
        print("calls per task (arcs, charged to the task switched in before them):")
        for task, arcs in cap.arcs_by_task.items():
            calls = {}
            for (frm, slf), n in arcs.items():
                key = f"{function_of(funcs, frm)}->{function_of(funcs, slf)}"
                calls[key] = calls.get(key, 0) + n
            print(f"  {name(task):8} " + ", ".join(f"{k} {n}" for k, n in sorted(calls.items())))
    if cap.events:
        addr = {fn: a for a, fn in funcs}
        enters = {}
        for enter, callee, site, stamp, exception in cap.events:
            if enter:
                key = (function_of(funcs, callee), exception)
                enters[key] = enters.get(key, 0) + 1
        print(f"events {len(cap.events)}; ENTER counts (function, exception): " +
              ", ".join(f"{f}/{e} {n}" for (f, e), n in sorted(enters.items())))
        # Thread-mode events belong to the task in force; handler events to their exception.
        per_task = {}
        for (enter, callee, site, stamp, exception), task in zip(cap.events, cap.event_tasks):
            if enter and exception == 0:
                key = (name(task), function_of(funcs, callee))
                per_task[key] = per_task.get(key, 0) + 1
        print("thread-mode ENTER per task: " +
              ", ".join(f"{t}:{f} {n}" for (t, f), n in sorted(per_task.items())))
        tick = addr.get("app_timer_isr")
        exc = tick_exception(args.elf)
        print(f"tick handler app_timer_isr entries: {enters.get(('app_timer_isr', exc), 0)} "
              f"(exception {exc:#x}){'' if tick else ' (no such symbol)'}")
    whole = (cap.frames_bad == 0 and cap.frames_lost == 0 and cap.dropped_total == 0 and
             hello.version == 5 and hello.flags & 0x40)
    return 0 if whole else 1


if __name__ == "__main__":
    sys.exit(main())
