#!/usr/bin/env python3
"""The RISC-V builds (target-fw/riscv) end to end under QEMU (qemu-system-riscv32 -M virt and
sifive_e). From the wire itself (tests/e2e/framed_wire.py): QEMU exits with 0; every frame
good, none lost; one HELLO with 4-byte addresses, the build's architecture byte, the ELF's
build-id and text range; START then STOP; per-arc call counts exactly as the example's source
makes them (framed: ARC items; enter-exit: ENTER items, every ENTER matched by an EXIT in its
context, stamps rising within each context). plain builds run a few seconds: HELLO, START and
PC samples, no arcs. With --rackprof, through rackprof too: each framed capture converted has
the same arcs and every sample in its gmon.out, and riscv64-unknown-elf-gprof -b (and -l) of
that gmon.out prints byte for byte what rackprof prints; a live daemon session (QEMU's UART as
its TCP link) gives the same; a capture given an ARM ELF is refused, saying why.

    python3 tests/e2e/riscv_e2e.py BUILD_DIR [--rackprof build/rackprof] [--arm-elf E] [--keep DIR]

Exit 77 (skipped) when qemu-system-riscv32 or the RISC-V builds are missing.
"""

import argparse
import json
import pathlib
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
EXAMPLES_DIR = HERE.parents[1] / "target-fw" / "examples"
import framed_wire  # noqa: E402  (beside this file)

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
    text = (EXAMPLES_DIR / f"{example}.c").read_text()
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
        gmon = work / f"{example}-{board}.gmon.out"
        report = convert(args, tag, capture, elf, gmon)
        if report is None:
            return
        got = {}
        for arc in report["raw"]["arcs"]:
            key = (symbols.name_of(int(arc["from"], 16)), symbols.name_of(int(arc["self"], 16)))
            got[key] = got.get(key, 0) + arc["count"]
        check(got == want, f"{tag}: rackprof's arcs are the program's")
        raw = report["raw"]
        in_gmon = sum(h["samples"] for h in raw["histograms"]) + raw["samples_outside_histogram"]
        check(in_gmon == sum(cap.pcs.values()) > 0,
              f"{tag}: every PC sample sent is in gmon.out ({in_gmon})")
        check(report["source"].get("target_arch") == framed_wire_arch(board),
              f"{tag}: the report names the target's architecture")
        check_oracle(args, tag, elf, gmon)
        if args.arm_elf:
            wrong = subprocess.run([args.rackprof, "convert", str(capture), "--protocol", "framed",
                                    "--elf", str(args.arm_elf), "--report", "none"],
                                   capture_output=True, text=True)
            check(wrong.returncode == 1 and "the target says it is rv32" in wrong.stderr,
                  f"{tag}: with an ARM ELF: refused ({wrong.stderr.strip()[:120]})")


def framed_wire_arch(board):
    return {0x11: "rv32imac", 0x10: "rv32imc"}[ARCH[board]]


def convert(args, tag, capture, elf, gmon):
    out = subprocess.run([args.rackprof, "convert", str(capture), "--protocol", "framed",
                          "--elf", str(elf), "--report", "json", "-o", str(gmon)],
                         capture_output=True, text=True)
    if not check(out.returncode == 0, f"{tag}: rackprof convert --protocol framed"):
        print(out.stderr)
        return None
    return json.loads(out.stdout)


def check_oracle(args, tag, elf, gmon):
    """riscv64-unknown-elf-gprof -b (and -l -b) of gmon.out print what rackprof prints."""
    for lines in (False, True):
        ours = subprocess.run([args.rackprof, "convert", str(gmon), "--format", "gmon", "--elf",
                               str(elf), *(["--lines"] if lines else [])],
                              capture_output=True, text=True)
        theirs = subprocess.run(["riscv64-unknown-elf-gprof", *(["-l"] if lines else []), "-b",
                                 str(elf), str(gmon)], capture_output=True, text=True)
        same = ours.returncode == 0 and theirs.returncode == 0 and ours.stdout == theirs.stdout
        check(same, f"{tag}: riscv64-unknown-elf-gprof -b{' -l' if lines else ''} prints what "
              "rackprof prints, byte for byte")
        if not same:
            print(ours.stderr, theirs.stderr)


def check_arm_capture_refused(args, work):
    """The reverse of a RISC-V capture given an ARM ELF: a Cortex-M capture given a RISC-V ELF."""
    capture = work / "arm.bin"
    qemu = subprocess.run(["qemu-system-arm", "-M", "mps2-an385", "-display", "none", "-monitor",
                           "none", "-serial", f"file:{capture}", "-semihosting-config",
                           "enable=on,target=native", "-icount", "shift=5,sleep=off", "-kernel",
                           str(args.arm_elf)], capture_output=True, timeout=120)
    if not check(qemu.returncode == 0, f"{args.arm_elf.name} runs under qemu-system-arm"):
        return
    wrong = subprocess.run([args.rackprof, "convert", str(capture), "--protocol", "framed",
                            "--elf", str(args.build / "blinky-qemu-virt-framed.elf"), "--report",
                            "none"], capture_output=True, text=True)
    check(wrong.returncode == 1 and "the target says it is armv7-m" in wrong.stderr,
          f"a Cortex-M capture with a RISC-V ELF: refused ({wrong.stderr.strip()[:120]})")


def check_demo(args, work):
    """rackprof demo --qemu on the RISC-V boards: the run, its gmon.out, gprof's reading of it."""
    for board in ("sifive_e", "virt"):
        tag = f"rackprof demo --qemu --board {board}"
        out_dir = work / f"demo-{board}"
        demo = subprocess.run([args.rackprof, "demo", "--qemu", "--board", board, "--dir",
                               str(out_dir), "--firmware-dir", str(args.build)],
                              capture_output=True, text=True)
        if check(demo.returncode == 0 and "crunch" in demo.stdout, f"{tag}: exit 0, a profile"):
            check_oracle(args, tag, out_dir / "firmware.elf", out_dir / "gmon.out")
        else:
            print(demo.stdout[-1500:], demo.stderr[-1500:])


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def check_daemon(args, board, work):
    """QEMU's UART as a TCP server waiting for its client, the daemon as that client: the
    stored session of deterministic has the program's arcs and the target's architecture, and
    gprof reads its gmon.out as rackprof does."""
    tag = f"deterministic/{board}/framed/daemon"
    elf = args.build / f"deterministic-{board}-framed.elf"
    port = free_port()
    qemu = subprocess.Popen(QEMU + MACHINES[board] + [
        "-serial", f"tcp:127.0.0.1:{port},server=on,wait=on", "-kernel", str(elf)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = work / f"{board}.db"
    config = work / f"{board}.toml"
    config.write_text(f"""[server]
listen = "127.0.0.1:0"
[storage]
path = "{db}"
[links]
reconnect_min_ms = 50
[[boards]]
name = "qemu-{board}"
link = "tcp://127.0.0.1:{port}"
protocol = "framed"
format = "bin"
elf = "{elf}"
autostart = true
""")
    log_path = work / f"{board}-serve.log"
    with log_path.open("w") as log:
        serve = subprocess.Popen([args.rackprof, "serve", "--config", str(config)], stdout=log,
                                 stderr=subprocess.STDOUT)
        try:
            qemu_rc = qemu.wait(timeout=120)
        except subprocess.TimeoutExpired:
            qemu.kill()
            qemu_rc = None
        deadline = time.monotonic() + 30
        while qemu_rc is not None and time.monotonic() < deadline:
            if "disconnected:" in log_path.read_text(errors="replace"):
                break
            time.sleep(0.05)
        serve.send_signal(signal.SIGTERM)
        serve_rc = serve.wait(timeout=60)
    check(qemu_rc == 0 and serve_rc == 0, f"{tag}: the firmware ran with the daemon attached "
          f"(QEMU {qemu_rc}, serve {serve_rc})")
    with sqlite3.connect(db) as con:
        arch = con.execute("SELECT arch FROM sessions WHERE id = 1").fetchone()
    check(arch and arch[0] == framed_wire_arch(board), f"{tag}: the session's arch is {arch}")
    gmon = work / f"{board}-daemon.gmon.out"
    out = subprocess.run([args.rackprof, "convert", "--db", str(db), "--session", "1", "--elf",
                          str(elf), "-o", str(gmon), "--report", "json"], capture_output=True,
                         text=True)
    if not check(out.returncode == 0, f"{tag}: rackprof convert --db --session 1"):
        print(out.stderr)
        return
    symbols = Symbols(elf)
    got = {}
    for arc in json.loads(out.stdout)["raw"]["arcs"]:
        key = (symbols.name_of(int(arc["from"], 16)), symbols.name_of(int(arc["self"], 16)))
        got[key] = got.get(key, 0) + arc["count"]
    check(got == expected("deterministic"), f"{tag}: the stored session's arcs are the program's")
    check_oracle(args, tag, elf, gmon)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", type=pathlib.Path)
    parser.add_argument("--rackprof")
    parser.add_argument("--arm-elf", type=pathlib.Path,
                        help="a Cortex-M ELF: a RISC-V capture given it must be refused")
    parser.add_argument("--keep", type=pathlib.Path, help="keep the captures here")
    args = parser.parse_args()
    for tool in ("qemu-system-riscv32", "riscv64-unknown-elf-gprof", "riscv64-unknown-elf-nm"):
        if not shutil.which(tool):
            print(f"SKIP: {tool} is not installed (./setup.sh installs it)")
            return 77
    if not list(args.build.glob("*.elf")):
        print(f"SKIP: no RISC-V firmware in {args.build} (riscv64-unknown-elf-gcc absent?)")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or pathlib.Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for board in MACHINES:
            for mode, examples in EXAMPLES.items():
                for example in examples:
                    check_build(args, board, mode, example, work)
            if args.rackprof:
                check_daemon(args, board, work)
        if args.rackprof:
            check_demo(args, work)
            if args.arm_elf:
                check_arm_capture_refused(args, work)
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
