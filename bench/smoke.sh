#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/smoke.sh BENCH_EXE [PROXY_EXE [CERTS_EXE]] - the CI smoke run of the bench: redlock-bench
# --quick --duration 0.3 (each row a third of a second; SMOKE_DURATION sets it) against nine
# servers of its own (five for every scenario, all nine for scale; with TLS ports too when
# CERTS_EXE, the redlock-bench-certs program, is given); checks that the JSON is well-formed, every scenario
# reported, lost_updates is 0 and no fencing cycle failed. The cluster scenario runs too, its
# clusters formed by bench/clusters.sh (one M at a time, each in a temp dir under this run's own
# TMPDIR, so that none left behind goes unseen). A functional check only: speed is never
# asserted. Then what a run says when it fails (bench/outcome.c): with every node behind the
# delay proxy (20 ms) and a 5 ms node timeout every cycle fails by timeout, which is a figure:
# the row names the failures and their cause, the closing line names them, exit 0; with
# --break-lock the contention rows run unlocked, lose updates, and the run must exit 1 with a
# closing line naming the lost updates. Prints TAP.
set -uo pipefail
bench="$1"
proxy="${2:-}"
certs_exe="${3:-}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/servers.sh"
out="$(mktemp)"
certs=""
clusters_tmp="$(mktemp -d)"
proxy_pid=""
trap 'servers_stop; rm -f "$out" "$out.log"; rm -rf "$clusters_tmp"
      if [ -n "$proxy_pid" ]; then kill "$proxy_pid" 2>/dev/null; wait "$proxy_pid" 2>/dev/null; fi
      if [ -n "$certs" ]; then rm -rf "$certs"; fi' EXIT
echo "1..6"
if [ -n "$certs_exe" ]; then
    certs="$(mktemp -d)"
    "$certs_exe" "$certs"
fi
if ! servers_start 9 "$certs" 2>"$out.log"; then
    echo "not ok 1 - nine redis-servers started"; sed 's/^/# /' "$out.log"; exit 0
fi
# Speed is not measured here, only that nothing fails, so no node may miss its deadline just
# because the machine is loaded: every node gets 2 s (--node-timeout; wan adds its delay), except
# nodes 0 and 1, which the faults scenario stops while it expects every round to win on the
# other three: they keep the bench's 50 ms, in their URLs, so a stopped node costs 50 ms.
# The scale scenario gets all nine with the 2 s deadline.
nodes=()
for i in 0 1 2 3 4; do
    if [ "$i" -lt 2 ]; then nodes+=("${servers_urls[$i]}?timeout_ms=50"); else nodes+=("${servers_urls[$i]}"); fi
done
args=(--quick --duration "${SMOKE_DURATION:-0.3}" --node-timeout 2000 --nodes "$(IFS=,; echo "${nodes[*]}")" --pids "$(IFS=,; echo "${servers_pids[*]:0:5}")"
      --scale-nodes "$(IFS=,; echo "${servers_urls[*]}")" --json "$out"
      --cluster-former "$here/clusters.sh")
[ -n "$proxy" ] && args+=(--proxy "$proxy")
[ -n "$certs" ] && args+=(--tls-nodes "$(IFS=,; echo "${servers_tls_urls[*]:0:5}")" --tls-ca "$certs/ca.crt")
if TMPDIR="$clusters_tmp" "$bench" "${args[@]}" >"$out.log" 2>&1 &&
    tail -1 "$out.log" | grep -q '^ok: no correctness check failed; ' &&
    python3 "$here/summary.py" "$out" >"$out.summary" 2>&1 &&
    tail -1 "$out.summary" | grep -q '^ok: ' && grep -q '^  throughput:' "$out.summary"; then
    echo "ok 1 - redlock-bench --quick ran every scenario, no correctness check failed; the summary says so"
else
    echo "not ok 1 - redlock-bench --quick failed, or its last line or summary says otherwise"
    sed 's/^/# summary: /' "$out.summary" 2>/dev/null
fi
rm -f "$out.summary"
sed 's/^/# /' "$out.log"
if python3 - "$out" "$certs" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
seen = {r["scenario"] for r in rows}
need = {"machine", "latency", "limit", "throughput", "scale", "contention", "faults", "memory",
        "fencing", "multi", "cluster"}
if sys.argv[2]:
    need |= {"tls", "tls_handshake"}
missing = need - seen
assert not missing, f"missing scenarios: {missing}"
for r in rows:
    if r["scenario"] == "contention" and r.get("control") != "nolock":
        assert r["lost_updates"] == 0, r
    if r["scenario"] == "latency":
        assert r["cycle_us"]["n"] > 0 and r["raw_cycle_us"]["n"] > 0, r
    if r["scenario"] == "throughput":
        assert r["cycles_per_s"] > 0 and r["raw_cycles_per_s"] > 0, r
    if r["scenario"] == "tls":
        assert r["cycles_per_s"] > 0 and r["plain_cycles_per_s"] > 0, r
        assert r["cycle_us"]["n"] > 0 and r["plain_cycle_us"]["n"] > 0, r
    if r["scenario"] == "fencing":
        assert r["cycles_per_s"] > 0 and r["plain_cycles_per_s"] > 0, r
        assert r["acquire_us"]["n"] > 0 and r["plain_acquire_us"]["n"] > 0, r
        assert r["failures"] == 0, r
    if r["scenario"] == "multi":
        assert r["cycles_per_s"] > 0 and r["acquire_us"]["n"] > 0, r
        assert r["failures"] == 0, r
    if r["scenario"] == "cluster":
        assert r["cycles_per_s"] > 0 and r["plain_cycles_per_s"] > 0, r
        assert r["failures"] == 0 and r["masters_used"] == r["masters"], r
    if r["scenario"] == "tls_handshake":
        assert r["full_us"]["n"] > 0 and r["resumed_us"]["n"] > 0, r
PY
then
    echo "ok 2 - JSON lines are well-formed, all scenarios present, lost_updates 0"
else
    echo "not ok 2 - JSON check"
fi
# What bench/README.md promises of every line (bench/check_json.py).
if python3 "$here/check_json.py" "$out" ${certs:+--tls} --cluster >"$out.check" 2>&1; then
    echo "ok 3 - every line has the fields bench/README.md names; the no-lock control lost updates"
else
    echo "not ok 3 - JSON fields"; sed 's/^/# /' "$out.check"
fi
rm -f "$out.check"
# The faults scenario restarts node 0's server as its own child: it must have died with the bench.
port0="${servers_urls[0]##*:}"
bad=""
if redis-cli -h 127.0.0.1 -p "$port0" ping >/dev/null 2>&1; then
    bad="node 0's restarted server outlived the bench; "
fi
# bench/clusters.sh removes its servers' dir once it has stopped them (by pid, and reaped).
if [ -n "$(ls -A "$clusters_tmp")" ]; then
    bad+="a cluster former left its servers' dir: $(ls -A "$clusters_tmp" | tr '\n' ' '); "
fi
# Bad input: a clear message and 64 or 69 before any figure is printed.
free_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
check_bad() { # expected-status args...
    local want="$1" rc; shift
    "$bench" "$@" >"$out.bad" 2>"$out.err"; rc=$?
    if [ "$rc" != "$want" ] || [ -s "$out.bad" ] || [ ! -s "$out.err" ]; then
        bad+="'$*' gave $rc (want $want), $(wc -c <"$out.bad") bytes out, '$(head -1 "$out.err")'; "
    fi
}
check_bad 64 --nodes "${servers_urls[1]}" --scenario no-such-scenario
check_bad 64 --nodes "${servers_urls[1]}" --proxy "$out.no-such-proxy" --quick
check_bad 69 --nodes "${servers_urls[1]},redis://127.0.0.1:$free_port" --quick
check_bad 69 --nodes "${servers_urls[1]}" --scale-nodes "${servers_urls[1]},redis://127.0.0.1:$free_port" --quick
check_bad 64 --nodes "${servers_urls[1]}" --cluster-former "$out.no-such-former" --quick
rm -f "$out.bad" "$out.err"
if [ -z "$bad" ]; then
    echo "ok 4 - bad input exits 64/69 with a message and no figure; no server outlives the bench, no cluster dir is left"
else
    echo "not ok 4 - $bad"
fi

# ---- what a failed run says ---------------------------------------------------------------------
# Timing: every node behind the delay proxy (20 ms each way is more than the 5 ms deadline), so
# every cycle of the latency row fails by node timeout, whatever the machine's speed.
if [ -z "$proxy" ]; then
    echo "ok 5 - a timing-only failure exits 0 and is named # SKIP no proxy program given"
else
    ports=()
    for u in "${servers_urls[@]:2:5}"; do ports+=("${u##*:}"); done # node 0 died with faults
    coproc PROXY { exec "$proxy" --delay-ms 20 "${ports[@]}"; }
    proxy_pid=$PROXY_PID
    proxied=()
    while read -r line <&"${PROXY[0]}"; do
        [ "$line" = ready ] && break
        proxied+=("redis://127.0.0.1:${line%% *}")
    done
    "$bench" --nodes "$(IFS=,; echo "${proxied[*]}")" --scenario latency --duration 0.3 \
        --node-timeout 5 --json "$out" >"$out.log" 2>&1
    rc=$?
    kill "$proxy_pid" 2>/dev/null
    wait "$proxy_pid" 2>/dev/null
    proxy_pid=""
    last="$(tail -1 "$out.log")"
    row_re='^  failed: [1-9][0-9]* cycles? .*no answer (within|for) [0-9]+ ms.*; load average '
    last_re='^ok: no correctness check failed; timing only: [1-9][0-9]* failed cycles? in 1 row'
    last_re+=' \(first: latency one at a time, mostly node '
    if [ "$rc" = 0 ] && grep -Eq "$row_re" "$out.log" && grep -Eq "$last_re" <<<"$last" &&
        python3 "$here/summary.py" "$out" >"$out.summary" 2>&1 &&
        grep -q '^    latency one at a time: ' "$out.summary" &&
        [ "$(tail -1 "$out.summary")" = "$last" ]; then
        echo "ok 5 - a timing-only failure (every node past a 5 ms deadline) exits 0; its row, the closing line and the summary name it"
    else
        echo "not ok 5 - timing-only failure: exit $rc, or the failure is not named"
        sed 's/^/# /' "$out.log" "$out.summary" 2>/dev/null
    fi
    rm -f "$out.summary"
fi
# Correctness: the contention rows without their lock must lose updates, and that fails the run.
"$bench" --nodes "$(IFS=,; echo "${servers_urls[*]:2:3}")" --scenario contention --duration 0.3 \
    --node-timeout 2000 --break-lock >"$out.log" 2>&1
rc=$?
lost_re='contention: [a-z]+ lock, [0-9]+ workers: [1-9][0-9]* lost updates'
if [ "$rc" = 1 ] && grep -Eq "^CORRECTNESS FAILURE: $lost_re\$" "$out.log" &&
    tail -1 "$out.log" | grep -Eq "^FAILED: [1-9][0-9]* correctness checks? \\($lost_re\\)"; then
    echo "ok 6 - a correctness failure (--break-lock: lost updates) exits 1, named in its row and the closing line"
else
    echo "not ok 6 - correctness failure: exit $rc, or not named"
    sed 's/^/# /' "$out.log"
fi
