#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test/summary.py - the closing lines of test/run, from meson's JSON test logs.

    summary.py [--runs N] LABEL=LOG ...

Each LOG is a meson testlog*.json of one pass (one build, one repetition); LABEL names the pass
("release -Werror", "asan+ubsan#3", ...). LOG may be the word BUILD-FAILED: the pass could not
build, which counts as one failure (a broken build never reads as green).

Every test executable speaks TAP and every result line is one check:
  "ok N - name"            passed
  "ok N - name # SKIP why"  skipped (counted apart: a skipped check is not a passed one)
  "not ok N ..."           failed (cmocka's own skip() prints "not ok N # SKIP name", which meson
                           counts as a failure: the tests use h_skip()/a plain "# SKIP" line
                           instead, see below)
A line "# SKIP <why>" printed by a cmocka test before its "ok N - name" line marks that case as
skipped (cmocka cannot print a TAP skip that meson accepts). An executable that failed without a
"not ok" line (crash, timeout, sanitizer abort) counts as one failure of the whole program.

Prints the output of each failed program (without sanitizer stack frames and leak lists), then
with --runs N > 1 one line per failing check with the number of runs it failed in, and last
"N passed, N failed, N skipped". Exit status 1 if anything failed.
"""
import json
import re
import sys
from collections import OrderedDict

RESULT = re.compile(r"^(not ok|ok) (\d+)\b\s*(?:-\s*)?([^#]*?)\s*(?:#\s*(\w+)\b\s*(.*))?$")
SKIP_MARK = re.compile(r"^#\s*SKIP\b\s*(.*)$")


def excerpt(test, limit=80):
    text = (test.get("stdout") or "") + "\n" + (test.get("stderr") or "")
    keep, in_leak = [], False
    for line in text.splitlines():
        if re.match(r"(Direct|Indirect) leak of", line):
            in_leak = True
        elif in_leak and line.strip() and not re.match(r"\s+#\d+ ", line):
            in_leak = False
        if in_leak or re.match(r"\s+#\d+ 0x", line) or re.match(r"ok \d+", line):
            continue
        keep.append(line)
    return keep[:limit]


def checks(test):
    """(passed, failed, skipped, failed case names) of one executable's run."""
    passed = failed = skipped = 0
    failed_names = []
    marked_skip = False
    for line in (test.get("stdout") or "").splitlines():
        if SKIP_MARK.match(line):
            marked_skip = True
            continue
        m = RESULT.match(line)
        if m is None:
            continue
        ok, _num, name, directive = m.group(1) == "ok", m.group(2), m.group(3), m.group(4)
        is_skip = (directive or "").upper().startswith("SKIP")
        if not ok and is_skip:
            # cmocka's "not ok N # SKIP name": meson failed the program for it; count it failed
            # so the two agree, and name it.
            failed += 1
            failed_names.append((m.group(5) or name or "?") + " (cmocka skip(): use h_skip)")
        elif not ok:
            failed += 1
            failed_names.append(name or "?")
        elif is_skip or marked_skip:
            skipped += 1
        else:
            passed += 1
        marked_skip = False
    ok = test.get("result") in ("OK", "EXPECTEDFAIL", "SKIP")
    if not ok and failed == 0:
        failed = 1
        failed_names.append("(the program: %s)" % test.get("result", "?").lower())
    if ok and passed + failed + skipped == 0:
        if test.get("result") == "SKIP":
            skipped = 1
        else:
            passed = 1  # a plain test with no TAP cases
    return passed, failed, skipped, failed_names


def main(argv):
    runs = 1
    args = argv[1:]
    if len(args) >= 2 and args[0] == "--runs":
        runs = int(args[1])
        args = args[2:]
    passed = failed = skipped = 0
    reports = []
    failing = OrderedDict()  # "pass / program / case" -> set of repetitions
    for arg in args:
        label, _, path = arg.partition("=")
        base, _, rep = label.partition("#")
        if path == "BUILD-FAILED":
            failed += 1
            reports.append((label, "(build)", ["the build failed: see its log above"]))
            failing.setdefault("%s / build" % base, set()).add(rep)
            continue
        try:
            lines = open(path).read().splitlines()
        except OSError as e:
            failed += 1
            reports.append((label, path, ["no test log: %s" % e]))
            failing.setdefault("%s / (no test log)" % base, set()).add(rep)
            continue
        for line in lines:
            test = json.loads(line)
            p, f, s, names = checks(test)
            passed, failed, skipped = passed + p, failed + f, skipped + s
            if f:
                reports.append((label, test.get("name", "?"), excerpt(test)))
                for n in names:
                    key = "%s / %s / %s" % (base, test.get("name", "?"), n)
                    failing.setdefault(key, set()).add(rep)
    for label, name, lines in reports:
        print("---- failed: %s (%s); its output, passed cases and sanitizer stack frames left "
              "out:" % (name, label))
        for line in lines:
            print("    " + line)
    if runs > 1:
        if failing:
            print("---- failing checks over %d runs:" % runs)
        for key, reps in failing.items():
            print("    %s: failed in %d of %d runs" % (key, len(reps), runs))
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
