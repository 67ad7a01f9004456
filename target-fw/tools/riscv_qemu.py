#!/usr/bin/env python3
"""Runs the RISC-V builds (target-fw/riscv) under QEMU and checks what each sends, from the
wire itself (tests/e2e/framed_wire.py): QEMU exits with 0; every frame good, none lost; one
HELLO with 4-byte addresses, the build's architecture byte, the ELF's build-id and text range;
START then STOP; per-arc call counts exactly as the example's source makes them (framed: ARC
items; enter-exit: ENTER items, every ENTER matched by an EXIT in its context, stamps rising
within each context). plain builds run a few seconds: HELLO, START and PC samples, no arcs.
With --rackprof, each framed capture is also converted (`rackprof convert --protocol framed`)
and the command's first line printed.

    python3 target-fw/tools/riscv_qemu.py BUILD_DIR [--rackprof build/rackprof] [--keep DIR]
"""

import argparse
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests" / "e2e"))
import framed_wire  # noqa: E402

MACHINES = {"qemu-virt": ["-M", "virt", "-bios", "none"], "qemu-virt-imc": ["-M", "virt", "-bios", "none"],
            "sifive-e": ["-M", "sifive_e"]}
ARCH = {"qemu-virt": 0x11, "qemu-virt-imc": 0x10, "sifive-e": 0x11}
QEMU = ["qemu-system-riscv32", "-display", "none", "-monitor", "none", "-icount", "shift=5,sleep=off",
        "-semihosting-config", "enable=on,target=native"]
EXAMPLES = {"framed": ("blinky", "conflation", "deterministic", "nested"),
            "enter-exit": ("conflation", "deterministic", "nested"), "plain": ("conflation",)}
# Calls per arc, as each example's comment states them (ROUNDS etc. from its #defines).
CALLS = {
    "deterministic": {("main", "middle"): "ROUNDS", ("middle", "leaf"): "3*ROUNDS",
                      ("middle", "crunch"): "ROUNDS", ("main", "crunch"): "ROUNDS",
                      ("main", "fact"): "ROUNDS", ("fact", "fact"): "4*ROUNDS",
                      ("main", "ping"): "ROUNDS", ("ping", "pong"): "3*ROUNDS",
                      ("pong", "ping"): "3*ROUNDS"},
    "conflation": {("main", "fast"): "ROUNDS", ("main", "slow"): "ROUNDS",
                   ("fast", "doSomething"): "ROUNDS", ("slow", "doSomething"): "ROUNDS"},
    "nested": {("main", "work"): "ROUNDS", ("work", "leaf"): "3*ROUNDS",
               ("board_timer_handler", "app_timer_isr"): "TICKS", ("app_timer_isr", "tick"): "TICKS"},
    "blinky": {("main", "led_toggle"): "BLINKS", ("led_toggle", "led_set"): "BLINKS",
               ("main", "wait_ms"): "BLINKS", ("wait_ms", "wait_us"): "BLINKS*WAIT_MS"},
}
MACHINE_TIMER = 0x8007  # rp_handler() in the machine timer trap

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)
    return ok


def define(example, name):
    import re
    text = (HERE.parent / "examples" / f"{example}.c").read_text()
    return int(re.search(rf"#define {name} (\d+)u", text).group(1))


def expected(example):
    out = {}
    for arc, formula in CALLS[example].items():
        n = 1
        for term in formula.split("*"):
            n *= int(term) if term.isdigit() else define(example, term)
        out[arc] = n
    return out


class Symbols:
    def __init__(self, elf):
        text = subprocess.run(["riscv64-unknown-elf-nm", "-S", "--defined-only", str(elf)],
                              check=True, capture_output=True, text=True).stdout
        self.functions, self.by_name = [], {}
        for parts in map(str.split, text.splitlines()):
            if len(parts) == 4 and parts[2] in "Tt":
                start = int(parts[0], 16)
                self.functions.append((start, start + int(parts[1], 16), parts[3]))
            if len(parts) >= 3:
                self.by_name[parts[-1]] = int(parts[0], 16)

    def name_of(self, address):
        return next((n for s, e, n in self.functions if s <= address < e), hex(address))


def build_id(elf):
    text = subprocess.run(["riscv64-unknown-elf-readelf", "-n", str(elf)], check=True,
                          capture_output=True, text=True).stdout
    return bytes.fromhex(text.split("Build ID:")[1].split()[0])


def run(board, elf, capture, seconds):
    cmd = QEMU + MACHINES[board] + ["-serial", f"file:{capture}", "-kernel", str(elf)]
    try:
        rc = subprocess.run(cmd, timeout=seconds, capture_output=True).returncode
    except subprocess.TimeoutExpired:
        rc = None
    return rc, capture.read_bytes()


def check_hello(tag, board, elf, cap, symbols):
    if not check(len(cap.hellos) == 1, f"{tag}: one HELLO"):
        return
    h = cap.hellos[0]
    check(h.addr_bytes == 4 and h.sample_hz == 1000 and h.arch == ARCH[board] and h.flags & 0x20,
          f"{tag}: HELLO v{h.version}, {h.addr_bytes}-byte addresses, {h.sample_hz} Hz, flags "
          f"{h.flags:#04x}, arch {h.arch:#04x} (want {ARCH[board]:#04x})")
    check((h.text_lo, h.text_hi) == (symbols.by_name["__text_start"], symbols.by_name["__text_end"])
          and h.build_id == build_id(elf), f"{tag}: HELLO text range and build-id are the ELF's")


def check_events(tag, cap, symbols):
    """ENTER items as arcs; every ENTER has its EXIT in the same context; stamps rise."""
    arcs, depth, last = {}, {}, {}
    ordered = True
    for enter, callee, site, stamp, exception in cap.events:
        if enter:
            key = (symbols.name_of(site), symbols.name_of(callee))
            arcs[key] = arcs.get(key, 0) + 1
        depth[exception] = depth.get(exception, 0) + (1 if enter else -1)
        ordered &= (stamp - last.get(exception, stamp)) & 0xFFFFFFFF < 1 << 31
        last[exception] = stamp
    check(all(d == 0 for d in depth.values()) and ordered and set(depth) <= {0, MACHINE_TIMER},
          f"{tag}: {len(cap.events)} events, ENTER/EXIT balanced per context {sorted(depth)}, "
          "stamps rising")
    return arcs


def check_build(args, board, mode, example, work):
    tag = f"{example}/{board}/{mode}"
    elf = args.build / f"{example}-{board}-{mode}.elf"
    capture = work / f"{example}-{board}-{mode}.bin"
    rc, data = run(board, elf, capture, 5 if mode == "plain" else 120)
    cap = framed_wire.read(data)
    symbols = Symbols(elf)
    check(cap.frames_good > 0 and cap.frames_bad == 0 and cap.frames_lost == 0,
          f"{tag}: {cap.frames_good} frames, all good, none lost")
    check_hello(tag, board, elf, cap, symbols)
    if mode == "plain":
        check(rc is None and cap.markers == ["start"] and cap.pcs and not cap.arcs,
              f"{tag}: still running after 5 s, START, {sum(cap.pcs.values())} samples, no arcs")
        return
    check(rc == 0, f"{tag}: QEMU exit status {rc}")
    check(cap.markers == ["start", "stop"] and cap.dropped_total == 0,
          f"{tag}: START then STOP, nothing dropped")
    if mode == "enter-exit":
        got = check_events(tag, cap, symbols)
    else:
        got = {}
        for (frm, slf), n in cap.arcs.items():
            key = (symbols.name_of(frm), symbols.name_of(slf))
            got[key] = got.get(key, 0) + n
    want = expected(example)
    check(got == want, f"{tag}: arcs {sorted(got.items())}" +
          ("" if got == want else f"\n     want {sorted(want.items())}"))
    if args.rackprof and mode == "framed":
        out = subprocess.run([args.rackprof, "convert", str(capture), "--protocol", "framed",
                              "--elf", str(elf), "--report", "none", "-o", str(work / "gmon.out")],
                             capture_output=True, text=True)
        print(f"     rackprof convert (exit {out.returncode}): {(out.stderr or out.stdout).splitlines()[0]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", type=pathlib.Path)
    parser.add_argument("--rackprof")
    parser.add_argument("--keep", type=pathlib.Path, help="keep the captures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or pathlib.Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for board in MACHINES:
            for mode, examples in EXAMPLES.items():
                for example in examples:
                    check_build(args, board, mode, example, work)
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
