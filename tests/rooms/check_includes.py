#!/usr/bin/env python3
"""Checks every `#include "room/..."` against the rooms' allow-lists, and that namespace = folder.

A room is a folder whose README.md has a line `Depends on: a, b/c` (or `Depends on: nothing`):
the rooms its C/C++ files may include, listed directly (nothing is implied transitively).
A file belongs to the innermost room holding it; a sub-room is a room of its own. An include
names a room when its path starts with that room's path (the longest such room wins); it is
allowed if that is the file's own room or one its README lists. The Depends-on lines must form
no cycle, so no room reaches a room above it. Folders without a Depends-on line (tests/) are
not checked.

Namespace = folder: a room's C++ code lives in `rackprof::` + its path with `/` as `::` (say
`rackprof::daemon::capture` for daemon/capture), or in a namespace inside that one (`::detail`).
Another room's namespace may be opened only to declare its classes ahead (`class Foo;`).

Usage: check_includes.py [REPO_ROOT]     (default: the repository holding this file)
       check_includes.py --self-test
Exit 0 when everything holds, 1 on any violation.
"""

import os
import re
import sys
import tempfile

DEPENDS_RE = re.compile(r"^Depends on:\s*(.*?)\s*$")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
NAMESPACE_RE = re.compile(r"^namespace\s+(rackprof(?:::\w+)*)\s*\{(.*)$")
FORWARD_RE = re.compile(r"^\s*(?:(?:class|struct|union|enum(?:\s+class)?)\s+\w+(?:\s*:\s*[\w:]+)?\s*;"
                        r"|//.*|)\s*$")
SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".inl", ".ipp")


def skipped_dir(path, name):
    """Hidden folders, npm's packages and build trees hold no rooms."""
    return (name.startswith(".") or name == "node_modules"
            or os.path.exists(os.path.join(path, name, "CMakeCache.txt")))


def find_rooms(root):
    """Maps each room's path (relative, '/'-separated) to its README's Depends-on list."""
    rooms, problems = {}, []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not skipped_dir(dirpath, d))
        if "README.md" not in filenames:
            continue
        readme = os.path.join(dirpath, "README.md")
        with open(readme, encoding="utf-8") as f:
            lines = [DEPENDS_RE.match(line) for line in f]
        found = [m.group(1) for m in lines if m]
        if not found:
            continue
        room = os.path.relpath(dirpath, root).replace(os.sep, "/")
        if room == ".":
            problems.append(f"{readme}: the repository's top is not a room")
            continue
        if len(found) > 1:
            problems.append(f"{readme}: more than one 'Depends on:' line")
        text = found[0].rstrip(".")
        deps = [] if text == "nothing" else [d.strip().rstrip("/") for d in text.split(",")]
        if any(not d for d in deps):
            problems.append(f"{readme}: empty name in 'Depends on: {found[0]}'")
        rooms[room] = [d for d in deps if d]
    for room, deps in rooms.items():
        for dep in deps:
            if dep not in rooms:
                problems.append(f"{room}/README.md: depends on '{dep}', which is not a room")
            elif dep == room:
                problems.append(f"{room}/README.md: lists itself")
    return rooms, problems


def find_cycles(rooms):
    """Every cycle of the Depends-on graph, each once, as a list of rooms (first repeated)."""
    cycles, seen_sets = [], set()
    state = {}  # room -> 1 while on the path, 2 when done

    def visit(room, path):
        state[room] = 1
        path.append(room)
        for dep in rooms.get(room, []):
            if dep not in rooms:
                continue
            if state.get(dep) == 1:
                cycle = path[path.index(dep):] + [dep]
                key = frozenset(cycle)
                if key not in seen_sets:
                    seen_sets.add(key)
                    cycles.append(cycle)
            elif dep not in state:
                visit(dep, path)
        path.pop()
        state[room] = 2

    for room in sorted(rooms):
        if room not in state:
            visit(room, [])
    return cycles


def room_of(path, rooms):
    """The innermost room whose folder holds `path` ('/'-separated, relative), or None."""
    parts = path.split("/")
    for n in range(len(parts) - 1, 0, -1):
        prefix = "/".join(parts[:n])
        if prefix in rooms:
            return prefix
    return None


def room_files(root, room, rooms):
    """The room's C/C++ files, sub-rooms left out."""
    top = os.path.join(root, room)
    for dirpath, dirnames, filenames in os.walk(top):
        rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
        dirnames[:] = sorted(d for d in dirnames
                             if not skipped_dir(dirpath, d) and f"{rel}/{d}" not in rooms)
        for name in sorted(filenames):
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.join(dirpath, name)


def namespace_problems(rel, lines, room):
    """The lines of one file of `room` that open a namespace other than the room's own, except
    to declare another room's classes ahead."""
    own = "rackprof::" + room.replace("/", "::")
    problems = []
    for number, line in enumerate(lines, 1):
        m = NAMESPACE_RE.match(line)
        if not m or m.group(1) == own or m.group(1).startswith(own + "::"):
            continue
        rest = m.group(2).strip()
        if rest.endswith("}"):
            body = [rest[:-1]]
        else:
            body = []
            for inner in lines[number:]:
                if inner.startswith("}"):
                    break
                body.append(inner)
        if not all(FORWARD_RE.match(b) for b in body):
            problems.append(f"{rel}:{number}: namespace {m.group(1)} in room {room}"
                            f" (its code belongs in {own})")
    return problems


def check(root):
    """Returns (messages, ok, summary)."""
    rooms, problems = find_rooms(root)
    if not rooms:
        return [f"{root}: no rooms (no README.md with a 'Depends on:' line)"], False, ""
    messages = list(problems)
    for cycle in find_cycles(rooms):
        messages.append("cycle in the rooms' Depends on: " + " -> ".join(cycle))
    includes = 0
    for room in sorted(rooms):
        allowed = set(rooms[room]) | {room}
        for path in room_files(root, room, rooms):
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
            if path.endswith((".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".ipp")):
                messages += namespace_problems(rel, lines, room)
            for number, line in enumerate(lines, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                target = room_of(m.group(1), rooms)
                if target is None:
                    continue  # a file of this folder, or of something not a room
                includes += 1
                if target not in allowed:
                    messages.append(f"{rel}:{number}: room {room} includes room {target}"
                                    f" (not in {room}'s Depends on)")
    summary = f"{includes} includes and the namespaces of {len(rooms)} rooms checked"
    return messages, not messages, summary


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as f:
        f.write(text)


def self_test():
    """A tree of three rooms: `high` over `low`, and `low/inner` inside `low` but a room of its
    own; it passes clean, fails with an upward include, and fails with a cycle."""
    failures = []

    def expect(label, root, ok, needle=None):
        messages, passed, summary = check(root)
        text = "\n".join(messages)
        if passed != ok or (needle is not None and needle not in text):
            failures.append(f"{label}: expected {'pass' if ok else 'failure'}"
                            + (f" mentioning {needle!r}" if needle else "")
                            + f", got {'pass' if passed else 'failure'}: {text or summary}")
        else:
            print(f"self-test {label}: {'passes' if ok else 'fails'} as it should"
                  + (f" ({summary})" if ok else f": {messages[0]}"))

    with tempfile.TemporaryDirectory() as root:
        write(root, "low/README.md", "# low/\n\nDepends on: low/inner\n")
        write(root, "low/inner/README.md", "# low/inner/\n\nDepends on: nothing\n")
        write(root, "high/README.md", "# high/\n\nDepends on: low\n")
        write(root, "notes/README.md", "# notes/\n\nNo rule here.\n")
        write(root, "low/inner/x.h", '#pragma once\n#include <vector>\n'
              'namespace rackprof::low::inner {\nstruct X {};\n}  // namespace rackprof::low::inner\n')
        write(root, "low/a.h", '#pragma once\n#include "low/inner/x.h"\n#include "local.h"\n'
              'namespace rackprof::high {\nclass B;\n}  // namespace rackprof::high\n'
              'namespace rackprof::low::detail {\nint f();\n}  // namespace rackprof::low::detail\n')
        write(root, "low/a.cc", '#include "low/a.h"\n')
        write(root, "high/b.h", '#pragma once\n#include "low/a.h"\n')
        write(root, "notes/anything.cc", '#include "high/b.h"\n')
        expect("clean tree", root, True)

        def planted(label, path, text, needle):
            """A file planted in the clean tree fails the check, and the tree is clean without it."""
            write(root, path, text)
            expect(label, root, False, needle)
            os.remove(os.path.join(root, path))

        planted("a room skipping its dependency's dependency", "high/c.cc",
                '#include "high/b.h"\n#include "low/inner/x.h"\n',
                "high/c.cc:2: room high includes room low/inner (not in high's Depends on)")
        planted("upward include", "low/a_test.cc", '#include "low/a.h"\n\n#include "high/b.h"\n',
                "low/a_test.cc:3: room low includes room high (not in low's Depends on)")
        planted("code in another room's namespace", "high/d.cc",
                'namespace rackprof::low {\nint helper() { return 1; }\n}\n',
                "high/d.cc:1: namespace rackprof::low in room high"
                " (its code belongs in rackprof::high)")
        expect("clean again", root, True)

        write(root, "low/inner/README.md", "# low/inner/\n\nDepends on: high\n")
        expect("cycle", root, False, "cycle in the rooms' Depends on: ")
        write(root, "low/inner/README.md", "# low/inner/\n\nDepends on: nothing\n")

        write(root, "high/README.md", "# high/\n\nDepends on: low, nowhere\n")
        expect("unknown room", root, False, "depends on 'nowhere', which is not a room")

    for failure in failures:
        print("self-test FAILED: " + failure)
    return 0 if not failures else 1


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__.strip())
        return 2 if len(argv) > 2 else 0
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    root = argv[1] if len(argv) == 2 else os.path.join(os.path.dirname(__file__), "..", "..")
    root = os.path.abspath(root)
    messages, ok, summary = check(root)
    for message in messages:
        print(message)
    if not ok:
        return 1
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
