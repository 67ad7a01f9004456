#!/usr/bin/env python3
"""Check that every relative link in the tree's Markdown files resolves.

Usage: check_links.py [REPO_ROOT]     (default: two folders above this script)
       check_links.py --self-test     (the checker must fail on a broken link)

Scans every *.md outside .git, node_modules and the top-level build*/ folders. A link is
`[text](target)`, `![alt](target)` or a reference definition `[label]: target`; links inside
fenced code blocks and code spans are not links and are skipped, as GitHub renders them. A
target with a URI scheme (http:, https:, mailto:, ...) is not checked. A relative path must name
a file or folder inside REPO_ROOT (a leading / means REPO_ROOT, as on GitHub); `#anchor` on a
Markdown file, or alone for the same file, must match one of its headings by GitHub's slug rule.

Prints "N links checked in M files" and exits 0, or prints each broken link as
`file:line: target` and exits 1.
"""

import os
import re
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path
from urllib.parse import unquote

SKIP_DIRS = {".git", "node_modules"}
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+(.*?))?[ \t]*#*[ \t]*$")
HTML_ANCHOR = re.compile(r"""<a\s[^>]*\b(?:name|id)\s*=\s*["']([^"']+)["']""", re.I)
REFERENCE_DEF = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*(<[^>]*>|\S+)")
# Link text may hold one level of brackets: [`config/`](config/README.md), [a [b] c](x).
LINK_START = re.compile(r"!?\[(?:[^\[\]\\]|\\.|\[[^\[\]]*\])*\]\(")


def markdown_files(root):
    """Every *.md under root but in .git, node_modules and top-level build*/ folders."""
    for folder, dirs, files in os.walk(root):
        top = Path(folder) == root
        dirs[:] = sorted(d for d in dirs
                         if d not in SKIP_DIRS and not (top and d.startswith("build")))
        for name in sorted(files):
            if name.endswith(".md"):
                yield Path(folder) / name


def prose_lines(text, keep_code_spans=False):
    """(line number, line) outside fenced code blocks, with code spans blanked out.

    Code spans become spaces rather than vanish so columns stay put; what remains is what
    GitHub renders as prose, the only place a link can be. Headings keep their code spans
    (keep_code_spans): their text is part of the anchor."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if fence:
            # Only a fence of the same character, at least as long, with nothing after, closes.
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) \
                    and not line.strip().lstrip(fence[0]).strip():
                fence = None
            continue
        if match:
            fence = match.group(1)
            continue
        yield number, line if keep_code_spans else blank_code_spans(line)


def blank_code_spans(line):
    out, i = [], 0
    while i < len(line):
        if line[i] == "`":
            run = len(line[i:]) - len(line[i:].lstrip("`"))
            end = line.find("`" * run, i + run)
            # A closing run must be exactly as long; a longer one does not close.
            while end != -1 and line[end + run:end + run + 1] == "`":
                end = line.find("`" * run, end + run + 1)
            if end == -1:
                out.append(line[i:i + run])
                i += run
                continue
            out.append(" " * (end + run - i))
            i = end + run
        else:
            out.append(line[i])
            i += 1
    return "".join(out)


def link_targets(line):
    """Targets of the inline links and images on one line (prose only)."""
    for match in LINK_START.finditer(line):
        rest = line[match.end():].lstrip()
        if rest.startswith("<"):
            end = rest.find(">")
            if end != -1:
                yield rest[1:end]
            continue
        depth, target = 0, []
        for ch in rest:
            if ch == "(":
                depth += 1
            elif ch == ")":
                if depth == 0:
                    break
                depth -= 1
            elif ch in " \t" and depth == 0:
                break  # a title follows: [text](path "title")
            target.append(ch)
        if target:
            yield "".join(target)
    definition = REFERENCE_DEF.match(line)
    if definition and not definition.group(1).startswith("^"):
        yield definition.group(2).strip("<>")


def heading_text(raw):
    """A heading as GitHub renders its text: links reduced to their text, markup dropped."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("`", "").replace("*", "").replace("\\", "")


def slug(text):
    """GitHub's heading anchor: lowercase, punctuation but - and _ dropped, spaces to -."""
    text = heading_text(text).strip().lower()
    kept = []
    for ch in text:
        category = unicodedata.category(ch)
        if ch in "-_" or category[0] in "LN" or category == "Mn":
            kept.append(ch)
        elif ch == " ":
            kept.append("-")
    return "".join(kept)


def anchors_of(path, cache):
    if path not in cache:
        anchors, seen = set(), {}
        text = path.read_text(encoding="utf-8", errors="replace")
        previous = None
        for _, line in prose_lines(text, keep_code_spans=True):
            match = ATX_HEADING.match(line)
            title = (match.group(1) or "") if match else None
            if title is None and previous is not None and previous.strip() \
                    and re.match(r"^ {0,3}(=+|-+)[ \t]*$", line):
                title = previous  # a setext heading: the line above is its text
            if title is not None:
                base = slug(title)
                count = seen.get(base, 0)
                seen[base] = count + 1
                anchors.add(base if count == 0 else f"{base}-{count}")
            anchors.update(a.lower() for a in HTML_ANCHOR.findall(line))
            previous = line
        cache[path] = anchors
    return cache[path]


def check(root):
    """(broken links as 'file:line: target', links checked, files scanned)."""
    root = root.resolve()
    broken, checked, files = [], 0, 0
    cache = {}
    for md in markdown_files(root):
        files += 1
        text = md.read_text(encoding="utf-8", errors="replace")
        for number, line in prose_lines(text):
            for target in link_targets(line):
                if SCHEME.match(target):
                    continue
                checked += 1
                if not resolves(root, md, target, cache):
                    broken.append(f"{md.relative_to(root)}:{number}: {target}")
    return broken, checked, files


def resolves(root, md, target, cache):
    path_part, _, anchor = target.partition("#")
    path_part = unquote(path_part.split("?", 1)[0])
    if path_part:
        base = root if path_part.startswith("/") else md.parent
        dest = (base / path_part.lstrip("/")).resolve()
        if dest != root and root not in dest.parents:
            return False  # outside the repository: nothing on GitHub to land on
        if not dest.exists():
            return False
    else:
        dest = md
    if anchor and dest.is_file() and dest.suffix == ".md":
        return unquote(anchor).lower() in anchors_of(dest, cache)
    return True


def self_test():
    """The checker on a small tree: clean, then with broken links, which it must report."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "docs").mkdir()
        (root / "README.md").write_text(
            "# Top\n\n[guide](docs/guide.md), [its part](docs/guide.md#the-part-two), "
            "![pic](docs/pic.png), [here](#top), [web](https://example.com/none)\n\n"
            "```sh\n[not a link](missing.md)\n```\n\n`[not a link](missing.md)`\n")
        (root / "docs" / "guide.md").write_text(
            "# Guide\n\n## The *part* `two`\n\n[back](../README.md)\n")
        (root / "docs" / "pic.png").write_bytes(b"\x89PNG")
        (root / "build-x").mkdir()
        (root / "build-x" / "skipped.md").write_text("[gone](nowhere.md)\n")
        script = [sys.executable, os.path.abspath(__file__), str(root)]

        clean = subprocess.run(script, capture_output=True, text=True)
        if clean.returncode != 0 or clean.stdout.strip() != "5 links checked in 2 files":
            print("self-test FAILED: clean tree:", clean.returncode, clean.stdout, clean.stderr)
            return 1

        with open(root / "docs" / "guide.md", "a") as guide:
            guide.write("\n[broken](missing.md) and [bad anchor](../README.md#no-such)\n")
        dirty = subprocess.run(script, capture_output=True, text=True)
        expected = ["docs/guide.md:7: missing.md", "docs/guide.md:7: ../README.md#no-such"]
        if dirty.returncode != 1 or dirty.stdout.split("\n")[:2] != expected:
            print("self-test FAILED: broken links not reported:", dirty.returncode,
                  dirty.stdout, dirty.stderr)
            return 1
    print("self-test passed: a clean tree passes, a broken file link and anchor fail")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith("-")):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root = Path(argv[1]) if len(argv) == 2 else Path(__file__).resolve().parents[2]
    if not root.is_dir():
        print(f"check_links.py: {root}: not a folder", file=sys.stderr)
        return 2
    broken, checked, files = check(root)
    for line in broken:
        print(line)
    if broken:
        sys.stdout.flush()  # the broken links first, then the count, even when both streams are one
        print(f"{len(broken)} of {checked} links broken in {files} files", file=sys.stderr)
        return 1
    print(f"{checked} links checked in {files} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
