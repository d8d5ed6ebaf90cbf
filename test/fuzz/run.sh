#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test/fuzz/run.sh - build the libFuzzer targets with clang and run each for a while.
#
#   test/fuzz/run.sh [--merge] [SECONDS] [TARGET...]   default: 60 s each, every target, side by side
#
# Targets: url (parse + redact), reply (reply -> vote of each round type), quorum (the core's
# vote sequences), handshake (the connection handshake and INFO's run_id), args (the redlock
# tool's command line), cluster (a cluster node's slot map from CLUSTER SHARDS / SLOTS replies,
# MOVED / ASK), reader (the bounded reply reader's limits). Each (fuzz_<name>.c) is compiled with -fsanitize=fuzzer,address,undefined
# together with the sources it needs into a temp dir, then all run at once for SECONDS each.
#
# The corpus accumulates: test/fuzz/corpus/<name>/ is committed, minimized, and every run starts
# from it. A plain run (CI's) never writes it; it ends each target's line with how many inputs
# of new coverage it found. --merge adds them: after the run, each committed corpus is replaced by
# a minimized merge (libFuzzer -merge=1) of itself and the run's finds, ready to commit. A crash
# leaves its reproducer in $FUZZ_ARTIFACTS (default: $TMPDIR/redlock-fuzz-artifacts) and its log
# on stderr; once fixed, commit the reproducer as corpus/<name>/regression-<what> so it is run
# forever. Reproduce a crash with: <temp>/fuzz_<name> <artifact>
#
# Prints TAP: one "ok"/"not ok" per target ("# SKIP" without clang). Needs clang and its
# libFuzzer runtime (on Debian libclang-rt-dev; tools/ensure-deps test installs both).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
merge=0
if [ "${1:-}" = --merge ]; then
    merge=1
    shift
fi
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(url reply quorum handshake args cluster reader)

cc="${FUZZ_CC:-clang}"
work="$(mktemp -d "${TMPDIR:-/tmp}/redlock-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT
artifacts="${FUZZ_ARTIFACTS:-${TMPDIR:-/tmp}/redlock-fuzz-artifacts}"
mkdir -p "$artifacts"

echo "1..${#targets[@]}"
if ! command -v "$cc" >/dev/null; then
    for i in "${!targets[@]}"; do echo "ok $((i + 1)) - ${targets[$i]} # SKIP no $cc"; done
    exit 0
fi

flags=(-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -Wall -Wextra
       -fsanitize=address,undefined -fno-sanitize-recover=undefined
       -I"$root/include" $(for d in "$root"/lib/*/; do echo "-I$d"; done)
       $(pkg-config --cflags libuv hiredis))
libs=($(pkg-config --libs libuv hiredis) -lpthread -lm)

# The Lua scripts as C (scripts_gen.c/.h), generated as lib/core/meson.build does, in its order.
scripts=($(sed -n "/^lua_scripts = files(/,/^)/p" "$root/lib/core/meson.build" |
           grep -o "'lua/[a-z_]*\.lua'" | tr -d "'"))
if ! python3 "$root/lib/core/lua/generate.py" "$work/scripts_gen.c" "$work/scripts_gen.h" \
    "${scripts[@]/#/$root/lib/core/}" 2>"$work/build.log"; then
    cat "$work/build.log" >&2
    for i in "${!targets[@]}"; do echo "not ok $((i + 1)) - ${targets[$i]} # build failed"; done
    exit 1
fi
flags+=(-I"$work")

# The library once, instrumented for coverage (fuzzer-no-link) and the sanitizers.
objs=()
for src in "$root"/lib/*/*.c "$work/scripts_gen.c"; do
    obj="$work/$(basename "$src" .c).o"
    if ! "$cc" "${flags[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj" 2>"$work/build.log"; then
        cat "$work/build.log" >&2
        for i in "${!targets[@]}"; do echo "not ok $((i + 1)) - ${targets[$i]} # build failed"; done
        exit 1
    fi
    objs+=("$obj")
done

# Build every target, then run them side by side (each for SECONDS of wall time), so a CI run
# costs SECONDS once rather than once per target.
status=0
built=()
for i in "${!targets[@]}"; do
    t="${targets[$i]}"
    extra=()
    [ "$t" = args ] && extra=(-I"$root/tools" "$root/tools/args.c")
    if ! "$cc" "${flags[@]}" -fsanitize=fuzzer "${extra[@]}" "$here/fuzz_$t.c" "${objs[@]}" \
        "${libs[@]}" -o "$work/fuzz_$t" 2>"$work/build-$t.log"; then
        cat "$work/build-$t.log" >&2
        built+=(0)
        continue
    fi
    built+=(1)
    mkdir -p "$work/corpus-$t"
    ASAN_OPTIONS="detect_leaks=1:abort_on_error=0" \
        UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
        "$work/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
        -print_final_stats=1 -artifact_prefix="$artifacts/$t-" \
        "$work/corpus-$t" "$here/corpus/$t" >"$work/run-$t.log" 2>&1 &
    echo $! >"$work/pid-$t"
done
start=$SECONDS
for i in "${!targets[@]}"; do
    t="${targets[$i]}"
    n=$((i + 1))
    if [ "${built[$i]}" = 0 ]; then
        echo "not ok $n - $t # build failed"
        status=1
        continue
    fi
    if wait "$(cat "$work/pid-$t")"; then
        runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/run-$t.log" | grep -o '[0-9]*$')"
        found="$(find "$work/corpus-$t" -type f | wc -l)"
        kept=""
        if [ "$merge" = 1 ]; then
            # Minimize the committed corpus together with the finds, then put it in place.
            mkdir -p "$work/merged-$t"
            if "$work/fuzz_$t" -merge=1 -max_len=4096 "$work/merged-$t" "$here/corpus/$t" \
                "$work/corpus-$t" >"$work/merge-$t.log" 2>&1; then
                before="$(find "$here/corpus/$t" -type f | wc -l)"
                find "$here/corpus/$t" -type f ! -name 'regression-*' ! -name 'seed*' -delete
                cp -n "$work/merged-$t"/* "$here/corpus/$t/" 2>/dev/null || true
                kept=", corpus $before -> $(find "$here/corpus/$t" -type f | wc -l) inputs"
            else
                tail -20 "$work/merge-$t.log" >&2
                kept=", merge failed (see stderr)"
            fi
        fi
        echo "ok $n - $t (${runs:-?} runs in ${seconds} s, $found inputs of new coverage$kept, $(( SECONDS - start )) s since start)"
    else
        tail -60 "$work/run-$t.log" >&2
        echo "not ok $n - $t (see stderr; reproducer in $artifacts/$t-*)"
        status=1
    fi
done
exit $status
