#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tools/check_links.py [ROOT] - every relative markdown link resolves, anchor included.

Reads the top-level *.md of ROOT (default: this script's tree) and every *.md under docs/, abi/,
bench/, examples/, test/ and tools/. Each link [text](target) outside code, where target is not
a URL, must name a file that exists (relative to the linking file) and, with #anchor, a heading
of that file as GitHub slugs it (lowercase, punctuation dropped, spaces to hyphens, -1, -2 for
repeats) or an <a id="...">. Prints TAP, one check per file; exit status 1 if a link is broken.
"""
import os
import re
import sys

DIRS = ("docs", "abi", "bench", "examples", "test", "tools")
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"#{1,6}\s+(.*?)\s*#*\s*$")
ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def prose_lines(path):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
            elif not fenced:
                yield no, line


def slug(heading):
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        found, seen = set(), {}
        for _, line in prose_lines(path):
            found.update(ANCHOR.findall(line))
            m = HEADING.match(line)
            if m:
                s = slug(m.group(1))
                n = seen.get(s, 0)
                found.add(s if n == 0 else "%s-%d" % (s, n))
                seen[s] = n + 1
        _anchors[path] = found
    return _anchors[path]


def broken_links(path):
    for no, line in prose_lines(path):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue  # a URL
            name, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), name)) if name else path
            if not os.path.exists(dest):
                yield "line %d: %s: no such file" % (no, target)
            elif frag and dest.endswith(".md") and frag not in anchors(dest):
                yield "line %d: %s: no such anchor" % (no, target)


def markdown_files(root):
    files = [os.path.join(root, f) for f in os.listdir(root) if f.endswith(".md")]
    for d in DIRS:
        for top, _, names in os.walk(os.path.join(root, d)):
            files += [os.path.join(top, f) for f in names if f.endswith(".md")]
    return sorted(files)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(__file__))
    root = os.path.abspath(root)
    files = markdown_files(root)
    print("1..%d" % len(files))
    failed = 0
    for i, path in enumerate(files, 1):
        bad = list(broken_links(path))
        name = os.path.relpath(path, root)
        print("%s %d - %s" % ("not ok" if bad else "ok", i, name))
        for b in bad:
            print("# %s %s" % (name, b))
        failed += bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
