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

RISC-V (--riscv-fw-dir: the same kernel on qemu-virt, rv32imac machine mode, its switch on the
CLINT's software interrupt and its tick on the runtime's shared CLINT timer; a SKIP line, not a
failure, when qemu-system-riscv32 or its builds are absent), in both builds:
  - exit 0, the wire whole, HELLO version 5 with the tasks flag and the rv32imac arch byte;
  - each task's PC samples and calls (framed: arcs; enter-exit: every ENTER in force in the
    task) equal the wire reader's, exactly; three TASK_DELETED, the three workers marked deleted;
  - the sampled share of every task within the 99 % interval of its switch-stamp share;
  - framed: the workers' time at their designed loads plus at most RISCV_FRAMED_OVERHEAD points
    (measured 1.8, 2.9, 3.9: the sampler's trap also drains the UART, which has no interrupt
    here; at 200 Hz the logger's 3.9 falls to 2.5); enter-exit, whose events cost most of the
    idle time, the workers' time 1:2:3 within RISCV_RATIO_TOLERANCE; mix called 320, 640, 960
    times per worker (framed: arcs; enter-exit: thread-mode ENTERs);
  - the tick exactly RUN_TICKS times (framed: the arcs into app_timer_isr and the profile's call
    count; enter-exit: the machine timer trap's invocations, 0x8007, with the calling-context
    tree's time), and enter-exit: the switch trap (0x8003) exactly SWITCH_TRAPS times;
  - the Trace Event export: the running-task track holds the wire's switches in order, and in
    enter-exit the ENTER checks above (check_trace).

Exit 77 (ctest SKIP) with a SKIP line when QEMU or the firmware is absent.
usage: rtos_e2e.py --rackprof BIN --fw-dir DIR [--riscv-fw-dir DIR]
"""

import argparse
import json
import math
import pathlib
import re
import signal
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
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
    return ok


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


def task_name(cap, task):
    """A task of framed_wire's reader by its name (None before the first switch, "unknown")."""
    return cap.task_names.get(task) if isinstance(task, int) else task


def wire_per_task(cap):
    samples = {task_name(cap, t): sum(p.values()) for t, p in cap.pcs_by_task.items()}
    calls = {task_name(cap, t): sum(a.values()) for t, a in cap.arcs_by_task.items()}
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
    check_sampled_shares(tag, tasks, rows)
    for name, load in DESIGNED.items():
        share = rows[name]["cycles_percent"]
        check(load <= share <= load + overhead,
              f"{tag}: {name}: {share:.2f} % of the time, its designed {load:.0f} % "
              f"(+ at most {overhead} points of profiler and kernel cost)")
    for name, expected in MIX_CALLS.items():
        got = mix.get(name, 0)
        check(got == expected, f"{tag}: {name} calls mix {got} times (the program: {expected})")


def check_sampled_shares(tag, tasks, rows):
    """Each task's sampled share holds its share of the time between switches (99 %)."""
    for name in ("sensor", "control", "logger", "idle"):
        row = rows[name]
        lo, hi = z99_interval(row["samples"], tasks["samples"])
        check(lo <= row["cycles_percent"] <= hi,
              f"{tag}: {name}: sampled {row['share_percent']:.2f} % (99 %: {lo:.2f}-{hi:.2f}) "
              f"holds its {row['cycles_percent']:.2f} % of the time between switches")


def mix_calls_from_wire(cap, span):
    """Calls into mix per task: arcs whose callee address (-pg: inside the callee, after its
    mcount call; enter/exit: its entry) lies in mix."""
    lo, hi = span
    out = {}
    for task, arcs in cap.arcs_by_task.items():
        out[task_name(cap, task)] = sum(n for (frm, slf), n in arcs.items() if lo <= slf & ~1 < hi)
    return out


def symbol(elf, name, nm="arm-none-eabi-nm"):
    """[start, end) of a function, from nm -S."""
    out = subprocess.run([nm, "-S", str(elf)], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3] == name:
            start = int(parts[0], 16) & ~1
            return start, start + int(parts[1], 16)
    raise SystemExit(f"{elf}: no symbol {name}")


# Functions of the kernel that never return: a worker's body and task_exit end with the task's
# deletion, idle and finish with the run. Their frames stay open, so the tree marks them (and
# only them) incomplete; a call interrupted by a switch resumes on its task's own stack.
NEVER_RETURN = {"worker", "task_exit", "idle", "finish"}


def check_open_frames(tag, cct):
    incomplete = {n["name"] for n in cct.get("nodes", []) if n["incomplete"]}
    check(incomplete <= NEVER_RETURN,
          f"{tag}: only the frames that never return are incomplete ({sorted(incomplete)}): every "
          f"call across a switch resumes on its task's stack")


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


# ---- RISC-V (qemu-virt) -----------------------------------------------------------------------

RISCV_QEMU = ["qemu-system-riscv32", "-M", "virt", "-bios", "none", "-display", "none",
              "-monitor", "none", "-semihosting-config", "enable=on,target=native",
              "-icount", "shift=5,sleep=off"]
RISCV_NM = "riscv64-unknown-elf-nm"
RISCV_ARCH = 0x11  # the HELLO's rv32imac
RISCV_TICK_TRAP = 0x8007  # rp_handler() in the machine timer trap: bit 15, mcause 7
RISCV_SWITCH_TRAP = 0x8003  # the kernel's switch: the machine software interrupt
# schedule() runs once per switch request: every tick, each worker's 39 sleeps and its exit,
# and the first switch.
SWITCH_TRAPS = RUN_TICKS + 3 * 39 + 3 + 1
RISCV_FRAMED_OVERHEAD = 5.0
RISCV_RATIO_TOLERANCE = 0.05


def run_qemu_riscv(elf, capture):
    cmd = RISCV_QEMU + ["-serial", f"file:{capture}", "-kernel", str(elf)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    check(result.returncode == 0, f"{elf.name} runs to completion (exit {result.returncode})")
    return capture.read_bytes()


def check_switch_track(tag, cap, trace):
    """The trace's running-task track (tid 1): one slice per TASK_SWITCH, named in the wire's
    order."""
    names = [e["name"] for e in trace["traceEvents"] if e["ph"] == "B" and e["tid"] == 1]
    wire = [cap.task_names.get(t[1]) for t in cap.task_items if t[0] == "switch"]
    check(names == wire, f"{tag}: trace: the running-task track's {len(names)} slices are the "
          f"wire's {len(wire)} switches, in order")


def check_riscv(tag, cap, tasks, elf, trace):
    hello = cap.hellos[0] if cap.hellos else None
    check(hello is not None and hello.version == 5 and hello.flags & 0x40 and
          hello.arch == RISCV_ARCH,
          f"{tag}: HELLO version 5, tasks flag, arch rv32imac "
          f"({hello and (hello.version, hex(hello.flags), hello.arch)})")
    rows = {r["name"]: r for r in tasks["tasks"]}
    for name in ("sensor", "control", "logger", "idle"):
        check(name in rows, f"{tag}: task {name} reported")
    deleted = sorted(task_name(cap, t[1]) for t in cap.task_items if t[0] == "deleted")
    check(deleted == ["control", "logger", "sensor"] and
          all(rows[n]["deleted"] for n in deleted) and not rows["idle"]["deleted"],
          f"{tag}: the three workers deleted themselves (wire: {deleted}), idle did not")
    # Calls per task: arcs (framed) or every ENTER (enter-exit), each charged to the task in
    # force, as the host charges them.
    samples, calls = wire_per_task(cap)
    if cap.events:
        calls = {}
        for ev, task in zip(cap.events, cap.event_tasks):
            if ev[0]:
                calls[task_name(cap, task)] = calls.get(task_name(cap, task), 0) + 1
    for name, row in rows.items():
        key = None if name == "(no task)" else name
        check(row["samples"] == samples.get(key, 0) and row["calls"] == calls.get(key, 0),
              f"{tag}: {name}: {row['samples']} samples, {row['calls']} calls; the wire's "
              f"{samples.get(key, 0)}, {calls.get(key, 0)}")
    check_sampled_shares(tag, tasks, rows)
    funcs = symbol(elf, "mix", RISCV_NM), symbol(elf, "app_timer_isr", RISCV_NM)
    if not cap.events:
        for name, load in DESIGNED.items():
            share = rows[name]["cycles_percent"]
            check(load <= share <= load + RISCV_FRAMED_OVERHEAD,
                  f"{tag}: {name}: {share:.2f} % of the time, its designed {load:.0f} % "
                  f"(+ at most {RISCV_FRAMED_OVERHEAD} points of profiler and kernel cost)")
        mix = mix_calls_from_wire(cap, funcs[0])
        lo, hi = funcs[1]
        ticks = sum(n for arcs in cap.arcs_by_task.values()
                    for (frm, slf), n in arcs.items() if lo <= slf < hi)
        report = convert_report(tag, cap, elf)
        flat = {r["name"]: r for r in report["profile"]["flat"]}
        profiled = flat.get("app_timer_isr", {}).get("calls")
        check(ticks == RUN_TICKS and profiled == RUN_TICKS,
              f"{tag}: the tick app_timer_isr called {ticks} times on the wire, {profiled} in "
              f"the profile, exactly {RUN_TICKS}")
    else:
        base = rows["sensor"]["cycles_percent"]
        ratios = [rows[n]["cycles_percent"] / base for n in DESIGNED]
        check(all(abs(r / k - 1) <= RISCV_RATIO_TOLERANCE for r, k in zip(ratios, (1, 2, 3))),
              f"{tag}: the workers' time 1:{ratios[1]:.3f}:{ratios[2]:.3f} (1:2:3 within "
              f"{100 * RISCV_RATIO_TOLERANCE:.0f} %)")
        lo, hi = funcs[0]
        mix = {}
        for ev, task in zip(cap.events, cap.event_tasks):
            if ev[0] and ev[4] == 0 and lo <= ev[1] < hi:
                mix[task_name(cap, task)] = mix.get(task_name(cap, task), 0) + 1
        irq = {e["exception"]: e for e in tasks["interrupts"]["exceptions"]}
        for number, expected, what in ((RISCV_TICK_TRAP, RUN_TICKS, "the tick's timer trap"),
                                       (RISCV_SWITCH_TRAP, SWITCH_TRAPS, "the switch trap")):
            row = irq.get(number, {})
            check(row.get("count") == expected and row.get("incomplete") == 0,
                  f"{tag}: {what} ({number:#x}): {row.get('count')} invocations, exactly "
                  f"{expected}")
        cct = convert(ARGS.rackprof, cap_path(tag), elf, "cct-json")
        roots = [n for n in cct.get("nodes", [])
                 if n.get("parent") is None and n.get("exception") == RISCV_TICK_TRAP]
        tick = irq.get(RISCV_TICK_TRAP, {})
        check(bool(roots) and roots[0]["inclusive_cycles"] == tick.get("total_cycles"),
              f"{tag}: the timer trap's {tick.get('total_cycles')} cycles equal the "
              f"calling-context tree's {roots[0]['inclusive_cycles'] if roots else None}")
        check_open_frames(tag, cct)
        check_trace(tag, cap, trace)
    for name, expected in MIX_CALLS.items():
        check(mix.get(name, 0) == expected,
              f"{tag}: {name} calls mix {mix.get(name, 0)} times (the program: {expected})")
    check_switch_track(tag, cap, trace)


CAPTURES = {}  # tag -> capture path (the RISC-V checks convert it more than once)


def cap_path(tag):
    return CAPTURES[tag]


def convert_report(tag, cap, elf):
    out = subprocess.run([ARGS.rackprof, "convert", str(cap_path(tag)), "--protocol", "framed",
                          "--elf", str(elf), "--export", "json", "-o", "-"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def riscv(fw_dir, work):
    fw = pathlib.Path(fw_dir)
    elves = {m: fw / f"rtos-qemu-virt-{m}.elf" for m in ("framed", "enter-exit")}
    missing = [t for t in ("qemu-system-riscv32", RISCV_NM) if not shutil.which(t)]
    if missing or not all(e.exists() for e in elves.values()):
        print(f"SKIP riscv: {' '.join(missing) or 'the rtos-qemu-virt firmware'} absent "
              f"(build target target_fw_riscv)")
        return
    for mode, elf in elves.items():
        tag = f"riscv {mode}"
        capture = pathlib.Path(work) / f"rtos-riscv-{mode}.bin"
        CAPTURES[tag] = capture
        cap = framed_wire.read(run_qemu_riscv(elf, capture))
        check(cap.frames_bad == 0 and cap.frames_lost == 0 and cap.dropped_total == 0,
              f"{tag}: the wire is whole")
        tasks = convert(ARGS.rackprof, capture, elf, "tasks-json")
        check_riscv(tag, cap, tasks, elf, convert(ARGS.rackprof, capture, elf, "trace"))


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def api_get(base, path):
    with urllib.request.urlopen(base + path, timeout=60) as reply:
        return json.loads(reply.read())


def check_daemon(rackprof, elf, work):
    """The enter-exit build captured live by a real `rackprof serve` (QEMU's UART a TCP server
    the daemon connects to), kept running while its API answers: the session JSON's live task
    list, /tasks, /interrupts, a /timeline window, and task= in a selection's profile and diff."""
    tag = "daemon"
    port = free_port()
    qemu = subprocess.Popen(
        ["qemu-system-arm", "-M", "mps2-an385", "-display", "none", "-monitor", "none",
         "-serial", f"tcp:127.0.0.1:{port},server=on,wait=on", "-semihosting-config",
         "enable=on,target=native", "-icount", "shift=5,sleep=off", "-kernel", str(elf)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    config = work / "serve.toml"
    config.write_text(f"""[server]
listen = "127.0.0.1:0"
[storage]
path = "{work / 'rtos.db'}"
[links]
reconnect_min_ms = 50
[[boards]]
name = "rtos"
link = "tcp://127.0.0.1:{port}"
protocol = "framed"
format = "bin"
elf = "{elf}"
autostart = true
""")
    log_path = work / "serve.log"
    with log_path.open("w") as log:
        serve = subprocess.Popen([str(rackprof), "serve", "--config", str(config)],
                                 stdout=log, stderr=subprocess.STDOUT)
        try:
            qemu_rc = qemu.wait(timeout=120)
            deadline = time.monotonic() + 30
            text = ""
            while time.monotonic() < deadline:
                text = log_path.read_text(errors="replace")
                if "disconnected:" in text and "HTTP API listening on" in text:
                    break
                time.sleep(0.05)
            check(qemu_rc == 0, f"{tag}: the kernel ran to completion with the daemon attached")
            found = re.search(r"HTTP API listening on ([0-9.]+):(\d+)", text)
            if not check(found is not None, f"{tag}: the daemon says where it listens"):
                print(text[-2000:])
                return
            base = f"http://{found.group(1)}:{found.group(2)}/api/v1"
            # The link is gone but the session goes on (the board reconnects): stopped, its last
            # bytes and its final task list are committed.
            urllib.request.urlopen(urllib.request.Request(base + "/sessions/1/stop", method="POST"),
                                   timeout=60).read()
            deadline = time.monotonic() + 30
            while api_get(base, "/sessions/1")["state"] == "capturing" and \
                    time.monotonic() < deadline:
                time.sleep(0.05)
            check_api(tag, base)
        finally:
            serve.send_signal(signal.SIGTERM)
            try:
                serve.wait(timeout=60)
            except subprocess.TimeoutExpired:
                serve.kill()


def check_api(tag, base):
    session = api_get(base, "/sessions/1")
    listed = {t["name"]: t for t in session.get("tasks", [])}
    check(set(listed) == {"sensor", "control", "logger", "idle"},
          f"{tag}: the session JSON lists the tasks counted live ({sorted(listed)})")
    tasks = api_get(base, "/sessions/1/tasks")
    rows = {r["name"]: r for r in tasks["tasks"]}
    for name, live in listed.items():
        check(live["samples"] == rows[name]["samples"] and live["switches"] == rows[name]["switches"]
              and live["deleted"] == rows[name]["deleted"],
              f"{tag}: {name}: live {live['samples']} samples, {live['switches']} switches; "
              f"decoded again {rows[name]['samples']}, {rows[name]['switches']}")
    irq = {e["name"]: e for e in api_get(base, "/sessions/1/interrupts")["exceptions"]}
    check(irq.get("IRQ8", {}).get("count") == RUN_TICKS,
          f"{tag}: /interrupts: IRQ8 {irq.get('IRQ8', {}).get('count')} times, exactly {RUN_TICKS}")
    whole = api_get(base, "/sessions/1/timeline")
    hz = whole["otherData"]["clock_hz"]
    span_ns = int(whole["otherData"]["span_cycles"] * 1e9 / hz)
    lo, hi = span_ns // 4, span_ns // 2
    window = api_get(base, f"/sessions/1/timeline?from={lo}&to={hi}")
    inside = [e for e in window["traceEvents"] if e["ph"] == "B"]
    wanted = [e for e in whole["traceEvents"] if e["ph"] == "B" and lo / 1e3 <= e["ts"] < hi / 1e3]
    check(0 < len(inside) == len(wanted),
          f"{tag}: /timeline?from&to: {len(inside)} slices begin in the window, as the whole "
          f"timeline's {len(wanted)}")
    for name, expected in MIX_CALLS.items():
        profile = api_get(base, f"/profile?session=1&task={name}")
        flat = {r["name"]: r for r in profile["flat"]}
        calls = flat.get("mix", {}).get("calls")
        check(calls == expected, f"{tag}: /profile?task={name}: mix called {calls} times "
              f"(the program: {expected})")
    diff = api_get(base, "/diff?a=" + urllib.parse.quote("session=1&task=sensor") +
                   "&b=" + urllib.parse.quote("session=1&task=logger"))
    check("functions" in diff or "rows" in diff or "flat" in diff,
          f"{tag}: /diff of two tasks answers (keys: {sorted(diff)[:6]})")
    try:
        api_get(base, "/profile?session=1&task=nosuch")
        check(False, f"{tag}: task=nosuch is refused")
    except urllib.error.HTTPError as e:
        check(e.code == 404, f"{tag}: task=nosuch is refused with 404 (got {e.code})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rackprof", required=True)
    ap.add_argument("--fw-dir", required=True)
    ap.add_argument("--riscv-fw-dir", help="target-fw-riscv's build: its rtos-qemu-virt-*.elf too")
    args = ap.parse_args()
    global ARGS
    ARGS = args
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
            lo, hi = symbol(elf, "mix")
            entered = {}
            for ev, task in zip(cap.events, cap.event_tasks):
                if ev[0] and ev[4] == 0 and lo <= ev[1] & ~1 < hi:
                    entered[task_name(cap, task)] = entered.get(task_name(cap, task), 0) + 1
            for name, expected in MIX_CALLS.items():
                check(entered.get(name, 0) == expected,
                      f"{mode}: {name} enters mix {entered.get(name, 0)} times "
                      f"(the program: {expected})")
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
                check_open_frames(mode, cct)
            else:
                check(False, f"{mode}: the calling-context tree has IRQ8's root "
                      f"(keys: {list(cct)[:8]})")
            check_trace(mode, cap, convert(args.rackprof, capture, elf, "trace"))
        check_daemon(args.rackprof, elves["enter-exit"], pathlib.Path(work))
        if args.riscv_fw_dir:
            riscv(args.riscv_fw_dir, work)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
