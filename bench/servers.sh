# SPDX-License-Identifier: MIT
# bench/servers.sh - sourced by bench/run, the bench smoke test and bench/clusters.sh: start N
# local redis-server instances (127.0.0.1, free ports, no persistence) in a temp dir, or N Redis
# Clusters of M masters each, and stop them by pid.
#
#   servers_start N [CERTS]  sets servers_urls (array), servers_pids (array), servers_dir; with
#                       CERTS (a directory from redlock-bench-certs) each server also listens for
#                       TLS on a second port, and servers_tls_urls (array) names those. Each
#                       server must answer as the process started (its process_id); one that
#                       does not (its port taken meanwhile) makes it start them all again on
#                       other ports, three attempts in all; then it returns 1
#   servers_stop        SIGCONT + SIGKILL every pid started, reap, remove the dir (idempotent)
#   clusters_start N M  N clusters of M masters each, no replicas (N x M servers with
#                       --cluster-enabled yes): the 16384 slots split evenly over each cluster's
#                       masters (CLUSTER ADDSLOTSRANGE), the masters met (CLUSTER MEET), and
#                       cluster_state:ok on every server within CLUSTERS_WAIT_S (default 30)
#                       seconds; sets clusters_urls (array: one cluster://host:port?seed=...
#                       URL per cluster, naming all its masters), clusters_pids, clusters_dir.
#                       A server that does not start (its port taken meanwhile by another's
#                       process) makes it stop them all and start again on other ports, three
#                       attempts in all. Returns 1 with a message when that fails or the
#                       clusters are not ok in time (clusters_stop still stops what started)
#   clusters_stop       as servers_stop, for the clusters' servers (idempotent)

servers_urls=()
servers_tls_urls=()
servers_pids=()
servers_dir=""

# N distinct free loopback ports on one line (held open together while chosen, so distinct).
servers_free_ports() {
    python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# Wait (at most 10 s) until the server started as pid answers on port as itself (its
# process_id): a port that another's server took before ours bound it is never used. 0, or 2
# with its log's last lines on stderr.
servers_wait_ours() {
    local port="$1" pid="$2" log="$3"
    for _ in $(seq 200); do
        kill -0 "$pid" 2>/dev/null || break
        if timeout 5 redis-cli -h 127.0.0.1 -p "$port" info server 2>/dev/null | tr -d '\r' |
            grep -qx "process_id:$pid"; then
            return 0
        fi
        sleep 0.05
    done
    echo "redis-server (pid $pid) on port $port did not start:" >&2
    grep -v "^ *$" "$log" | tail -3 >&2
    return 2
}

# start_with_retries TRY STOP WHAT ARGS...: a port chosen free may be taken by another's process
# before a server binds it; then TRY ARGS... returns 2, every server started is stopped (STOP)
# and all start again on new ports, up to three attempts in all. TRY's 0 or 1 is returned.
start_with_retries() {
    local try="$1" stop="$2" what="$3" attempt rc
    shift 3
    for attempt in 1 2 3; do
        "$try" "$@"
        rc=$?
        [ "$rc" = 2 ] || return "$rc"
        "$stop"
        [ "$attempt" -lt 3 ] && echo "$what: starting again on other ports" >&2
    done
    return 1
}

servers_start() {
    start_with_retries servers_try servers_stop servers "$@"
}

# One attempt of servers_start: 0, or 2 (said) when a server did not start.
servers_try() {
    local n="$1" certs="${2:-}" port
    servers_dir="$(mktemp -d)"
    local ports total="$n"
    [ -n "$certs" ] && total=$((2 * n))
    read -r -a ports < <(servers_free_ports "$total")
    local tls_ports=("${ports[@]:$n}")
    ports=("${ports[@]:0:$n}")
    local i=0
    for port in "${ports[@]}"; do
        mkdir -p "$servers_dir/$port"
        local tls=()
        if [ -n "$certs" ]; then
            tls=(--tls-port "${tls_ports[$i]}" --tls-cert-file "$certs/server.crt"
                 --tls-key-file "$certs/server.key" --tls-ca-cert-file "$certs/ca.crt"
                 --tls-auth-clients no)
            servers_tls_urls+=("rediss://127.0.0.1:${tls_ports[$i]}")
        fi
        redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
            --dir "$servers_dir/$port" --logfile "$servers_dir/$port/redis.log" \
            "${tls[@]}" --daemonize no >/dev/null 2>&1 &
        servers_pids+=("$!")
        servers_urls+=("redis://127.0.0.1:$port")
        i=$((i + 1))
    done
    i=0
    for port in "${ports[@]}"; do
        servers_wait_ours "$port" "${servers_pids[$i]}" "$servers_dir/$port/redis.log" || return 2
        i=$((i + 1))
    done
}

# stop_pids PID...: SIGCONT + SIGKILL each (ours, by pid only), then reap them.
stop_pids() {
    local pid
    for pid in "$@"; do
        kill -CONT "$pid" 2>/dev/null || true
        kill -KILL "$pid" 2>/dev/null || true
    done
    for pid in "$@"; do
        wait "$pid" 2>/dev/null || true
    done
}

servers_stop() {
    stop_pids "${servers_pids[@]}"
    servers_pids=()
    servers_urls=()
    servers_tls_urls=()
    [ -n "$servers_dir" ] && rm -rf "$servers_dir"
    servers_dir=""
}

clusters_urls=()
clusters_pids=()
clusters_dir=""

# redis-cli on a port of ours, with the reply's carriage returns removed; at most 5 s (redis-cli
# has no timeout of its own, and a port taken by another's program may never answer).
clusters_cli() {
    local port="$1"
    shift
    timeout 5 redis-cli -h 127.0.0.1 -p "$port" "$@" 2>&1 | tr -d '\r'
}

# Send the commands (one argument each) to the server on port in one redis-cli; 1, with what
# it answered, unless every one answered OK.
clusters_cli_ok() {
    local port="$1" replies want=""
    shift
    replies="$(printf '%s\n' "$@" | timeout 5 redis-cli -h 127.0.0.1 -p "$port" 2>&1 | tr -d '\r')"
    want="$(printf 'OK\n%.0s' "$@")"
    if [ "$replies" != "${want%$'\n'}" ]; then
        echo "cluster server on port $port answered '$replies' to: $*" >&2
        return 1
    fi
}

clusters_start() {
    start_with_retries clusters_try clusters_stop clusters "$@"
}

# One attempt of clusters_start: 0, 1 (said), or 2 (said) when a server did not start.
clusters_try() {
    local n="$1" masters="$2" total=$(($1 * $2)) ports i
    clusters_dir="$(mktemp -d)"
    # Each server's port, then each one's cluster bus port (given: port + 10000 may be taken or
    # out of range).
    read -r -a ports < <(servers_free_ports $((2 * total)))
    for ((i = 0; i < total; i++)); do
        local port="${ports[$i]}"
        mkdir -p "$clusters_dir/$port"
        redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
            --cluster-enabled yes --cluster-port "${ports[$((total + i))]}" \
            --cluster-config-file nodes.conf --dir "$clusters_dir/$port" \
            --logfile "$clusters_dir/$port/redis.log" --daemonize no </dev/null >/dev/null 2>&1 &
        clusters_pids+=("$!")
    done
    # Every server answers and is the one started here (its process_id): a port that another's
    # server took meanwhile is never sent a cluster command.
    for ((i = 0; i < total; i++)); do
        servers_wait_ours "${ports[$i]}" "${clusters_pids[$i]}" \
            "$clusters_dir/${ports[$i]}/redis.log" || return 2
    done
    # Cluster c's masters are servers c*M .. c*M+M-1; master m owns the m-th of M even slot
    # ranges. Distinct config epochs from the start spare the masters the collision dance (as
    # redis-cli --cluster create does).
    # One redis-cli per server for its commands (read from its input, one a line), each of which
    # must answer OK. Every server gets its epoch and slots before any meets another (a config
    # epoch can be set only while the server knows no other); then every master meets every
    # later one itself: gossip would introduce them too, but a second or so later.
    local c m j cmds
    for ((i = 0; i < total; i++)); do
        m=$((i % masters))
        clusters_cli_ok "${ports[$i]}" "CLUSTER SET-CONFIG-EPOCH $((m + 1))" \
            "CLUSTER ADDSLOTSRANGE $((m * 16384 / masters)) $(((m + 1) * 16384 / masters - 1))" ||
            return 1
    done
    for ((c = 0; c < n; c++)); do
        for ((m = 0; m + 1 < masters; m++)); do
            cmds=()
            for ((j = m + 1; j < masters; j++)); do
                i=$((c * masters + j))
                cmds+=("CLUSTER MEET 127.0.0.1 ${ports[$i]} ${ports[$((total + i))]}")
            done
            clusters_cli_ok "${ports[$((c * masters + m))]}" "${cmds[@]}" || return 1
        done
    done
    # Every server sees its whole cluster: all its masters, every slot, state ok (bounded).
    local deadline=$((SECONDS + ${CLUSTERS_WAIT_S:-30})) waiting
    while :; do
        waiting=""
        for ((i = 0; i < total; i++)); do
            local info
            info="$(clusters_cli "${ports[$i]}" cluster info)"
            if ! grep -qx cluster_state:ok <<<"$info" ||
                ! grep -qx "cluster_known_nodes:$masters" <<<"$info" ||
                ! grep -qx cluster_slots_assigned:16384 <<<"$info"; then
                waiting="${ports[$i]}"
                break
            fi
        done
        [ -z "$waiting" ] && break
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "clusters not ok after ${CLUSTERS_WAIT_S:-30} s: the server on port $waiting says:" >&2
            clusters_cli "$waiting" cluster info >&2
            return 1
        fi
        sleep 0.1
    done
    for ((c = 0; c < n; c++)); do
        local url="cluster://127.0.0.1:${ports[$((c * masters))]}" sep="?"
        for ((m = 1; m < masters; m++)); do
            url+="${sep}seed=127.0.0.1:${ports[$((c * masters + m))]}"
            sep="&"
        done
        clusters_urls+=("$url")
    done
}

clusters_stop() {
    stop_pids "${clusters_pids[@]}"
    clusters_pids=()
    clusters_urls=()
    [ -n "$clusters_dir" ] && rm -rf "$clusters_dir"
    clusters_dir=""
}
