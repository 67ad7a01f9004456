#!/usr/bin/env python3
"""The runtime's overhead, measured like the thesis' ch. 5, on the built firmware:
  ROM     bytes per runtime function in the linked deterministic example (arm-none-eabi-nm -S),
          runtime + the board's UART port; startup code, vector tables and the application
          timer are not counted
  RAM     static bytes of the runtime's variables (nm), and stack from gcc's -fstack-usage
          (.su files) along the deepest nesting: a -pg call in thread mode, preempted by the
          SysTick sampler, preempted by the UART interrupt (8-word exception frames)
  cost    instructions executed per call arc, per PC sample and per byte sent, counted by
          QEMU (-singlestep -d exec,int: a trace line per executed instruction) while the
          deterministic example runs; an episode starts at __gnu_mcount_nc / SysTick_Handler /
          the UART handler and ends when execution is back in application code or, for a
          handler, at its exception return (-d int logs entries and returns, so interrupts
          nested in an episode are counted to their own episode).
Mode enter-exit (the example built with -finstrument-functions): cost per enter and per exit
event, an episode from __cyg_profile_func_enter / _exit until back in application code; the
stack's first level is the enter hook. Run it on an example built in that mode:
`overhead.py FW_BUILD_DIR --mode enter-exit --example conflation`.
Modes: compat, framed, itm-uart (the ITM packets over the UART) and itm (the ITM/DWT
registers: ROM, RAM and stack only, as QEMU models no ITM; its consumer is PendSV, which
preempts thread code and is preempted by SysTick).
usage: overhead.py FW_BUILD_DIR [--board B] [--mode M] [--example E]
"""

import argparse
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "e2e"))
import framed_wire  # noqa: E402
import itm_wire  # noqa: E402

# Board code that is not the profiler's: startup, vectors, the application timer.
STARTUP = {"Reset_Handler", "Fault_Handler", "board_exit", "core_vectors", "irq_vectors",
           "app_timer_isr", "board_timer_start", "board_timer_stop", "timer0_handler",
           "PendSV_Handler"}  # startup's weak one; the ITM registers mode defines the real one
UART_HANDLERS = {"uart0_tx_handler", "uart0_handler"}
ITM_CONSUMER = "PendSV_Handler"
ITM_FRAMED_PORT = 1
EXCEPTION_FRAME = 32  # r0-r3, r12, lr, pc, xpsr (no FPU on M0/M3)
GCC_PUSH = 4  # the `push {lr}` gcc emits before `bl __gnu_mcount_nc`
MCOUNT_PUSH = 20  # push {r0-r3, lr}
# -finstrument-functions' hooks: episodes of the enter-exit mode, by the kind they count as.
EVENT_HOOKS = {"__cyg_profile_func_enter": "enter", "__cyg_profile_func_exit": "exit"}


def producer(mode):
    """The thread-mode entry into the runtime that records a call."""
    return "__cyg_profile_func_enter" if mode == "enter-exit" else "__gnu_mcount_nc"


def nm(path):
    out = subprocess.run(["arm-none-eabi-nm", "-S", "--defined-only", str(path)], check=True,
                         capture_output=True, text=True).stdout
    symbols = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4:
            symbols[parts[3]] = (int(parts[0], 16), int(parts[1], 16), parts[2])
    return symbols


def runtime_symbols(library, mode):
    out = subprocess.run(["arm-none-eabi-nm", "--defined-only", str(library)], check=True,
                         capture_output=True, text=True).stdout
    names = {line.split()[-1] for line in out.splitlines() if len(line.split()) == 3}
    return (names - STARTUP) | ({ITM_CONSUMER} if mode == "itm" else set())


def stack_usage(build, board, mode):
    usage = {}
    for su in build.glob(f"CMakeFiles/rackprof_rt_{board}_{mode}.dir/**/*.su"):
        for line in su.read_text().splitlines():
            location, size, _ = line.split("\t")
            usage[location.split(":")[-1]] = int(size)
    usage["__gnu_mcount_nc"] = GCC_PUSH + MCOUNT_PUSH
    usage["SysTick_Handler"] = EXCEPTION_FRAME
    for handler in UART_HANDLERS | ({ITM_CONSUMER} if mode == "itm" else set()):
        usage[handler] = usage.get(handler, 0) + EXCEPTION_FRAME
    return usage


def call_tree(elf, runtime):
    """Direct calls and tail calls between runtime functions, from the disassembly."""
    out = subprocess.run(["arm-none-eabi-objdump", "-d", str(elf)], check=True,
                         capture_output=True, text=True).stdout
    calls = {}
    current = None
    for line in out.splitlines():
        header = re.match(r"[0-9a-f]+ <(\S+)>:", line)
        if header:
            current = header.group(1)
            calls.setdefault(current, set())
            continue
        target = re.search(r"\s(?:bl|b|b\.n|b\.w)\s+[0-9a-f]+ <([^+>]+)>", line)
        if current and target and target.group(1) != current and target.group(1) in runtime:
            calls[current].add(target.group(1))
    calls["SysTick_Handler"] = {"rp_sample"}  # through a register (bx r1)
    return calls


def deepest(usage, calls, function, seen=()):
    if function in seen:
        return 0
    below = [deepest(usage, calls, callee, seen + (function,)) for callee in calls.get(function, ())]
    return usage.get(function, 0) + max(below, default=0)


def worst_stack(usage, calls, frames, consumer, entry="__gnu_mcount_nc"):
    """Thread-mode -pg call, preempted by SysTick, preempted by the UART: the three nest (with
    the ITM registers the consumer, PendSV, sits below SysTick instead: the sum is the same).
    usage holds each handler's 32 B exception frame; frames=False leaves them out."""
    levels = [deepest(usage, calls, entry), deepest(usage, calls, "SysTick_Handler"),
              deepest(usage, calls, consumer)]
    return sum(levels) - (0 if frames else 2 * EXCEPTION_FRAME), levels


def instruction_costs(elf, board, runtime, symbols):
    ranges = sorted((start, start + size, name) for name, (start, size, kind) in symbols.items()
                    if kind in "Tt" and size)
    starts = {start: name for start, _, name in ranges}

    def function_at(pc):
        for start, end, name in ranges:
            if start <= pc < end:
                return name
        return None

    with tempfile.TemporaryDirectory() as tmp:
        log = pathlib.Path(tmp) / "exec.log"
        capture = pathlib.Path(tmp) / "capture.bin"
        subprocess.run(["qemu-system-arm", "-M", board, "-display", "none", "-monitor", "none",
                        "-serial", f"file:{capture}", "-semihosting-config",
                        "enable=on,target=native", "-icount", "shift=5,sleep=off", "-singlestep",
                        "-d", "exec,nochain,int", "-D", str(log), "-kernel", str(elf)],
                       check=True, timeout=600)
        data = capture.read_bytes()
        episodes = []  # [kind, instructions, is an exception]
        stack = []  # open episodes, innermost last
        counted = None  # the episode the last trace line was counted to
        entering = False
        cache = {}
        with log.open() as lines:
            for line in lines:
                # -d int: exception entries and returns give the nesting exactly.
                if "loaded new PC" in line:
                    entering = True
                    continue
                if line.startswith("Exception return"):
                    if stack and stack[-1][2]:
                        stack.pop()
                    continue
                if "rewound execution of TB" in line:  # the instruction runs (and logs) again
                    if counted:
                        counted[1] -= 1
                    continue
                match = re.match(r"Trace \d+: \S+ \[[0-9a-f]+/([0-9a-f]+)/", line)
                if not match:
                    continue
                pc = int(match.group(1), 16)
                if pc not in cache:
                    cache[pc] = function_at(pc)
                name = cache[pc]
                if entering:
                    entering = False
                    kind = "sample" if name == "SysTick_Handler" else \
                        "byte" if name in UART_HANDLERS else "other"
                    stack.append([kind, 0, True])
                    episodes.append(stack[-1])
                elif starts.get(pc) == "__gnu_mcount_nc":
                    stack.append(["arc", 0, False])
                    episodes.append(stack[-1])
                elif starts.get(pc) in EVENT_HOOKS:
                    stack.append([EVENT_HOOKS[starts[pc]], 0, False])
                    episodes.append(stack[-1])
                elif stack and not stack[-1][2] and name not in runtime:
                    stack.pop()  # the -pg call is back in application code
                counted = None
                if stack and (name in runtime or name == "__gnu_mcount_nc"):
                    stack[-1][1] += 1
                    counted = stack[-1]
    return episodes, data


def report(build, board, mode, example):
    elf = build / f"{example}-{board}-{mode}.elf"
    library = build / f"librackprof_rt_{board}_{mode}.a"
    symbols = nm(elf)
    runtime = runtime_symbols(library, mode)
    print(f"\n## {board} ({mode}), {elf.name}")
    code = sorted((size, name) for name, (_, size, kind) in symbols.items()
                  if name in runtime and kind in "Tt")
    print("ROM: " + ", ".join(f"{name} {size}" for size, name in sorted(code, reverse=True)))
    print(f"ROM total: {sum(size for size, _ in code)} B")
    data = sorted((size, name) for name, (_, size, kind) in symbols.items()
                  if name in runtime and kind in "BbDd")
    print("static RAM: " + ", ".join(f"{name} {size}" for size, name in sorted(data, reverse=True))
          + f" = {sum(size for size, _ in data)} B")
    usage = stack_usage(build, board, mode)
    calls = call_tree(elf, runtime | {"__gnu_mcount_nc"})
    consumer = ITM_CONSUMER if mode == "itm" else next(h for h in UART_HANDLERS if h in calls)
    entry = producer(mode)
    total, levels = worst_stack(usage, calls, frames=True, consumer=consumer, entry=entry)
    bare, _ = worst_stack(usage, calls, frames=False, consumer=consumer, entry=entry)
    print(f"worst-case stack: {total} B with the two 32 B exception frames, {bare} B without "
          f"(-fstack-usage; {entry} {levels[0]}, SysTick {levels[1]}, {consumer} {levels[2]} "
          "incl. frames, nested)")
    if mode == "itm":
        print("instructions: not measured (QEMU models no ITM/DWT; PC samples cost the CPU "
              "nothing: the DWT takes them)")
        return

    episodes, capture = instruction_costs(elf, board, runtime, symbols)
    if mode == "compat":
        print(f"capture: {len(capture)} B")
    elif mode == "itm-uart":
        itm = itm_wire.read(capture)
        cap = framed_wire.read(bytes(itm.ports.get(ITM_FRAMED_PORT, b"")))
        print(f"capture: {len(capture)} B, {cap.frames_good} frames on port {ITM_FRAMED_PORT}, "
              f"{sum(cap.arcs.values())} calls, {sum(itm.pcs.values())} PC sample packets")
    elif mode == "enter-exit":
        cap = framed_wire.read(capture)
        print(f"capture: {len(capture)} B, {cap.frames_good} frames, {len(cap.events)} enter/exit "
              f"events, {sum(cap.pcs.values())} samples")
    else:
        cap = framed_wire.read(capture)
        print(f"capture: {len(capture)} B, {cap.frames_good} frames, {sum(cap.arcs.values())} "
              f"calls, {sum(cap.pcs.values())} samples")
    # main's own -pg call (or enter hook) runs before rackprof_start(): the cost while off.
    episodes = [e for e in episodes if e[0] != "other"]
    if episodes and episodes[0][0] in ("arc", "enter"):
        print(f"instructions: {entry} while off: {episodes[0][1]}")
    for kind in ("arc", "enter", "exit", "sample", "byte"):
        counts = [n for k, n, _ in episodes[1:] if k == kind]
        if not counts:
            continue
        if kind == "byte":
            print(f"instructions in the UART handler: {sum(counts)} for {len(capture)} B = "
                  f"{sum(counts) / max(len(capture), 1):.1f} per byte sent")
        else:
            print(f"instructions per {kind}: median {statistics.median(counts):.0f}, "
                  f"min {min(counts)}, max {max(counts)} ({len(counts)} {kind}s)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build", type=pathlib.Path)
    parser.add_argument("--board", action="append")
    parser.add_argument("--mode", action="append")
    parser.add_argument("--example", default="deterministic")
    args = parser.parse_args()
    for board in args.board or ["microbit", "mps2-an385"]:
        for mode in args.mode or ["compat", "framed", "itm-uart", "itm", "enter-exit"]:
            # The ITM modes exist for ARMv7-M boards only.
            if (args.build / f"{args.example}-{board}-{mode}.elf").exists():
                report(args.build, board, mode, args.example)


if __name__ == "__main__":
    main()
