#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""summary_test.py - test/summary.py on hand-made meson logs: what counts as passed, failed and
skipped, and the per-check failure counts of --repeat. TAP output, one case per check."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
cases = []


def case(fn):
    cases.append(fn)
    return fn


def log(tmp, name, tests):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        for t in tests:
            f.write(json.dumps(t) + "\n")
    return path


def run(*args):
    p = subprocess.run([sys.executable, os.path.join(HERE, "summary.py")] + list(args),
                       capture_output=True, text=True)
    return p.returncode, p.stdout


@case
def counts_pass_fail_skip(tmp):
    path = log(tmp, "a.json", [
        {"name": "s / cmocka", "result": "FAIL",
         "stdout": "1..4\nok 1 - a\nnot ok 2 - b\n# SKIP no valgrind here\nok 3 - c\nok 4 - d\n"},
        {"name": "s / tap", "result": "OK", "stdout": "1..2\nok 1 - x # SKIP short run\nok 2 - y\n"},
        {"name": "s / plain", "result": "OK", "stdout": "no tap here\n"},
        {"name": "s / whole-skip", "result": "SKIP", "stdout": ""},
    ])
    rc, out = run("x#1=" + path)
    assert rc == 1, out
    assert out.splitlines()[-1] == "4 passed, 1 failed, 3 skipped", out
    assert "---- failed: s / cmocka" in out, out


@case
def crash_without_not_ok_is_one_failure(tmp):
    path = log(tmp, "b.json", [
        {"name": "s / crash", "result": "TIMEOUT", "stdout": "1..3\nok 1 - a\n"},
    ])
    rc, out = run("x#1=" + path)
    assert rc == 1 and out.splitlines()[-1] == "1 passed, 1 failed, 0 skipped", out


@case
def cmocka_skip_is_not_a_pass(tmp):
    path = log(tmp, "c.json", [
        {"name": "s / t", "result": "FAIL", "stdout": "1..1\nnot ok 1 # SKIP a\n"},
    ])
    rc, out = run("x#1=" + path)
    assert rc == 1 and out.splitlines()[-1] == "0 passed, 1 failed, 0 skipped", out


@case
def failed_build_and_missing_log_fail(tmp):
    rc, out = run("asan#1=BUILD-FAILED", "x#1=" + os.path.join(tmp, "none.json"))
    assert rc == 1 and out.splitlines()[-1] == "0 passed, 2 failed, 0 skipped", out


@case
def repeat_counts_runs_per_check(tmp):
    bad = {"name": "s / t", "result": "FAIL", "stdout": "1..2\nok 1 - a\nnot ok 2 - b\n"}
    good = {"name": "s / t", "result": "OK", "stdout": "1..2\nok 1 - a\nok 2 - b\n"}
    p1 = log(tmp, "r1.json", [bad])
    p2 = log(tmp, "r2.json", [good])
    p3 = log(tmp, "r3.json", [bad])
    rc, out = run("--runs", "3", "plain#1=" + p1, "plain#2=" + p2, "plain#3=" + p3)
    assert rc == 1, out
    assert "    plain / s / t / b: failed in 2 of 3 runs" in out, out
    assert out.splitlines()[-1] == "4 passed, 2 failed, 0 skipped", out


@case
def all_green_exits_zero(tmp):
    p = log(tmp, "g.json", [{"name": "s / t", "result": "OK", "stdout": "1..1\nok 1 - a\n"}])
    rc, out = run("--runs", "2", "x#1=" + p, "x#2=" + p)
    assert rc == 0 and "failing checks" not in out, out
    assert out.splitlines()[-1] == "2 passed, 0 failed, 0 skipped", out


def main():
    print("1..%d" % len(cases))
    failed = 0
    for i, fn in enumerate(cases, 1):
        with tempfile.TemporaryDirectory() as tmp:
            try:
                fn(tmp)
                print("ok %d - %s" % (i, fn.__name__))
            except AssertionError as e:
                failed += 1
                print("not ok %d - %s" % (i, fn.__name__))
                for line in str(e).splitlines():
                    print("# " + line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
