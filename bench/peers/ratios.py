#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/peers/ratios.py JSONL - the libredlock/peer ratios of one bench/run --peers run: for
each workload both ran (latency, throughput by cycles in flight, contention by workers), the
library's figure over the peer's ("impl":"node-redlock") from the same JSON file. Prints a table;
exits 1 when the file has no peer row to compare."""
import json
import sys

PEER = "node-redlock"


def ratio(a, b):
    return a / b if b else float("nan")


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    lib = [r for r in rows if "impl" not in r]
    peer = [r for r in rows if r.get("impl") == PEER]
    if not peer:
        print(f"no {PEER} rows in {sys.argv[1]}: nothing to compare")
        return 1
    machine = next((r for r in lib if r.get("scenario") == "machine"), {})
    v = peer[0].get("versions", {})
    print(f"\nlibredlock / {PEER} {v.get('redlock', '?')} (ioredis {v.get('ioredis', '?')}, node "
          f"{v.get('node', '?')}): the same servers, the same run.")
    print(f"{PEER} runs as single-threaded JavaScript in one node process and shares the "
          f"{machine.get('cores', '?')} cores\nwith the five servers, as the library's bench does;"
          " it runs right after each library scenario,\nnever beside it. Latency: below 1, "
          "libredlock is faster; cycles/s, acquisitions/s, updates/s:\nabove 1, libredlock does "
          "more.")

    def find(rs, scenario, **match):
        for r in rs:
            if r.get("scenario") == scenario and all(r.get(k) == x for k, x in match.items()):
                return r
        return None

    lat, plat = find(lib, "latency"), find(peer, "latency")
    if lat and plat:
        for what, key in (("cycle", "cycle_us"), ("acquire", "acquire_us")):
            for p in ("p50", "p99"):
                a, b = lat[key][p], plat[key][p]
                print(f"  latency, one at a time: {what} {p:<3} {a:>7,} us / {b:>7,} us = "
                      f"{ratio(a, b):.2f}")
    for r in sorted((r for r in peer if r.get("scenario") == "throughput"),
                    key=lambda r: r["concurrency"]):
        mine = find(lib, "throughput", concurrency=r["concurrency"])
        if mine:
            a, b = mine["cycles_per_s"], r["cycles_per_s"]
            print(f"  throughput, {r['concurrency']:>4} in flight: {a:>9,.0f} / {b:>9,.0f} "
                  f"cycles/s = {ratio(a, b):.2f}  (CPU per cycle {mine['cpu_us_per_cycle']:.1f} "
                  f"/ {r['cpu_us_per_cycle']:.1f} us)")
    # Updates/s: the acquisitions whose hold was still valid at the write (writes), per second.
    def updates_per_s(r):
        return r["acquisitions_per_s"] * r["writes"] / r["acquisitions"] if r["acquisitions"] else 0

    for r in sorted((r for r in peer if r.get("scenario") == "contention"),
                    key=lambda r: r["workers"]):
        for notify, label in ((False, "polling (notify off)"), (True, "notify on")):
            mine = find(lib, "contention", workers=r["workers"], notify=notify)
            if not mine:
                continue
            a, b = mine["acquisitions_per_s"], r["acquisitions_per_s"]
            ua, ub = updates_per_s(mine), updates_per_s(r)
            print(f"  contention, {r['workers']:>2} workers, libredlock {label:<20}: acquisitions/s "
                  f"{a:>6,.0f} / {b:>6,.0f} = {ratio(a, b):.2f}, updates/s {ua:>6,.0f} / "
                  f"{ub:>6,.0f} = {ratio(ua, ub):.2f}")
        print(f"      {PEER}: {r['skipped_writes']} of {r['acquisitions']} holds had expired at"
              f" the write ({r['expired_holds']} on purpose), lost_updates {r['lost_updates']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
