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
    print(f"\nlibredlock / {PEER} ({PEER} {v.get('redlock', '?')} on ioredis "
          f"{v.get('ioredis', '?')}, node {v.get('node', '?')}), the same servers in one run:")
    print(f"  {PEER} is single-threaded JavaScript in one node process; like libredlock's bench"
          f" it shares the machine's {machine.get('cores', '?')} cores with the five servers, and")
    print("  it ran right after each library scenario, never at the same time. Latency: below 1"
          " means libredlock is faster;")
    print("  cycles/s and acquisitions/s: above 1 means libredlock does more.")

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
    for r in sorted((r for r in peer if r.get("scenario") == "contention"),
                    key=lambda r: r["workers"]):
        b = r["acquisitions_per_s"]
        parts = []
        for notify, label in ((False, "polling (notify off)"), (True, "notify on")):
            mine = find(lib, "contention", workers=r["workers"], notify=notify)
            if mine:
                a = mine["acquisitions_per_s"]
                parts.append(f"{label} {a:,.0f} / {b:,.0f} = {ratio(a, b):.2f}")
        if parts:
            print(f"  contention, {r['workers']:>2} workers, acquisitions/s: " + ";  ".join(parts)
                  + f"  ({PEER}: {r['skipped_writes']} of {r['acquisitions']} holds expired at"
                  f" the write, {r['expired_holds']} on purpose; lost_updates {r['lost_updates']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
