#!/usr/bin/env python3
"""The RISC-V runtime's overhead (target-fw/riscv builds), measured as overhead.py measures the
Cortex-M one: ROM and static RAM from riscv64-unknown-elf-nm, and instructions executed per
episode, counted by QEMU (-singlestep -d exec,nochain,int: a trace line per instruction; the
machine timer interrupt logged where it is taken) while an example runs:
  arc      _mcount, from its first instruction until it returns into the application
           (the `mv a0,ra` and the call gcc adds in the application are not counted)
  enter    __cyg_profile_func_enter / _exit likewise (enter-exit builds)
  exit
  sample   the machine timer trap, from the interrupt to its mret (the trap entry and exit,
           rp_sample, the caches' periodic flush)
  drain    port_uart_kick, from its call to its return: the consumer (frames, CRC, COBS, the
           UART), which RISC-V runs synchronously where a Cortex-M runs its UART interrupt;
           counted on its own, not in the arc or sample that kicked it, and per byte sent.
An episode nested in another (a trap during an arc, a drain inside either) counts to itself.
usage: riscv_overhead.py BUILD_DIR [--board B] [--mode framed|enter-exit] [--example E]
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

MACHINES = {"qemu-virt": ["-M", "virt", "-bios", "none"],
            "qemu-virt-imc": ["-M", "virt", "-bios", "none"], "sifive-e": ["-M", "sifive_e"]}
# Board code that is not the profiler's (startup, exit, the application timer), as overhead.py.
STARTUP = {"_start", "board_exit", "board_trap", "app_timer_isr", "board_timer_start",
           "board_timer_stop", "board_timer_handler", "memcpy", "memset"}
HOOKS = {"_mcount": "arc", "__cyg_profile_func_enter": "enter", "__cyg_profile_func_exit": "exit",
         "port_uart_kick": "drain"}


def nm(path):
    out = subprocess.run(["riscv64-unknown-elf-nm", "-S", "--defined-only", str(path)],
                         check=True, capture_output=True, text=True).stdout
    return {p[3]: (int(p[0], 16), int(p[1], 16), p[2]) for p in map(str.split, out.splitlines())
            if len(p) == 4}


def reachable(elf, roots):
    """For each root, the functions it may run: the closure of calls and tail calls (jal, j)
    in the disassembly. An episode lasts while execution stays inside its root's set."""
    out = subprocess.run(["riscv64-unknown-elf-objdump", "-d", str(elf)], check=True,
                         capture_output=True, text=True).stdout
    calls, current = {}, None
    for line in out.splitlines():
        header = re.match(r"[0-9a-f]+ <(\S+)>:", line)
        if header:
            current = header.group(1)
            calls.setdefault(current, set())
            continue
        target = re.search(r"\s(?:jal|j)\s+(?:ra,)?[0-9a-f]+ <([^+>]+)>", line)
        if current and target and target.group(1) != current:
            calls[current].add(target.group(1))
    sets = {}
    for root in roots:
        seen, todo = set(), [root]
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(calls.get(name, ()))
        sets[root] = seen
    return sets


def episodes_of(log, symbols, sets):
    """[kind, instructions] per episode, in order, from QEMU's exec/int log."""
    ranges = sorted((start, start + size, name) for name, (start, size, kind) in symbols.items()
                    if kind in "Tt" and size)
    starts = {start: name for start, _, name in ranges}
    trap, size, _ = symbols["rp_trap_entry"]
    mret = trap + size - 4
    episodes, stack, counted, cache = [], [], None, {}  # stack: [kind, count, functions | None]
    for line in log:
        if "riscv_cpu_do_interrupt" in line and "async:1" in line:
            stack.append(["sample", 0, None])
            episodes.append(stack[-1])
            continue
        if line.startswith("Stopped execution of TB chain"):  # that instruction did not run
            if counted:
                counted[1] -= 1
            continue
        match = re.match(r"Trace \d+: \S+ \[[0-9a-f]+/([0-9a-f]+)/", line)
        if not match:
            continue
        pc = int(match.group(1), 16)
        if pc not in cache:
            cache[pc] = next((n for a, b, n in ranges if a <= pc < b), None)
        while stack and stack[-1][2] is not None and cache[pc] not in stack[-1][2]:
            stack.pop()  # back in its caller
        if starts.get(pc) in HOOKS and not (stack and stack[-1][0] == HOOKS[starts[pc]]):
            stack.append([HOOKS[starts[pc]], 0, sets[starts[pc]]])
            episodes.append(stack[-1])
        counted = stack[-1] if stack else None
        if counted:
            counted[1] += 1
        if stack and stack[-1][2] is None and pc == mret:
            stack.pop()
    return episodes


def run(board, elf):
    """Streams QEMU's log (millions of lines) through the parser rather than to a file."""
    with tempfile.TemporaryDirectory() as tmp:
        capture = pathlib.Path(tmp) / "capture.bin"
        qemu = subprocess.Popen(["qemu-system-riscv32", *MACHINES[board], "-display", "none",
                                 "-monitor", "none", "-serial", f"file:{capture}",
                                 "-semihosting-config", "enable=on,target=native", "-icount",
                                 "shift=5,sleep=off", "-singlestep", "-d", "exec,nochain,int",
                                 "-D", "/dev/stdout", "-kernel", str(elf)],
                                stdout=subprocess.PIPE, text=True)
        episodes = episodes_of(qemu.stdout, nm(elf), reachable(elf, HOOKS))
        if qemu.wait(timeout=900) != 0:
            raise SystemExit(f"{elf.name}: QEMU exit status {qemu.returncode}")
        return episodes, capture.read_bytes()


def report(build, board, mode, example):
    elf = build / f"{example}-{board}-{mode}.elf"
    library = build / f"librackprof_rt_{board}_{mode}.a"
    symbols = nm(elf)
    runtime = set(nm_names(library)) - STARTUP
    print(f"\n## {board} ({mode}), {elf.name}")
    code = sorted(((s, n) for n, (_, s, k) in symbols.items() if n in runtime and k in "Tt"),
                  reverse=True)
    print("ROM: " + ", ".join(f"{n} {s}" for s, n in code) + f"\nROM total: {sum(s for s, _ in code)} B")
    data = sorted(((s, n) for n, (_, s, k) in symbols.items() if n in runtime and k in "BbDdSs"),
                  reverse=True)
    print("static RAM: " + ", ".join(f"{n} {s}" for s, n in data) + f" = {sum(s for s, _ in data)} B")
    episodes, capture = run(board, elf)
    cap = framed_wire.read(capture)
    print(f"capture: {len(capture)} B, {cap.frames_good} frames, {sum(cap.arcs.values())} calls, "
          f"{len(cap.events)} events, {sum(cap.pcs.values())} samples")
    # main's own hook runs before rackprof_start(): the cost while profiling is off.
    first = next((e for e in episodes if e[0] in ("arc", "enter")), None)
    if first:
        print(f"instructions: {'_mcount' if first[0] == 'arc' else 'the enter hook'} while off: "
              f"{first[1]}")
    for kind in ("arc", "enter", "exit", "sample", "drain"):
        counts = [e[1] for e in episodes if e[0] == kind and e is not first]
        if not counts:
            continue
        if kind == "drain":
            print(f"instructions draining: {sum(counts)} in {len(counts)} kicks for "
                  f"{len(capture)} B = {sum(counts) / max(len(capture), 1):.1f} per byte sent")
        else:
            print(f"instructions per {kind}: median {statistics.median(counts):.0f}, min "
                  f"{min(counts)}, max {max(counts)} ({len(counts)} {kind}s)")


def nm_names(library):
    out = subprocess.run(["riscv64-unknown-elf-nm", "--defined-only", str(library)], check=True,
                         capture_output=True, text=True).stdout
    return [p[-1] for p in map(str.split, out.splitlines()) if len(p) == 3]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build", type=pathlib.Path)
    parser.add_argument("--board", action="append")
    parser.add_argument("--mode", action="append")
    parser.add_argument("--example", default="deterministic")
    args = parser.parse_args()
    for board in args.board or ["qemu-virt", "qemu-virt-imc"]:
        for mode in args.mode or ["framed", "enter-exit"]:
            if (args.build / f"{args.example}-{board}-{mode}.elf").exists():
                report(args.build, board, mode, args.example)


if __name__ == "__main__":
    main()
