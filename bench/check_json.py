#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/check_json.py JSONL [--tls] [--peers] [--cluster] - what bench/README.md promises of
redlock-bench's JSON lines, checked on a run's output (bench/smoke.sh runs it on a --quick run).
Lines of another implementation (bench/run --peers: "impl":"node-redlock") are checked apart from
the library's, whenever present; --peers wants them for latency, throughput and contention.
Cluster lines are checked whenever present; --cluster wants them (the scenario runs only with
--cluster-former). Prints what is wrong and exits 1, or exits 0. A functional check: no speed is
judged here."""
import json
import sys

SCHEMA = 2
PEERS = {"node-redlock"}


def check_peers(peer_rows, lib_by, peers, need):
    """bench/peers/node-redlock.mjs's lines: the workloads of the library's rows they are compared
    with (docs/performance.md, "peers")."""
    by = {}
    for r in peer_rows:
        need(r.get("impl") in PEERS, f"unknown impl (known: {sorted(PEERS)})", r)
        need(all(r.get("versions", {}).get(k) for k in ("node", "redlock", "ioredis")),
             "peer line without versions of node, redlock and ioredis", r)
        need(len(r.get("loadavg_start", [])) == 3 and len(r.get("loadavg_end", [])) == 3,
             "peer line without its load averages", r)
        need(r.get("scenario") in lib_by, "peer line with no library line of its scenario", r)
        by.setdefault(r.get("scenario"), []).append(r)
    if peers:
        for s in ("latency", "throughput", "contention"):
            need(s in by, f"--peers: no node-redlock {s} line")
    for r in by.get("latency", []):
        need(r.get("in_flight") == 1 and r.get("ttl_ms") == 10000, "peer latency: not the "
             "library's workload (one at a time, ttl 10,000 ms)", r)
        for k in ("acquire_us", "release_us", "cycle_us"):
            need(r.get(k, {}).get("n", 0) > 0 and "p99" in r.get(k, {}),
                 f"peer latency without {k}", r)
    tp = by.get("throughput", [])
    if tp:
        need({r.get("concurrency") for r in tp} >= {1, 16, 64, 256},
             "peer throughput rows for 1, 16, 64 and 256 in flight")
    for r in tp:
        need(r.get("ttl_ms") == 10000, "peer throughput with a ttl other than the library's", r)
        need(r.get("cycles_per_s", 0) > 0 and r.get("cpu_us_per_cycle", 0) > 0,
             "peer throughput with no cycles or no cpu_us_per_cycle", r)
        need(len(r.get("slices", [])) >= 3 and all(v > 0 for v in r.get("slices", [])),
             "peer throughput without 3 or more slices", r)
        for k in ("p50", "p99", "p999"):
            need(k in r.get("cycle_us", {}), f"peer throughput without cycle_us.{k}", r)
    cont = by.get("contention", [])
    if cont:
        need({r.get("workers") for r in cont} >= {2, 8, 32}, "peer contention for 2, 8, 32 workers")
    for r in cont:
        need(r.get("clients") == r.get("workers"), "peer contention clients != workers", r)
        need(r.get("notify") is False and r.get("ttl_ms") == 100 and r.get("think_us") == 1000,
             "peer contention: not the library's polling workload (ttl 100 ms, think 1 ms)", r)
        need(r.get("lost_updates") == r.get("writes", 0) - r.get("final_counter", 0),
             "peer contention: lost_updates is not writes - final_counter", r)
        need(0 < r.get("jain_index", 0) <= 1.0001, "peer contention without a jain_index", r)
        need(r.get("expired_holds", 0) > 0, "peer contention with no expired hold", r)
        need(r.get("acquisitions_per_s", 0) > 0, "peer contention with no acquisition", r)


def check_outcome(rows, outcomes, need):
    """The run's last line: what failed, and the exit status that follows from it (failed cycles
    are figures, 0; a correctness failure 1; a scenario not made 2)."""
    need(len(outcomes) == 1 and rows and rows[-1] is outcomes[0],
         "one outcome line, the library's last")
    for o in outcomes:
        for k in ("exit_status", "failed_cycles", "failed_rows", "correctness_failures",
                  "not_made", "verdict"):
            need(k in o, f"outcome without {k}", o)
        for r in o.get("failed_rows", []):
            need(all(k in r for k in ("scenario", "row", "failed", "cycles", "causes", "loadavg"))
                 and r["failed"] > 0 and r["causes"], "a failed row without its figures", r)
        if len(o.get("failed_rows", [])) < 64:
            need(o.get("failed_cycles") == sum(r["failed"] for r in o.get("failed_rows", [])),
                 "failed_cycles is not the sum of the failed rows'", o)
        want = 1 if o.get("correctness_failures") else 2 if o.get("not_made") else 0
        need(o.get("exit_status") == want, f"outcome exit_status is not {want}", o)
        need(o.get("verdict", "").startswith(("ok: ", "FAILED: ", "NOT MADE: ")[want]),
             "outcome verdict does not begin with its status", o)


def check_cluster(rows, cluster, need):
    """The cluster scenario's lines: one per (masters per node, concurrency), each beside the plain
    nodes of the same run, every master of every cluster given SETs, no failed cycle."""
    if cluster:
        need({(r.get("masters_per_node"), r.get("concurrency")) for r in rows}
             >= {(m, c) for m in (1, 2, 3) for c in (64, 256)},
             "cluster rows for 1, 2 and 3 masters per node at 64 and 256 in flight")
    for r in rows:
        for k in ("cycles_per_s", "plain_cycles_per_s", "cpu_us_per_cycle",
                  "plain_cpu_us_per_cycle"):
            need(r.get(k, 0) > 0, f"cluster without {k}", r)
        for k in ("cycle_us", "plain_cycle_us"):
            need(r.get(k, {}).get("n", 0) > 0 and "p99" in r.get(k, {}), f"cluster without {k}", r)
        for k in ("slices", "plain_slices"):
            need(len(r.get(k, [])) >= 3 and all(v > 0 for v in r.get(k, [])),
                 f"cluster without 3 or more {k}", r)
        if r.get("plain_cycles_per_s"):
            want_of = r.get("cycles_per_s", 0) / r["plain_cycles_per_s"]
            need(isinstance(r.get("of_plain"), (int, float))
                 and abs(r["of_plain"] - want_of) <= 0.002 + 0.001 * want_of,
                 "cluster of_plain is not cycles_per_s / plain_cycles_per_s", r)
        # The servers' CPU per cycle: null only when their INFO could not be read.
        for k in ("server_cpu_us_per_cycle", "plain_server_cpu_us_per_cycle"):
            need(k in r and (r[k] is None or r[k] > 0), f"cluster without {k}", r)
        need(r.get("masters") == r.get("nodes", 0) * r.get("masters_per_node", 0),
             "cluster: masters is not nodes x masters_per_node", r)
        need(r.get("masters_used") == r.get("masters"),
             "cluster: a master ran no SET (the fresh names did not reach every master)", r)
        need(r.get("failures") == 0 and r.get("plain_failures") == 0,
             "cluster with failed cycles", r)


def check(rows, tls, peers=False, cluster=False):
    errors = []

    def need(cond, what, row=None):
        if not cond:
            errors.append(what + (f": {json.dumps(row)[:300]}" if row is not None else ""))

    for r in rows:
        need(r.get("schema") == SCHEMA, f'"schema" is not {SCHEMA}', r)
    peer_rows = [r for r in rows if "impl" in r]
    rows = [r for r in rows if "impl" not in r]
    by = {}
    for r in rows:
        by.setdefault(r.get("scenario"), []).append(r)
    check_peers(peer_rows, by, peers, need)
    want = {"machine", "latency", "limit", "throughput", "scale", "contention", "faults", "wan",
            "memory", "fencing", "multi", "outcome"}
    if tls:
        want |= {"tls", "tls_handshake"}
    need(not (want - by.keys()), f"missing scenarios: {sorted(want - by.keys())}")

    check_outcome(rows, by.get("outcome", []), need)
    for m in by.get("machine", []):
        for k in ("commit", "utc", "loadavg_start", "loadavg_end"):
            need(k in m, f"machine without {k}", m)
        need(len(m.get("loadavg_start", [])) == 3 and len(m.get("loadavg_end", [])) == 3,
             "load averages are three numbers", m)
    for r in by.get("latency", []):
        need(r.get("raw_wait") == "quorum", 'latency without "raw_wait":"quorum"', r)
        need(r["cycle_us"]["n"] > 0 and r["raw_cycle_us"]["n"] > 0, "latency with no cycles", r)
    quick = any(m.get("quick") for m in by.get("machine", []))
    limits = by.get("limit", [])
    need(len(limits) <= 1, "one limit line per run", limits[1] if len(limits) > 1 else None)
    for r in limits:
        for k in ("commands_per_s", "commands_per_cycle", "cycles_per_s_limit", "nodes", "in_flight",
                  "cpu_us_per_cycle"):
            need(k in r, f"limit without {k}", r)
        need(r.get("commands_per_cycle") == 2 * r.get("nodes", 0),
             "limit: commands_per_cycle is not 2 x nodes (a SET and a release on each)", r)
        need(r.get("cycles_per_s_limit", 0) > 0, "limit with no commands answered", r)
        need(abs(r.get("cycles_per_s_limit", 0) * r.get("commands_per_cycle", 0)
                 - r.get("commands_per_s", 0)) <= 0.01 * r.get("commands_per_s", 1) + 1,
             "limit: cycles_per_s_limit is not commands_per_s / commands_per_cycle", r)
        need(len(r.get("slices", [])) >= 3 and all(v > 0 for v in r.get("slices", [])),
             "limit without 3 or more slices", r)
    tp = by.get("throughput", [])
    need({r.get("concurrency") for r in tp} >= {1, 16, 64, 256, 1024},
         "throughput rows for 1, 16, 64, 256 and 1,024 in flight")
    for r in tp:
        need(r.get("raw_wait") == "quorum", 'throughput without "raw_wait":"quorum"', r)
        need(r["cycles_per_s"] > 0 and r["raw_cycles_per_s"] > 0, "throughput with no cycles", r)
        for k in ("p50", "p99", "p999"):
            need(k in r.get("cycle_us", {}), f"throughput without cycle_us.{k}", r)
        for k in ("slices", "raw_slices"):
            need(len(r.get(k, [])) >= 3 and all(v > 0 for v in r.get(k, [])),
                 f"throughput without 3 or more {k}", r)
        for k in ("cpu_us_per_cycle", "raw_cpu_us_per_cycle"):
            need(r.get(k, 0) > 0, f"throughput without {k}", r)
        # Each row measures the limit beside its own slices (plain nodes: the bench's are).
        need(r.get("limit_cycles_per_s") is not None and r["limit_cycles_per_s"] > 0,
             "throughput without limit_cycles_per_s", r)
        # A slice of the smoke run's 40 ms may see no answer at all on a loaded machine (the
        # servers descheduled): 0 is a figure; the median above must not be 0.
        need(len(r.get("limit_slices", [])) >= 3 and all(v >= 0 for v in r.get("limit_slices", [])),
             "throughput without 3 or more limit_slices", r)
        if r.get("limit_cycles_per_s"):
            want_of = r["cycles_per_s"] / r["limit_cycles_per_s"]
            need(isinstance(r.get("of_limit"), (int, float))
                 and abs(r["of_limit"] - want_of) <= 0.002 + 0.001 * want_of,
                 "throughput of_limit is not cycles_per_s / its limit_cycles_per_s", r)
    scale = by.get("scale", [])
    need({r.get("nodes") for r in scale} >= {1, 3, 5, 7, 9}, "scale rows for 1, 3, 5, 7 and 9 nodes")
    for r in scale:
        need(r.get("quorum") == r.get("nodes", 0) // 2 + 1, "scale with a wrong quorum", r)
        need(r.get("raw_wait") == "quorum", 'scale without "raw_wait":"quorum"', r)
        for k in ("acquire_us", "raw_acquire_us", "cycle_us", "raw_cycle_us"):
            need(r.get(k, {}).get("n", 0) > 0 and "p99" in r.get(k, {}), f"scale without {k}", r)
        for k in ("cycles_per_s", "raw_cycles_per_s", "cpu_us_per_cycle", "raw_cpu_us_per_cycle"):
            need(r.get(k, 0) > 0, f"scale without {k}", r)
        for k in ("slices", "raw_slices"):
            need(len(r.get(k, [])) >= 3, f"scale without 3 or more {k}", r)
        need(r.get("failures") == 0 and r.get("raw_lost") == 0, "scale with failed cycles", r)
    wan = by.get("wan", [])
    need(any(len(set(r.get("delays_ms", []))) > 1 for r in wan),
         "no wan row with per-node delays that differ")
    for r in wan:
        for k in ("delays_ms", "floor_us", "raw_us", "release_p50_minus_floor_ms", "cycle_us",
                  "cycle_p50_minus_floors_ms"):
            need(k in r, f"wan without {k}", r)
        need(r.get("failures") == 0, "wan with failures", r)
    cont = by.get("contention", [])
    controls = [r for r in cont if r.get("control") == "nolock"]
    need(len(controls) == 1, 'one contention row with "control":"nolock"')
    for r in controls:
        need(r["lost_updates"] > 0, "the no-lock control lost no update: the check cannot fail", r)
    need({r.get("notify") for r in cont if r.get("control") != "nolock"} == {True, False},
         "contention rows for notify on and off")
    for kind in ("fenced", "set"):
        need({r.get("workers") for r in cont if r.get("lock") == kind} >= {2, 8, 32},
             f"{kind} contention rows for 2, 8 and 32 workers")
    for r in cont:
        need(r.get("clients") == r.get("workers"), "contention clients != workers", r)
        if r.get("control") != "nolock":
            need(r["lost_updates"] == 0, "contention lost updates under the lock", r)
            need(isinstance(r.get("notify"), bool), "contention without notify true|false", r)
            need(0 < r.get("jain_index", 0) <= 1.0001, "contention without a jain_index", r)
            need(r.get("expired_holds", 0) > 0, "contention with no expired hold", r)
            need(r.get("attempts_per_acquisition_p50", 0) >= 1,
                 "contention without attempts per acquisition", r)
            if r.get("lock") == "fenced":
                need(r.get("fence_per_acquisition", 0) >= 1,
                     "fenced contention whose fence did not move", r)
    phases = {r.get("phase"): r for r in by.get("faults", [])}
    for p in ("healthy", "one_stopped", "two_stopped", "three_stopped", "killed", "restarted"):
        need(p in phases, f"faults without phase {p}")
    if "restarted" in phases:
        need(phases["restarted"].get("back_after_ms", -1) >= 0, "restarted node never used again",
             phases["restarted"])
    for r in by.get("faults", []):
        need(r.get("unexpected") == 0, "faults with unexpected outcomes", r)
        need("release_us" in r, "faults without release_us", r)
    for r in by.get("fencing", []):
        for k in ("acquire_us", "plain_acquire_us", "cycles_per_s", "plain_cycles_per_s", "ratio",
                  "reused_cycles_per_s", "reused_plain_cycles_per_s", "reused_ratio"):
            need(k in r, f"fencing without {k}", r)
        need(r.get("failures") == 0, "fencing with failed cycles", r)
        for k in ("cycles_per_s", "plain_cycles_per_s", "reused_cycles_per_s",
                  "reused_plain_cycles_per_s"):
            need(r.get(k, 0) > 0, f"fencing with no cycles ({k})", r)
    multi = by.get("multi", [])
    need({r.get("resources") for r in multi} >= {1, 2, 4, 8}, "multi rows for 1, 2, 4 and 8 resources")
    for r in multi:
        for k in ("acquire_us", "concurrency", "cycles_per_s", "resources_per_s", "of_single"):
            need(k in r, f"multi without {k}", r)
        need(r.get("failures") == 0, "multi with failed cycles", r)
        need(r.get("cycles_per_s", 0) > 0, "multi with no cycles", r)
    mem = by.get("memory", [])
    held = {r.get("held_locks") for r in mem}
    need(len(held) >= 2, "memory rows for two held-lock counts")
    if not quick:
        need(held >= {10000, 100000}, "memory rows for 10,000 and 100,000 held locks")
    for r in mem:
        need(r.get("live_bytes_per_lock", 0) > 0, "memory without live_bytes_per_lock", r)
        need(r.get("failures") == 0, "memory with failed acquires", r)
    check_cluster(by.get("cluster", []), cluster, need)
    if tls:
        for r in by.get("tls", []):
            need(r["cycles_per_s"] > 0 and r["plain_cycles_per_s"] > 0, "tls with no cycles", r)
        for r in by.get("tls_handshake", []):
            need(r["full_us"]["n"] > 0 and r["resumed_us"]["n"] > 0, "no handshakes", r)
    return errors


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    errors = check(rows, "--tls" in sys.argv[2:], "--peers" in sys.argv[2:],
                   "--cluster" in sys.argv[2:])
    for e in errors:
        print(e)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
