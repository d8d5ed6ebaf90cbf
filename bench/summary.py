#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/summary.py JSONL - the one-screen summary of a bench run, from its JSON Lines: the
headline rows (libredlock against the raw fan-out of the same run, and against node-redlock when
the file has its rows, from bench/run --peers), the servers' limit, the rows whose cycles failed
and why, and the closing line of the run (its "outcome" line). Exits with the run's status: 0,
1 when a correctness check failed, 2 when a scenario could not be made (the outcome line says
which); 2 when the file has no outcome line (the run did not end)."""
import json
import sys

PEER = "node-redlock"


def ratio(a, b):
    return a / b if b else float("nan")


def find(rows, scenario, **match):
    for r in rows:
        if r.get("scenario") == scenario and all(r.get(k) == v for k, v in match.items()):
            return r
    return None


def table(lib, peer):
    """(row, libredlock, baseline, ratio, note) tuples of the headline figures that ran."""
    out = []
    lat = find(lib, "latency")
    if lat:
        a, b = lat["cycle_us"]["p50"], lat["raw_cycle_us"]["p50"]
        out.append(("latency: cycle p50, one at a time", f"{a:,} us", f"{b:,} us",
                    lat["ratio_p50"], f"p99 ratio {lat['ratio_p99']:.2f}"))
    for r in sorted((r for r in lib if r.get("scenario") == "throughput"),
                    key=lambda r: r["concurrency"]):
        of = r.get("of_limit")
        out.append((f"throughput: {r['concurrency']:>4} in flight",
                    f"{r['cycles_per_s']:,.0f}/s", f"{r['raw_cycles_per_s']:,.0f}/s", r["ratio"],
                    f"{of:.2f} of the limit" if of is not None else ""))
    lim = find(lib, "limit")
    if lim:
        out.append(("limit: the servers, pipelined", f"{lim['cycles_per_s_limit']:,.0f}/s", "",
                    None, f"{lim['commands_per_s']:,.0f} commands/s"))
    sc = find(lib, "scale", nodes=9) or find(lib, "scale", nodes=5)
    if sc:
        out.append((f"scale: {sc['nodes']} nodes, 64 in flight", f"{sc['cycles_per_s']:,.0f}/s",
                    f"{sc['raw_cycles_per_s']:,.0f}/s", sc["ratio"], ""))
    locked = [r for r in lib if r.get("scenario") == "contention" and r.get("control") != "nolock"]
    if locked:
        top = max(locked, key=lambda r: (r["workers"], r.get("notify", False)))
        control = find(lib, "contention", control="nolock")
        lost = sum(r["lost_updates"] for r in locked)
        note = f"lost updates {lost}"
        if control:
            note += f" (no lock: {control['lost_updates']})"
        out.append((f"contention: {top['workers']} workers, {top['lock']}",
                    f"{top['acquisitions_per_s']:,.0f} acq/s", "", None, note))
    faults = [r for r in lib if r.get("scenario") == "faults"]
    if faults:
        bad = sum(r.get("unexpected", 0) for r in faults)
        out.append(("faults: stopped, killed, restarted", "", "", None,
                    f"{bad} unexpected rounds in {len(faults)} phases"))
    for name, key, base in (("tls", "cycles_per_s", "plain_cycles_per_s"),
                            ("fencing", "cycles_per_s", "plain_cycles_per_s"),
                            ("cluster", "cycles_per_s", "plain_cycles_per_s")):
        r = find(lib, name, concurrency=64)
        if r:
            label = {"tls": "tls: 64 in flight, vs plain",
                     "fencing": "fencing: 64 in flight, vs plain",
                     "cluster": f"cluster: {r.get('masters_per_node')} master/node, vs plain"}[name]
            out.append((label, f"{r[key]:,.0f}/s", f"{r[base]:,.0f}/s", ratio(r[key], r[base]),
                        ""))
    # node-redlock: the library's figure over the peer's (latency: below 1 is faster).
    plat = find(peer, "latency")
    if lat and plat:
        a, b = lat["cycle_us"]["p50"], plat["cycle_us"]["p50"]
        out.append((f"{PEER}: latency, cycle p50", f"{a:,} us", f"{b:,} us", ratio(a, b),
                    "below 1: faster"))
    for r in sorted((r for r in peer if r.get("scenario") == "throughput"),
                    key=lambda r: r["concurrency"]):
        mine = find(lib, "throughput", concurrency=r["concurrency"])
        if mine:
            out.append((f"{PEER}: throughput, {r['concurrency']:>4} in flight",
                        f"{mine['cycles_per_s']:,.0f}/s", f"{r['cycles_per_s']:,.0f}/s",
                        ratio(mine["cycles_per_s"], r["cycles_per_s"]), ""))
    for r in sorted((r for r in peer if r.get("scenario") == "contention"),
                    key=lambda r: r["workers"]):
        mine = find(lib, "contention", workers=r["workers"], notify=True, lock="plain")
        if mine:
            out.append((f"{PEER}: contention, {r['workers']:>2} workers",
                        f"{mine['acquisitions_per_s']:,.0f}/s", f"{r['acquisitions_per_s']:,.0f}/s",
                        ratio(mine["acquisitions_per_s"], r["acquisitions_per_s"]),
                        f"it polls; lost {r['lost_updates']}"))
    return out


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    lib = [r for r in rows if "impl" not in r]
    peer = [r for r in rows if r.get("impl") == PEER]
    m = find(lib, "machine") or {}
    outcome = find(lib, "outcome")
    load = m.get("loadavg_start", ["?"])[0], m.get("loadavg_end", ["?"])[0]
    print(f"\nsummary: {m.get('utc', '?')}, {m.get('commit', '?')}, {m.get('cores', '?')} cores "
          f"{m.get('cpu', '?')}, load {load[0]} -> {load[1]}"
          f"{', quick' if m.get('quick') else ''}")
    print(f"  {'':<40} {'libredlock':>11} {'baseline':>10} {'ratio':>6}  note")
    for what, a, b, r, note in table(lib, peer):
        rs = f"{r:6.2f}" if r is not None else ""
        print(f"  {what:<40} {a:>11} {b:>10} {rs:>6}  {note}".rstrip())
    print("  baseline: the raw fan-out of the same commands, deciding at the same quorum")
    if peer:
        print(f"  (in the {PEER} rows: {PEER}, on the same servers, right after the library)")
    if outcome is None:
        print("NOT MADE: the run has no outcome line (it did not end)")
        return 2
    failed = outcome["failed_rows"]
    if failed:
        print(f"  failed cycles (timing, not correctness): {outcome['failed_cycles']:,} in "
              f"{len(failed)} row{'' if len(failed) == 1 else 's'}")
        for r in failed[:6]:
            print(f"    {r['scenario']} {r['row']}: {r['failed']:,} ({r['causes'][:60]}), "
                  f"load {r['loadavg']:.2f}")
        if len(failed) > 6:
            print(f"    and {len(failed) - 6} more rows (the JSON's outcome line)")
    print(outcome["verdict"])
    return outcome["exit_status"]


if __name__ == "__main__":
    sys.exit(main())
