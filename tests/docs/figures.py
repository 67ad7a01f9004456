#!/usr/bin/env python3
"""The reliability figures: written by the suite into docs/reliability.md, never by hand.

A test states a figure by printing one line on stdout:  FIGURE <key> = <value>
(the key in the source as a literal; a key ending in '.' is a prefix the test completes, say
`kill_loop.loss_window_ms.` + the wire). tests/run.sh keeps ctest's JUnit files (each test's
output) and the fuzzers' logs, then

  figures.py write --doc docs/reliability.md --junit build/ctest.xml=gcc-O2 \\
                   --junit build-asan/ctest.xml=clang-ASan+UBSan --fuzz-logs build-asan/fuzz-logs

replaces the block between the doc's `<!-- figures -->` and `<!-- /figures -->` with the
figures of that run, its date and commit; a figure its test did not print (a SKIP) says so.

  figures.py check [REPO_ROOT]     the committed block: dated, at a commit, and its keys are
                                   exactly the ones the tests print (none invented, none missing)
  figures.py --self-test           the checker fails on a planted fault
Exit 0 when everything holds, 1 otherwise.
"""

import datetime
import glob
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree

LINE_RE = re.compile(r"^FIGURE ([a-z0-9_.]+) = (.+?)\s*$", re.M)
SOURCE_RE = re.compile(r"FIGURE ([a-z0-9_.]+)(?: = |\")")
ROW_RE = re.compile(r"^\| `([a-z0-9_.]+)` \|", re.M)
HEADER_RE = re.compile(r"^Measured (\d{4}-\d\d-\d\d \d\d:\d\d) UTC at commit `([0-9a-f]{7,40})(-dirty)?`",
                       re.M)
BEGIN, END = "<!-- figures -->", "<!-- /figures -->"
SOURCE_DIRS = ("tests", "gmon", "storage", "daemon", "web", "protocol", "campaign")
SOURCE_SUFFIXES = (".cc", ".h", ".mjs", ".py", ".sh")


# Figures this script reads itself (the fuzzers' logs), not a test's output.
WRITER_KEYS = {"fuzzing.inputs"}


def source_keys(root):
    """Every key a test prints (prefixes end in '.'), read from the sources."""
    keys = set(WRITER_KEYS)
    for top in SOURCE_DIRS:
        for path, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [d for d in dirs if d != "node_modules" and not d.startswith(".")
                       and not os.path.exists(os.path.join(path, d, "CMakeCache.txt"))]
            for name in files:
                if not name.endswith(SOURCE_SUFFIXES) or name == "figures.py":
                    continue
                with open(os.path.join(path, name), encoding="utf-8", errors="replace") as f:
                    keys.update(SOURCE_RE.findall(f.read()))
    return keys


def matches(key, source_key):
    return key.startswith(source_key) if source_key.endswith(".") else key == source_key


def executed_units(log):
    """libFuzzer's final count of inputs run, from -print_final_stats=1; None if the log has none."""
    with open(log, errors="replace") as f:
        found = re.findall(r"stat::number_of_executed_units:\s*(\d+)", f.read())
    return int(found[-1]) if found else None


def measured(junit_files, fuzz_logs):
    """{key: (value, build)} from the JUnit files' outputs and the fuzzers' logs."""
    out = {}
    for spec in junit_files:
        path, _, build = spec.partition("=")
        if not os.path.exists(path):
            continue
        for case in ElementTree.parse(path).getroot().iter("testcase"):
            text = "".join(e.text or "" for e in case.iter("system-out"))
            for key, value in LINE_RE.findall(text):
                out[key] = (value, build or "-")
    if fuzz_logs and os.path.isdir(fuzz_logs):
        units, targets = 0, 0
        # tests/fuzz/run.sh keeps <target>.log beside <target>/, the directory libFuzzer runs
        # in (its workers' fuzz-N.log when -jobs > 1): a target's count is the sum over its logs.
        for name in sorted(os.listdir(fuzz_logs)):
            if not name.endswith(".log") or os.path.isdir(os.path.join(fuzz_logs, name)):
                continue
            workers = glob.glob(os.path.join(fuzz_logs, name[:-4], "*.log"))
            counted = [c for c in map(executed_units, [os.path.join(fuzz_logs, name)] + workers)
                       if c is not None]
            if counted:
                units += sum(counted)
                targets += 1
        if targets:
            out["fuzzing.inputs"] = (f"{units:,} inputs over {targets} targets".replace(",", " "),
                                     "clang-ASan+UBSan+libFuzzer")
    return out


def commit(root):
    def git(*args):
        return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True).stdout.strip()
    sha = git("rev-parse", "--short", "HEAD") or "0000000"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return sha + ("-dirty" if dirty else "")


def block(root, figures, now):
    lines = [BEGIN,
             f"Measured {now:%Y-%m-%d %H:%M} UTC at commit `{commit(root)}` on {os.cpu_count()} "
             f"cores; written by `tests/docs/figures.py` from the tests' output, not by hand.",
             "",
             "| figure | value | build |",
             "|---|---|---|"]
    keys = set(figures)
    for source_key in source_keys(root):
        if not any(matches(k, source_key) for k in figures):
            keys.add(source_key.rstrip(".") + ("." if source_key.endswith(".") else ""))
    for key in sorted(keys):
        value, build = figures.get(key, ("not measured in this run (its test skipped)", "-"))
        lines.append(f"| `{key}` | {value.replace('|', '/')} | {build} |")
    lines.append(END)
    return "\n".join(lines)


def write(args):
    doc = args[args.index("--doc") + 1]
    junit = [args[i + 1] for i, a in enumerate(args) if a == "--junit"]
    fuzz = args[args.index("--fuzz-logs") + 1] if "--fuzz-logs" in args else None
    root = os.path.dirname(os.path.dirname(os.path.abspath(doc)))
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        print(f"{doc}: no {BEGIN} … {END} block", file=sys.stderr)
        return 1
    now = datetime.datetime.now(datetime.timezone.utc)
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    written = head + block(root, measured(junit, fuzz), now) + tail  # git status before the write
    with open(doc, "w", encoding="utf-8") as f:
        f.write(written)
    print(f"figures: {doc} written")
    return 0


def problems(root):
    path = os.path.join(root, "docs", "reliability.md")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        return [f"{path}: no {BEGIN} … {END} block"]
    inside = text.split(BEGIN, 1)[1].split(END, 1)[0]
    found = []
    if not HEADER_RE.search(inside):
        found.append(f"{path}: the figures carry no 'Measured <date> UTC at commit `<sha>`' line")
    keys = ROW_RE.findall(inside)
    wanted = source_keys(root)
    for key in keys:
        if not any(matches(key, s) for s in wanted):
            found.append(f"{path}: figure `{key}` is printed by no test (FIGURE {key} = …)")
    for source_key in wanted:
        if not any(matches(k, source_key) or k == source_key for k in keys):
            found.append(f"{path}: no figure `{source_key}` (a test prints it: run tests/run.sh)")
    return found


def self_test():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs"))
        os.makedirs(os.path.join(root, "tests"))
        with open(os.path.join(root, "tests", "a_test.cc"), "w") as f:
            f.write('std::cout << "FIGURE a.b = " << 3;\nstd::cout << "FIGURE w." << wire;\n')
        good = (f"x\n{BEGIN}\nMeasured 2026-01-01 10:00 UTC at commit `abcdef1` by …\n\n"
                f"| figure | value | build |\n|---|---|---|\n| `a.b` | 3 | gcc |\n"
                f"| `w.hex` | 1 | gcc |\n| `fuzzing.inputs` | 9 | clang |\n{END}\n")
        faults = {
            "undated": good.replace("Measured 2026-01-01 10:00 UTC", "Measured recently"),
            "invented": good.replace("| `a.b` |", "| `a.c` |"),
            "missing": good.replace("| `w.hex` | 1 | gcc |\n", ""),
            "no block": "x\n",
        }
        with open(os.path.join(root, "docs", "reliability.md"), "w") as f:
            f.write(good)
        if problems(root):
            print("self-test: a sound block was refused:", problems(root))
            return 1
        for name, text in faults.items():
            with open(os.path.join(root, "docs", "reliability.md"), "w") as f:
                f.write(text)
            if not problems(root):
                print(f"self-test: the planted fault '{name}' was not found")
                return 1
    with tempfile.TemporaryDirectory() as logs:  # the layout tests/fuzz/run.sh leaves
        for target, units in (("api", 5), ("gmon", 7)):
            os.makedirs(os.path.join(logs, target))
            with open(os.path.join(logs, target + ".log"), "w") as f:
                f.write(f"stat::number_of_executed_units: {units}\n")
        with open(os.path.join(logs, "gmon", "fuzz-0.log"), "w") as f:
            f.write("stat::number_of_executed_units: 11\n")
        got = measured([], logs).get("fuzzing.inputs", ("",))[0]
        if got != "23 inputs over 2 targets":
            print(f"self-test: the fuzzers' logs read as '{got}', not '23 inputs over 2 targets'")
            return 1
    print("self-test: every planted fault found")
    return 0


def main(argv):
    if argv[1:2] == ["--self-test"]:
        return self_test()
    if argv[1:2] == ["write"]:
        return write(argv[2:])
    if argv[1:2] == ["check"]:
        root = argv[2] if len(argv) > 2 else os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))
        found = problems(root)
        for p in found:
            print(p)
        return 1 if found else 0
    print(__doc__)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
