# SPDX-License-Identifier: MIT
# bench/servers.sh - sourced by bench/run and the bench smoke test: start N local redis-server
# instances (127.0.0.1, free ports, no persistence) in a temp dir, and stop them by pid.
#
#   servers_start N [CERTS]  sets servers_urls (array), servers_pids (array), servers_dir; with
#                       CERTS (a directory from redlock-bench-certs) each server also listens for
#                       TLS on a second port, and servers_tls_urls (array) names those
#   servers_stop        SIGCONT + SIGKILL every pid started, reap, remove the dir (idempotent)

servers_urls=()
servers_tls_urls=()
servers_pids=()
servers_dir=""

servers_start() {
    local n="$1" certs="${2:-}" port
    servers_dir="$(mktemp -d)"
    local ports total="$n"
    [ -n "$certs" ] && total=$((2 * n))
    read -r -a ports < <(python3 - "$total" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
)
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
    for port in "${ports[@]}"; do
        for _ in $(seq 200); do
            redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1 && break
            sleep 0.05
        done
        if ! redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; then
            echo "redis-server on port $port did not start:" >&2
            cat "$servers_dir/$port/redis.log" >&2
            return 1
        fi
    done
}

servers_stop() {
    local pid
    for pid in "${servers_pids[@]}"; do
        kill -CONT "$pid" 2>/dev/null || true
        kill -KILL "$pid" 2>/dev/null || true
    done
    for pid in "${servers_pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    servers_pids=()
    servers_urls=()
    servers_tls_urls=()
    [ -n "$servers_dir" ] && rm -rf "$servers_dir"
    servers_dir=""
}
