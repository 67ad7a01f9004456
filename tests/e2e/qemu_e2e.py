#!/usr/bin/env python3
"""End to end on emulated boards: target-fw's example firmware runs under QEMU
(mps2-an385 = Cortex-M3, mps2-an386 = Cortex-M4 with FPU, hard-float, microbit = Cortex-M0,
mps2-an505 = Cortex-M33, ARMv8-M Mainline, running Secure; mps2-an505-ns = the same machine,
the firmware Non-secure behind a tiny Secure boot in the same ELF: compat and framed only),
its UART goes to a file, and the capture is profiled by the real `rackprof convert`; GNU gprof
reads the gmon.out it writes.

Checked, per board:
  compat  deterministic, conflation, nested (a -pg timer interrupt preempting -pg calls) and
          psp (the thread on the process stack, a -pg timer interrupt on the main stack);
          also built with the blocking queue option, and with 4-byte addresses: every arc's
          call count exactly as the program makes them (caller/callee named from the ELF's
          symbols, counts from the program's structure: the table below times the
          ROUNDS/TICKS the source defines), no byte discarded, and arm-none-eabi-gprof's flat profile led by the known hot function;
          and (compat) `rackprof convert --lines` printing exactly what gprof -l -b prints.
  framed  the same programs: each frame checked against protocol/framed-protocol.md (COBS,
          CRC, sequence, HELLO text range and build-id equal to the ELF's), exact per-arc
          counts, nothing lost or dropped; then frames cut out of the capture are counted as
          lost exactly. Once `rackprof convert --protocol framed` exists, the same capture
          through it: exact counts, frames_lost 0 (until then a visible SKIP line).
  daemon  deterministic on each board with its UART on a TCP socket that a real
          `rackprof serve` captures into SQLite: the stored session, converted, has the exact
          per-arc counts and gprof's hot function; compat, and framed (protocol = "framed",
          frames_lost 0) once rackprof speaks it.
  itm     (mps2-an385, mps2-an386, mps2-an505: ARMv7-M, ARMv8-M Mainline) the itm-uart builds: the ITM packets a real
          ITM would send, through the UART. Read by the test's own ITM reader (itm_wire.py): one sync first, no
          overflow, software packets on ports 1 and 0 only and mostly 4 bytes wide; port 1's
          bytes checked as framed frames (HELLO build-id, START/STOP, exact per-arc counts, no
          PC item); every PC sample a DWT packet inside the code; blinky's WFIs as sleep
          samples, one per WFI; port 0 carrying the example's console line. Once `rackprof
          convert --protocol itm` exists, the capture through it (--framed-port 1
          --console-port 0): exact counts, every PC sample in gmon.out, gprof's hot function,
          overflows 0, sleep samples, and the `console: ` line on stderr; deterministic captured
          live by `rackprof serve` with protocol = "itm" (each a visible SKIP until then).
  psp     in every mode above, besides the exact counts: the PC samples, read from the wire
          by this test, where the stack EXC_RETURN names puts them: all inside functions, none
          in main/run_on_psp/the reset handler/a handler SysTick cannot preempt, >= 50 % in the
          PSP thread's functions, >= 10 % in the MSP handler's isr_spin, and gprof's shares on
          rackprof's gmon.out the same. The builds whose sampler is forced to MSP or to PSP
          (compat-msp, compat-psp) must fail that check (no thread sample, or no handler one).
  lines   deterministic (mps2-an385, compat) run once more with one instruction per
          translation block and QEMU's trace of every executed instruction: rackprof annotate's
          per-instruction and per-line shares of that run's capture hold the trace's exact
          shares (lines by addr2line) within their 99.9 % Clopper-Pearson intervals, over the
          example's own code (the runtime and handlers hide from the sampler).
  blinky  also every mode above with exact counts; compat, framed (and itm-uart) captures of
          the same run: their sizes (framed must be >= 5x smaller than compat).

Exit 77 (ctest SKIP) with a SKIP line when QEMU, the ARM toolchain or the firmware is absent.
usage: qemu_e2e.py --rackprof BIN --fw-dir DIR --source-dir DIR [--board B ...]
"""

import argparse
import collections
import json
import math
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import framed_wire  # noqa: E402
import itm_wire  # noqa: E402

BOARDS = ("mps2-an385", "mps2-an386", "microbit", "mps2-an505", "mps2-an505-ns")
# The QEMU machine of each board whose name is not one.
MACHINES = {"mps2-an505-ns": "mps2-an505"}
# Boards built in some wire modes only (target-fw's MODES_<board>): the others run every one.
BOARD_MODES = {"mps2-an505-ns": ("compat", "framed")}
# ARMv7-M and ARMv8-M Mainline: the ITM builds exist for these only
ITM_BOARDS = ("mps2-an385", "mps2-an386", "mps2-an505")
# Code above 16 MiB (the AN505's Secure alias 0x10000000): every mode sends 4-byte addresses.
A4_BOARDS = ("mps2-an505", "mps2-an505-ns")
# The HELLO's architecture byte (flags bit 5) each board's core makes the runtime send.
ARCH_CODES = {"microbit": 0x01, "mps2-an385": 0x02, "mps2-an386": 0x03, "mps2-an505": 0x05,
              "mps2-an505-ns": 0x05}
ITM_FRAMED_PORT, ITM_CONSOLE_PORT = 1, 0
QEMU_TIMEOUT_S = 120

# Calls of each arc per unit of each example, from its source, and the #define (read from the
# source) that counts the units.
CALLS = {
    "deterministic": {("main", "middle"): (1, "ROUNDS"), ("middle", "leaf"): (3, "ROUNDS"),
                      ("middle", "crunch"): (1, "ROUNDS"), ("main", "crunch"): (1, "ROUNDS"),
                      ("main", "fact"): (1, "ROUNDS"), ("fact", "fact"): (4, "ROUNDS"),
                      ("main", "ping"): (1, "ROUNDS"), ("ping", "pong"): (3, "ROUNDS"),
                      ("pong", "ping"): (3, "ROUNDS")},
    "conflation": {("main", "fast"): (1, "ROUNDS"), ("main", "slow"): (1, "ROUNDS"),
                   ("fast", "doSomething"): (1, "ROUNDS"), ("slow", "doSomething"): (1, "ROUNDS")},
    # A -pg interrupt handler preempting main's -pg calls: nested producers.
    "nested": {("main", "work"): (1, "ROUNDS"), ("work", "leaf"): (3, "ROUNDS"),
               ("timer0_handler", "app_timer_isr"): (1, "TICKS"),
               ("app_timer_isr", "tick"): (1, "TICKS")},
    "blinky": {("main", "led_toggle"): (1, "BLINKS"), ("led_toggle", "led_set"): (1, "BLINKS"),
               ("main", "wait_ms"): (1, "BLINKS"), ("wait_ms", "wait_us"): (1, "BLINKS*WAIT_MS")},
    # The thread on the process stack (PSP), a -pg timer interrupt on the main stack (MSP).
    "psp": {("psp_thread", "psp_work"): (1, "ROUNDS"), ("psp_work", "psp_leaf"): (3, "ROUNDS"),
            ("timer0_handler", "app_timer_isr"): (1, "TICKS"),
            ("app_timer_isr", "isr_spin"): (1, "TICKS")},
    # Non-secure code calling a Secure service through its SG veneer (mps2-an505-ns only): no
    # arc into the Secure side (not -pg, not in the NS code), nothing else changed.
    "secure_call": {("main", "ns_caller"): (1, "ROUNDS"), ("main", "ns_spin"): (1, "ROUNDS")},
}
# Examples only some boards build (target-fw's EXAMPLES_<board>).
EXAMPLE_BOARDS = {"secure_call": ("mps2-an505-ns",)}
# A Non-secure sampler's tick that interrupted Secure code is sent as a sample of the runtime's
# rackprof_in_secure (never run): secure_call's Secure service runs about as long as its
# Non-secure loop, so 30-70 % of its samples there, and gprof shows that share for it.
SECURE_MARKER = "rackprof_in_secure"
# nested is mostly profiler overhead by design (it maximises -pg calls per second): no hot check.
HOT = {"deterministic": "crunch", "conflation": "doSomething", "nested": None,
       "blinky": "wait_us", "psp": "psp_work", "secure_call": "ns_spin"}
# The console line each example prints after profiling (nested prints none).
CONSOLE = {"deterministic": "deterministic: done", "conflation": "conflation: done",
           "blinky": "blinky: done", "nested": None, "psp": None,
           "secure_call": "secure_call: done"}
# psp: where its PC samples must land. The application's functions on each stack; the code
# that runs in thread mode on MSP (a sampler reading MSP for a PSP thread finds its stale
# frames there, or no code at all); the handlers SysTick cannot preempt (the UART's is above
# it). At least PSP_MIN_SHARE of the samples in the thread's functions, ISR_MIN_SHARE in
# isr_spin (the source makes them about 70-80 % and 15-20 %): a sampler that always read MSP
# puts none in the thread, one that always read PSP none in the handler.
PSP_THREAD = ("psp_thread", "psp_work", "psp_leaf")
MSP_HANDLER = ("timer0_handler", "app_timer_isr", "isr_spin")
NEVER_SAMPLED = ("main", "run_on_psp", "Reset_Handler", "SysTick_Handler", "rp_sample",
                 "uart0_tx_handler", "uart0_handler", "rackprof_uart_isr")
PSP_MIN_SHARE, ISR_MIN_SHARE = 0.5, 0.1
# Builds of psp whose sampler is forced to one stack (RACKPROF_SAMPLER_STACK): the check above
# must fail for each.
FORCED_SAMPLER_MODES = ("compat-msp", "compat-psp")

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)
    return ok


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def define(source, name):
    match = re.search(rf"#define {name} (\d+)u", source.read_text())
    return int(match.group(1))


def expected_arcs(example, source_dir):
    source = source_dir / "target-fw" / "examples" / f"{example}.c"
    return {arc: n * math.prod(define(source, u) for u in units.split("*"))
            for arc, (n, units) in CALLS[example].items()}


class Symbols:
    """Function symbols of an ELF: address -> name for any address inside a function."""

    def __init__(self, elf):
        out = subprocess.run(["arm-none-eabi-nm", "-S", "--defined-only", str(elf)],
                             check=True, capture_output=True, text=True).stdout
        self.functions = []
        self.by_name = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[2] in "Tt":
                start, size = int(parts[0], 16), int(parts[1], 16)
                self.functions.append((start, start + size, parts[3]))
            if len(parts) >= 3:
                self.by_name[parts[-1]] = int(parts[0], 16)
        # Code, as opposed to data placed among it (the vector tables): FUNC symbols.
        out = subprocess.run(["arm-none-eabi-readelf", "-sW", str(elf)], check=True,
                             capture_output=True, text=True).stdout
        self.code = {parts[7] for parts in map(str.split, out.splitlines())
                     if len(parts) >= 8 and parts[3] == "FUNC"}

    def name_of(self, address):
        address &= ~1  # the Thumb bit of a return address
        for start, end, name in self.functions:
            if start <= address < end:
                return name
        return hex(address)

    def named_arcs(self, raw_arcs):
        named = {}
        for (from_pc, self_pc), count in raw_arcs.items():
            key = (self.name_of(from_pc), self.name_of(self_pc))
            named[key] = named.get(key, 0) + count
        return named


def build_id(elf):
    out = subprocess.run(["arm-none-eabi-readelf", "-n", str(elf)], check=True,
                         capture_output=True, text=True).stdout
    match = re.search(r"Build ID: ([0-9a-f]+)", out)
    return bytes.fromhex(match.group(1)) if match else b""


def board_of(elf):
    """The board an ELF was built for: the longest board name in `<example>-<board>-<mode>`."""
    return max((b for b in BOARDS if f"-{b}-" in elf.name), key=len)


def built(board, mode, example=None):
    return (mode in BOARD_MODES.get(board, (mode,))
            and board in EXAMPLE_BOARDS.get(example, (board,)))


def check_secure_samples(tag, elf, pcs, gmon):
    symbols = Symbols(elf)
    secure = sum(n for pc, n in pcs.items() if symbols.name_of(pc) == SECURE_MARKER)
    total = sum(pcs.values())
    check(0.3 * total <= secure <= 0.7 * total,
          f"{tag}: {secure} of {total} PC samples in Secure code, sent as {SECURE_MARKER}")
    share = sum(percent for percent, name in gprof_flat(elf, gmon) if name == SECURE_MARKER)
    check(abs(share - 100 * secure / max(total, 1)) < 1,
          f"{tag}: gprof gives {SECURE_MARKER} {share:.1f} % of the time")


def run_qemu(board, elf, capture, must_finish=True):
    capture.unlink(missing_ok=True)
    # -icount: the instruction count drives the virtual clock, so SysTick and the run are
    # deterministic (sleep=off: a WFI jumps to the next timer deadline instead of waiting for
    # real time, which would make blinky's idle end vary from run to run). The program ends
    # with a semihosting exit carrying main's return value.
    cmd = ["qemu-system-arm", "-M", MACHINES.get(board, board), "-display", "none", "-monitor", "none",
           "-serial", f"file:{capture}", "-semihosting-config", "enable=on,target=native",
           "-icount", "shift=5,sleep=off", "-kernel", str(elf)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=QEMU_TIMEOUT_S)
    if must_finish:
        check(result.returncode == 0, f"{elf.name} runs to completion under QEMU "
              f"(exit {result.returncode}{': ' + result.stderr.strip() if result.stderr else ''})")
    data = capture.read_bytes() if capture.exists() else b""
    return data if must_finish else (data, result.returncode)


def convert_with_log(rackprof, capture, elf, gmon, extra=()):
    """The JSON report (None on failure) and what rackprof printed on stderr."""
    cmd = [str(rackprof), "convert", str(capture), "--elf", str(elf), "-o", str(gmon),
           "--report", "json", *extra]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if not check(result.returncode == 0, f"rackprof convert {' '.join(extra)} {capture.name}"):
        print(result.stderr)
        return None, result.stderr
    return json.loads(result.stdout), result.stderr


def convert(rackprof, capture, elf, gmon, extra=()):
    return convert_with_log(rackprof, capture, elf, gmon, extra)[0]


def legacy_pcs(data, addr_bytes=3):
    """PC records in a clean compat capture ('A' from self, 'P' pc), read independently:
    pc -> count (a record cut off at the end is left out)."""
    pcs = collections.Counter()
    i = 0
    while i < len(data):
        if data[i] == ord("P") and i + 1 + addr_bytes <= len(data):
            pcs[int.from_bytes(data[i + 1:i + 1 + addr_bytes], "big")] += 1
        elif data[i] not in b"AP":
            raise ValueError(f"byte {i}: {data[i]:#x} is not a record tag")
        i += 1 + (2 if data[i] == ord("A") else 1) * addr_bytes
    return pcs


def legacy_samples(data, addr_bytes=3):
    return sum(legacy_pcs(data, addr_bytes).values())


def raw_arcs(report):
    return {(int(a["from"], 16), int(a["self"], 16)): a["count"] for a in report["raw"]["arcs"]}


def gprof_flat(elf, gmon):
    """gprof's flat profile: (% time, function) rows, hottest first."""
    out = subprocess.run(["arm-none-eabi-gprof", "-b", "-p", str(elf), str(gmon)], check=True,
                         capture_output=True, text=True).stdout
    rows = [line.split() for line in out.splitlines() if re.match(r"\s*\d+\.\d+\s", line)]
    return [(float(row[0]), row[-1]) for row in rows]


def gprof_hot(elf, gmon):
    rows = gprof_flat(elf, gmon)
    return rows[0][1] if rows else None


def check_lines(rackprof, tag, elf, gmon):
    """rackprof's report by source line equals gprof -l -b's for the capture's gmon.out."""
    ours = subprocess.run([str(rackprof), "convert", str(gmon), "--format", "gmon", "--elf",
                           str(elf), "--lines"], capture_output=True, text=True)
    theirs = subprocess.run(["arm-none-eabi-gprof", "-l", "-b", str(elf), str(gmon)],
                            check=True, capture_output=True, text=True).stdout
    same = ours.returncode == 0 and ours.stdout == theirs
    check(same and "@ " in theirs, f"{tag}: rackprof convert --lines prints what gprof -l -b does"
          + ("" if same else f"\n{ours.stderr}\n--- gprof\n{theirs}\n--- rackprof\n{ours.stdout}"))


def binomial_tail(k, n, p, upper):
    """P(X >= k) (upper) or P(X <= k) for X ~ Binomial(n, p)."""
    if p <= 0:
        return 1.0 if (k == 0 or not upper) else 0.0
    if p >= 1:
        return 1.0 if (k == n or upper) else 0.0
    terms = range(k, n + 1) if upper else range(0, k + 1)
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p)
            + (n - i) * math.log1p(-p) for i in terms]
    top = max(logs)
    return min(1.0, math.exp(top) * sum(math.exp(x - top) for x in logs))


def clopper_pearson(k, n, alpha):
    """The exact (Clopper-Pearson) interval of a share k of n at level 1 - alpha: it holds for
    the few samples a rarely run instruction gets, where normal-based intervals do not."""
    def solve(target):
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            if target(mid):
                hi = mid
            else:
                lo = mid
        return (lo + hi) / 2
    low = 0.0 if k == 0 else solve(lambda p: binomial_tail(k, n, p, True) >= alpha / 2)
    high = 1.0 if k == n else solve(lambda p: binomial_tail(k, n, p, False) <= alpha / 2)
    return low, high


def text_range(elf):
    out = subprocess.run(["arm-none-eabi-readelf", "-S", "-W", str(elf)], check=True,
                         capture_output=True, text=True).stdout
    m = re.search(r"\]\s+\.text\s+PROGBITS\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", out)
    return int(m[1], 16), int(m[2], 16)


def trace_instructions(elf, capture):
    """Runs deterministic once under -icount with one instruction per translation block
    (-singlestep: the sampler's interrupt may land on any instruction), counting QEMU's trace
    of every executed instruction of .text (-d exec,nochain). Address -> executions, or None."""
    low, size = text_range(elf)
    cmd = ["qemu-system-arm", "-M", "mps2-an385", "-display", "none", "-monitor", "none",
           "-serial", f"file:{capture}", "-semihosting-config", "enable=on,target=native",
           "-icount", "shift=5,sleep=off", "-singlestep", "-d", "exec,nochain",
           "-dfilter", f"{low:#x}+{size:#x}", "-D", "/dev/stdout", "-kernel", str(elf)]
    executed = collections.Counter()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as qemu:
        for line in qemu.stdout:  # "Trace 0: 0x7f.. [00000000/00000088/00000000/...] crunch"
            if line.startswith("Trace"):
                executed[int(line.split("[", 1)[1].split("/")[1], 16)] += 1
        status = qemu.wait(timeout=QEMU_TIMEOUT_S)
    return executed if status == 0 else None


def check_truth_by_line(rackprof, fw_dir, work):
    """Line profiles' truth: rackprof annotate's per-instruction and per-line shares of a
    capture hold, within their 99.9 % intervals, QEMU's exact counts of the same run. Compared
    over the example's own code (deterministic.c, lines by binutils' addr2line): the profiler's
    runtime and handlers run where the SysTick sampler cannot see them (a handler's time is
    sampled at the instruction it interrupted), so both sides leave them out."""
    tag = "deterministic/mps2-an385/compat: truth by line"
    elf = fw_dir / "deterministic-mps2-an385-compat.elf"
    capture = work / "truth.bin"
    executed = trace_instructions(elf, capture)
    if not check(executed is not None and sum(executed.values()) > 10**6,
                 f"{tag}: QEMU ran it and traced every instruction"):
        return
    result = subprocess.run([str(rackprof), "annotate", str(capture), "--format", "bin", "--elf",
                             str(elf), "--disasm", "--json"], capture_output=True, text=True)
    if not check(result.returncode == 0, f"{tag}: rackprof annotate"):
        print(result.stderr)
        return
    addresses = sorted(executed)
    where = subprocess.run(["arm-none-eabi-addr2line", "-e", str(elf)] + [hex(a) for a in addresses],
                           check=True, capture_output=True, text=True).stdout.splitlines()
    line_of = {a: w.split(" (discriminator")[0] for a, w in zip(addresses, where)}
    own = {a for a in addresses if line_of[a].rsplit(":", 1)[0].endswith("examples/deterministic.c")}
    sampled = collections.Counter()
    for f in json.loads(result.stdout)["functions"]:
        for i in f["instructions"]:
            sampled[int(i["address"], 16)] += i["samples"]
    n = sum(sampled[a] for a in own)
    total = sum(executed[a] for a in own)
    by_line_exact, by_line_sampled = collections.Counter(), collections.Counter()
    for a in own:
        by_line_exact[line_of[a]] += executed[a]
        by_line_sampled[line_of[a]] += sampled[a]
    outside = []
    for what, exact, got in (("instruction", {hex(a): executed[a] for a in own},
                              {hex(a): sampled[a] for a in own}),
                             ("line", by_line_exact, by_line_sampled)):
        for key, count in exact.items():
            lo, hi = clopper_pearson(got[key], n, 0.001)
            if not lo <= count / total <= hi:
                outside.append(f"{what} {key}: {got[key]} of {n} samples, exact "
                               f"{100 * count / total:.3f} %")
    hot = max(by_line_exact, key=by_line_exact.get)
    print(f"figure: {tag}: {n} samples and {total} executed instructions in deterministic.c; "
          f"{hot}: sampled {100 * by_line_sampled[hot] / max(n, 1):.2f} %, exact "
          f"{100 * by_line_exact[hot] / total:.2f} %")
    check(n >= 100 and len(own) > 20 and not outside,
          f"{tag}: {len(own)} instructions and {len(by_line_exact)} lines within 99.9 % of "
          "QEMU's exact counts" + ("" if not outside else "\n     " + "\n     ".join(outside)))


def check_profile(tag, example, elf, report, gmon, source_dir, samples_sent):
    symbols = Symbols(elf)
    decoder = report["source"]["decoder"]
    check(decoder["bytes_discarded"] == 0, f"{tag}: no byte discarded")
    for counter in ("frames_bad", "frames_lost", "target_dropped", "overflows"):
        if counter in decoder:
            check(decoder[counter] == 0, f"{tag}: {counter} = 0")
    got = symbols.named_arcs(raw_arcs(report))
    want = expected_arcs(example, source_dir)
    check(got == want, f"{tag}: per-arc counts exactly as the program makes them"
          + ("" if got == want else f"\n     got  {sorted(got.items())}\n     want {sorted(want.items())}"))
    raw = report["raw"]
    in_gmon = sum(h["samples"] for h in raw["histograms"]) + raw["samples_outside_histogram"]
    check(in_gmon == samples_sent > 0,
          f"{tag}: every PC sample sent is in gmon.out ({in_gmon} of {samples_sent})")
    if example == "psp":
        # rackprof's profile of psp: the thread's and the handler's shares as gprof sees them.
        time = collections.Counter()
        for percent, name in gprof_flat(elf, gmon):
            time[name] += percent
        thread = sum(time[name] for name in PSP_THREAD)
        check(thread >= 100 * PSP_MIN_SHARE and time["isr_spin"] >= 100 * ISR_MIN_SHARE,
              f"{tag}: gprof: {thread:.1f} % in the PSP thread's functions, "
              f"{time['isr_spin']:.1f} % in isr_spin")
    if HOT[example] is None:
        return
    hot = gprof_hot(elf, gmon)
    check(hot == HOT[example], f"{tag}: gprof's hottest function is {HOT[example]} (got {hot})")


def stack_checks(elf, pcs):
    """Where psp's PC samples (pc -> count, read from the wire by this test) land: (ok, what)
    pairs, and the samples per function. See PSP_THREAD above."""
    symbols = Symbols(elf)
    where = collections.Counter()
    for pc, n in pcs.items():
        where[symbols.name_of(pc)] += n
    total = sum(where.values())
    outside = {name: n for name, n in where.items() if name not in symbols.code}
    never = {name: n for name, n in where.items() if name in NEVER_SAMPLED}
    thread = sum(where[name] for name in PSP_THREAD)
    isr = where["isr_spin"]
    return [
        (total > 0 and not outside,
         f"{total} PC samples, all inside functions" + (f" (not: {outside})" if outside else "")),
        (not never, "none in main, run_on_psp or a handler SysTick cannot preempt"
         + (f" (got {never})" if never else "")),
        (total > 0 and thread >= PSP_MIN_SHARE * total,
         f"{thread} in the PSP thread's functions (>= {PSP_MIN_SHARE:.0%})"),
        (total > 0 and isr >= ISR_MIN_SHARE * total,
         f"{isr} in the MSP handler's isr_spin (>= {ISR_MIN_SHARE:.0%})"),
    ], where


def check_stacks(tag, elf, pcs):
    """psp: each PC sample read from the stack the interrupted code was using."""
    results, where = stack_checks(elf, pcs)
    for ok, what in results:
        check(ok, f"{tag}: {what}")
    thread = sum(where[name] for name in PSP_THREAD)
    handler = sum(where[name] for name in MSP_HANDLER)
    print(f"figure: {tag}: {sum(where.values())} PC samples: {thread} in the PSP thread "
          f"({', '.join(f'{n} {where[n]}' for n in PSP_THREAD)}), {handler} in the MSP "
          f"handler (isr_spin {where['isr_spin']}), "
          f"{sum(where.values()) - thread - handler} in the runtime")


def check_forced_sampler(board, mode, fw_dir, work):
    """psp built with its sampler forced to one stack: the stack check must fail, in the way
    that stack predicts (MSP: no sample in the PSP thread; PSP: none in the MSP handler)."""
    tag = f"psp/{board}/{mode}"
    elf = fw_dir / f"psp-{board}-{mode}.elf"
    data, rc = run_qemu(board, elf, work / f"psp-{board}-{mode}.bin", must_finish=False)
    try:
        pcs = legacy_pcs(data, 4 if board in A4_BOARDS else 3)
    except ValueError:
        pcs = {}
    results, where = stack_checks(elf, pcs)
    failed = [what for ok, what in results if not ok]
    forced = mode.rsplit("-", 1)[1]
    must_fail = results[2] if forced == "msp" else results[3]
    check(not must_fail[0], f"{tag}: the sampler forced to {forced.upper()} fails the stack "
          f"check (exit {rc}; failed: {'; '.join(failed) or 'nothing'})")


def check_framed_wire(tag, example, elf, data, source_dir):
    cap = framed_wire.read(data)
    check(cap.frames_good > 0 and cap.frames_bad == 0 and cap.frames_lost == 0,
          f"{tag}: {cap.frames_good} frames, all good, none lost")
    check(cap.dropped_total == 0, f"{tag}: target dropped nothing")
    symbols = Symbols(elf)
    if check(len(cap.hellos) == 1, f"{tag}: one HELLO"):
        hello = cap.hellos[0]
        want = 4 if board_of(elf) in A4_BOARDS else 3
        check(hello.version == 1 and hello.addr_bytes == want and hello.sample_hz == 1000,
              f"{tag}: HELLO version 1, {want}-byte addresses, 1000 Hz")
        check((hello.text_lo, hello.text_hi) ==
              (symbols.by_name["__text_start"], symbols.by_name["__text_end"]),
              f"{tag}: HELLO text range is the ELF's")
        check(hello.build_id == build_id(elf) and len(hello.build_id) == 20,
              f"{tag}: HELLO build-id is the ELF's ({hello.build_id.hex()})")
        board = board_of(elf)
        check(hello.arch == ARCH_CODES[board],
              f"{tag}: HELLO architecture byte {hello.arch} is {board}'s {ARCH_CODES[board]}")
    check(cap.markers == ["start", "stop"], f"{tag}: START then STOP markers")
    got = symbols.named_arcs(cap.arcs)
    want = expected_arcs(example, source_dir)
    check(got == want, f"{tag}: per-arc counts on the wire exactly as the program makes them"
          + ("" if got == want else f"\n     got  {sorted(got.items())}\n     want {sorted(want.items())}"))
    # A degraded link: whole frames cut out after the HELLO are counted as lost, exactly.
    frames = data.split(b"\x00")[:-1]
    cut = [i for i in range(2, len(frames) - 1, 3)]
    degraded = b"".join(f + b"\x00" for i, f in enumerate(frames) if i not in cut)
    check(framed_wire.read(degraded).frames_lost == len(cut),
          f"{tag}: {len(cut)} frames cut out are counted as {len(cut)} lost")
    return degraded, len(cut), cap.pcs


def check_itm_wire(tag, example, elf, data, source_dir):
    """The ITM-over-UART capture read with the test's own ITM and framed readers; returns the
    ITM reading."""
    try:
        itm = itm_wire.read(data)
    except ValueError as error:
        check(False, f"{tag}: the capture is well-formed ITM ({error})")
        return None
    check(data.startswith(b"\x00" * 5 + b"\x80") and itm.syncs == 1,
          f"{tag}: one sync packet, first")
    check(itm.overflows == 0, f"{tag}: no overflow packet")
    check(set(itm.ports) <= {ITM_FRAMED_PORT, ITM_CONSOLE_PORT},
          f"{tag}: software packets on ports {ITM_FRAMED_PORT} and {ITM_CONSOLE_PORT} only "
          f"({sorted(itm.ports)})")
    # 32-bit stimulus writes where the bytes are there: shorter packets only end a burst.
    payload = sum(size * n for size, n in itm.software_packets.items())
    check(4 * itm.software_packets.get(4, 0) * 10 >= payload * 8,
          f"{tag}: >= 80% of software bytes in 4-byte packets ({itm.software_packets})")
    cap = framed_wire.read(bytes(itm.ports.get(ITM_FRAMED_PORT, b"")))
    check(cap.frames_good > 0 and cap.frames_bad == 0 and cap.frames_lost == 0,
          f"{tag}: port {ITM_FRAMED_PORT}: {cap.frames_good} frames, all good, none lost")
    check(cap.dropped_total == 0, f"{tag}: target dropped nothing")
    check(len(cap.hellos) == 1 and cap.hellos[0].build_id == build_id(elf),
          f"{tag}: one HELLO with the ELF's build-id")
    check(cap.markers == ["start", "stop"], f"{tag}: START then STOP markers")
    check(not cap.pcs, f"{tag}: no PC item in the frames (PC samples are DWT packets)")
    got = Symbols(elf).named_arcs(cap.arcs)
    want = expected_arcs(example, source_dir)
    check(got == want, f"{tag}: per-arc counts on port {ITM_FRAMED_PORT} exactly as the "
          "program makes them" + ("" if got == want else f"\n     got  {sorted(got.items())}"
                                  f"\n     want {sorted(want.items())}"))
    symbols = Symbols(elf)
    text_lo, text_hi = symbols.by_name["__text_start"], symbols.by_name["__text_end"]
    samples = sum(itm.pcs.values())
    check(samples > 0 and all(text_lo <= pc < text_hi for pc in itm.pcs),
          f"{tag}: {samples} DWT PC sample packets, all in the code")
    source = source_dir / "target-fw" / "examples" / f"{example}.c"
    sleeps = define(source, "IDLE_SLEEPS") if example == "blinky" else 0
    check(itm.sleep_samples == sleeps,
          f"{tag}: {itm.sleep_samples} sleep sample packets, one per WFI ({sleeps})")
    console = bytes(itm.ports.get(ITM_CONSOLE_PORT, b"")).decode(errors="replace")
    want_console = CONSOLE[example] + "\n" if CONSOLE[example] else ""
    check(console == want_console, f"{tag}: port {ITM_CONSOLE_PORT} carries the console text "
          f"{want_console!r} (got {console!r})")
    return itm


def check_itm_convert(rackprof, tag, example, elf, capture, gmon, source_dir, itm):
    """The same capture through `rackprof convert --protocol itm`."""
    report, log = convert_with_log(
        rackprof, capture, elf, gmon,
        ("--protocol", "itm", "--framed-port", str(ITM_FRAMED_PORT),
         "--console-port", str(ITM_CONSOLE_PORT)))
    if not report:
        return
    check_profile(tag, example, elf, report, gmon, source_dir, sum(itm.pcs.values()))
    decoder = report["source"]["decoder"]
    if "sleep_samples" in decoder:
        check(decoder["sleep_samples"] == itm.sleep_samples,
              f"{tag}: sleep_samples = {itm.sleep_samples} (got {decoder['sleep_samples']})")
    if not CONSOLE[example]:
        return
    if "console: " not in log:
        print(f"SKIP: {tag}: rackprof convert prints no `console: ` lines yet")
        return
    line = f"console: {CONSOLE[example]}"
    check(line in log.splitlines(), f"{tag}: rackprof prints {line!r}")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def check_daemon(rackprof, board, mode, elf, work, source_dir):
    """QEMU's UART as a TCP server that waits for its client, the daemon as that client (a
    ser2net-style link): the firmware starts only once the daemon is connected."""
    tag = f"deterministic/{board}/{mode}/daemon"
    legacy_bytes = 4 if board in A4_BOARDS else 3
    wire = {"compat": f'protocol = "legacy"\naddr_bytes = {legacy_bytes}',
            "framed": 'protocol = "framed"',
            "itm-uart": f'protocol = "itm"\nframed_port = {ITM_FRAMED_PORT}\n'
                        f'console_port = {ITM_CONSOLE_PORT}'}[mode]

    port = free_port()
    qemu = subprocess.Popen(
        ["qemu-system-arm", "-M", MACHINES.get(board, board), "-display", "none", "-monitor", "none",
         "-serial", f"tcp:127.0.0.1:{port},server=on,wait=on", "-semihosting-config",
         "enable=on,target=native", "-icount", "shift=5,sleep=off", "-kernel", str(elf)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    db = work / f"{board}-{mode}.db"
    config = work / f"{board}-{mode}.toml"
    config.write_text(f"""[server]
listen = "127.0.0.1:0"
[storage]
path = "{db}"
[links]
reconnect_min_ms = 50
[[boards]]
name = "qemu-{board}"
link = "tcp://127.0.0.1:{port}"
{wire}
format = "bin"
elf = "{elf}"
autostart = true
""")
    log = (work / f"{board}-{mode}-serve.log").open("w")
    serve = subprocess.Popen([str(rackprof), "serve", "--config", str(config)],
                             stdout=log, stderr=subprocess.STDOUT)
    try:
        qemu_rc = qemu.wait(timeout=QEMU_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        qemu.kill()
        qemu_rc = None
    # QEMU has exited, but the daemon may not have read the last bytes yet (on a loaded host it
    # may not even have started the session): it has read everything once it saw the link close.
    serve_log = work / f"{board}-{mode}-serve.log"
    deadline = time.monotonic() + 30
    while qemu_rc is not None and time.monotonic() < deadline:
        if "disconnected:" in serve_log.read_text(errors="replace"):
            break
        time.sleep(0.05)
    serve.send_signal(signal.SIGTERM)  # everything received is committed before it exits
    try:
        serve_rc = serve.wait(timeout=60)
    except subprocess.TimeoutExpired:
        serve.kill()
        serve_rc = None
    check(qemu_rc == 0, f"{tag}: the firmware ran to completion with the daemon attached")
    if not check(serve_rc == 0, f"{tag}: rackprof serve exits 0 on SIGTERM (exit {serve_rc})"):
        print((work / f"{board}-{mode}-serve.log").read_text()[-2000:])
        return
    gmon = work / f"{board}-{mode}-daemon.gmon.out"
    result = subprocess.run([str(rackprof), "convert", "--db", str(db), "--session", "1",
                             "--elf", str(elf), "-o", str(gmon), "--report", "json"],
                            capture_output=True, text=True)
    if not check(result.returncode == 0, f"{tag}: rackprof convert --db --session 1"):
        print(result.stderr)
        return
    report = json.loads(result.stdout)
    decoder = report["source"]["decoder"]
    check(decoder["bytes_discarded"] == 0, f"{tag}: no byte discarded")
    for counter in ("frames_bad", "frames_lost", "target_dropped", "overflows"):
        if counter in decoder:
            check(decoder[counter] == 0, f"{tag}: {counter} = 0")
    got = Symbols(elf).named_arcs(raw_arcs(report))
    want = expected_arcs("deterministic", source_dir)
    check(got == want, f"{tag}: the stored session's per-arc counts exactly as the program "
          "makes them" + ("" if got == want else f"\n     got  {sorted(got.items())}"))
    hot = gprof_hot(elf, gmon)
    check(hot == HOT["deterministic"], f"{tag}: gprof's hottest function is crunch (got {hot})")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rackprof", required=True, type=pathlib.Path)
    parser.add_argument("--fw-dir", required=True, type=pathlib.Path)
    parser.add_argument("--source-dir", required=True, type=pathlib.Path)
    parser.add_argument("--board", action="append", choices=BOARDS,
                        help="run this board's checks only (repeatable; default: every board)")
    args = parser.parse_args()
    boards = args.board or BOARDS

    for tool in ("qemu-system-arm", "arm-none-eabi-gprof", "arm-none-eabi-nm"):
        if not shutil.which(tool):
            skip(f"{tool} is not installed (./setup.sh installs it)")
    if not list(args.fw_dir.glob("*.elf")):
        skip(f"no firmware in {args.fw_dir} (arm-none-eabi-gcc absent when configured?)")
    help_text = subprocess.run([str(args.rackprof), "convert", "--help"], capture_output=True,
                               text=True)
    has_framed = "framed" in help_text.stdout + help_text.stderr
    has_itm = re.search(r"\bitm\b", help_text.stdout + help_text.stderr) is not None

    with tempfile.TemporaryDirectory(prefix="rackprof-qemu-") as tmp:
        work = pathlib.Path(tmp)
        for board in boards:
            for example in CALLS:
                for mode in ("compat", "compat-blocking", "compat-a4", "framed"):
                    if not built(board, mode, example):
                        continue
                    tag = f"{example}/{board}/{mode}"
                    elf = args.fw_dir / f"{example}-{board}-{mode}.elf"
                    capture = work / f"{example}-{board}-{mode}.bin"
                    data = run_qemu(board, elf, capture)
                    gmon = work / f"{example}-{board}-{mode}.gmon.out"
                    if mode.startswith("compat"):
                        addr_bytes = 4 if mode == "compat-a4" or board in A4_BOARDS else 3
                        if example == "psp":
                            check_stacks(tag, elf, legacy_pcs(data, addr_bytes))
                        report = convert(args.rackprof, capture, elf, gmon,
                                         ("--format", "bin", "--addr-bytes", str(addr_bytes)))
                        if report:
                            check_profile(tag, example, elf, report, gmon, args.source_dir,
                                          legacy_samples(data, addr_bytes))
                        if example == "secure_call":
                            check_secure_samples(tag, elf, legacy_pcs(data, addr_bytes), gmon)
                            if mode == "compat":
                                check_lines(args.rackprof, tag, elf, gmon)
                        continue
                    degraded, cut, pcs = check_framed_wire(tag, example, elf, data, args.source_dir)
                    samples = sum(pcs.values())
                    if example == "psp":
                        check_stacks(tag, elf, pcs)
                    if not has_framed:
                        print(f"SKIP: {tag} through rackprof: `rackprof convert --protocol "
                              "framed` does not exist yet")
                        continue
                    report = convert(args.rackprof, capture, elf, gmon, ("--protocol", "framed"))
                    if report:
                        check_profile(tag, example, elf, report, gmon, args.source_dir, samples)
                    if example == "secure_call":
                        check_secure_samples(tag, elf, pcs, gmon)
                    lossy = work / f"{example}-{board}-lossy.bin"
                    lossy.write_bytes(degraded)
                    report = convert(args.rackprof, lossy, elf, gmon, ("--protocol", "framed"))
                    if report:
                        lost = report["source"]["decoder"].get("frames_lost")
                        check(lost == cut, f"{tag}: rackprof counts {cut} cut frames as lost "
                              f"(got {lost})")

            for mode in FORCED_SAMPLER_MODES:
                if not built(board, mode):
                    continue
                check_forced_sampler(board, mode, args.fw_dir, work)

            for mode in ("compat", "framed"):
                if mode == "framed" and not has_framed:
                    print(f"SKIP: deterministic/{board}/framed/daemon: rackprof has no framed "
                          "protocol yet")
                    continue
                check_daemon(args.rackprof, board, mode,
                             args.fw_dir / f"deterministic-{board}-{mode}.elf", work,
                             args.source_dir)

            modes = ("compat", "framed") + (("itm-uart",) if board in ITM_BOARDS else ())
            sizes = {mode: len(run_qemu(board, args.fw_dir / f"blinky-{board}-{mode}.elf",
                                        work / f"blinky-{board}-{mode}.bin"))
                     for mode in modes}
            ratio = sizes["compat"] / max(sizes["framed"], 1)
            print(f"figure: blinky/{board}: compat {sizes['compat']} B, framed {sizes['framed']} B"
                  f" for the same run: {ratio:.1f}x fewer bytes")
            if "itm-uart" in sizes:
                print(f"figure: blinky/{board}: itm-uart {sizes['itm-uart']} B (framed records"
                      " in ITM packets plus a 5-byte DWT packet per PC sample)")
            check(ratio >= 5, f"blinky/{board}: framed sends >= 5x fewer bytes than compat")

        if "mps2-an385" in boards:
            check_truth_by_line(args.rackprof, args.fw_dir, work)

        # ITM over the UART: the bytes SWO carries in NRZ mode (QEMU has no ITM/DWT model).
        for board in (b for b in ITM_BOARDS if b in boards):
            for example in CALLS:
                if not built(board, "itm-uart", example):
                    continue
                tag = f"{example}/{board}/itm-uart"
                elf = args.fw_dir / f"{example}-{board}-itm-uart.elf"
                capture = work / f"{example}-{board}-itm-uart.bin"
                itm = check_itm_wire(tag, example, elf, run_qemu(board, elf, capture),
                                     args.source_dir)
                if itm is None:
                    continue
                if example == "psp":
                    check_stacks(tag, elf, itm.pcs)
                if not has_itm:
                    print(f"SKIP: {tag} through rackprof: `rackprof convert --protocol itm` "
                          "does not exist yet")
                    continue
                check_itm_convert(args.rackprof, tag, example, elf, capture,
                                  work / f"{example}-{board}-itm-uart.gmon.out",
                                  args.source_dir, itm)
            # Live: QEMU's UART as the SWO link of a board with protocol = "itm".
            if has_itm:
                check_daemon(args.rackprof, board, "itm-uart",
                             args.fw_dir / f"deterministic-{board}-itm-uart.elf", work,
                             args.source_dir)
            else:
                print(f"SKIP: deterministic/{board}/itm-uart/daemon: rackprof has no itm "
                      "protocol yet")

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
