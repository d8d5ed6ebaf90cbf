#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check.sh SRC_ROOT - the library as a distribution and other projects take it. Prints TAP.
#
#   1. meson install into a temporary prefix installs the library (soname libredlock.so.1),
#      the headers (redlock.h, redlock/quorum.h, redlock/sync.h), the pkg-config file, the
#      CMake package, the tool and its man page, and nothing else; the .so exports only
#      redlock_* symbols
#   2. a program built with nothing but `pkg-config --cflags --libs redlock` links and runs
#   3. the installed header compiles for C99 and C11 (-Wpedantic -Werror, with uv.h included
#      before it, after it, or not at all) and for C++17
#   4. the installed .so's ABI equals the committed baseline (abi/redlock.abi, abidiff, also
#      its "harmless" changes) and so do the header's constants (abi/constants.txt)
#   5. `man -l` renders the installed redlock(1), and the installed tool runs
#   6. a meson project that uses libredlock as a subproject with default options builds and
#      runs, and no tool, example, bench or proxy target was built for it
#   7. every source file (C, meson, shell and Python; not data, docs or fuzz corpora) says
#      "SPDX-License-Identifier: MIT" in its first three lines, as LICENSE and meson.build do
#   8. the install moved elsewhere whole, a CMake project finds it (find_package(redlock) in
#      config mode: no absolute path in the package), and builds and runs the program of 2
#      against redlock::redlock and against redlock::redlock_static (no libredlock.so needed);
#      a request for the next major version is refused, one for this version is exact
#   9. the moved install's tool runs with no LD_LIBRARY_PATH, its library found by its runpath
#      ($ORIGIN/../lib) in the moved libdir
#  11. a program using the test kit, built with nothing but `pkg-config --cflags --libs
#      redlock-sim`, runs a fleet (shared, and static with --static); the kit's .so links
#      libredlock.so.1 and exports only redlock_sim_* symbols; its ABI equals abi/redlock-sim.abi
#      (in 4) and a CMake project builds it on redlock::sim and redlock::sim_static (in 8)
#  10. installed with meson's default libdir (lib/<multiarch> on Debian), the pkg-config file and
#      the CMake package are where the README says; a program built from that prefix with
#      pkg-config alone runs, shared and static (libredlock.a with --static); hiredis is
#      private: no installed header includes it and `pkg-config --cflags redlock` names none of
#      its directories or flags
set -uo pipefail
src="$(cd "$1" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "1..11"

n=0
# check DESCRIPTION LOG: "ok" if the commands before it succeeded ($? == 0), else "not ok" and
# the log as TAP comments.
check() {
    local rc=$? desc="$1" log="$2"
    n=$((n + 1))
    if [ $rc -eq 0 ]; then
        echo "ok $n - $desc"
    else
        echo "not ok $n - $desc"
        sed 's/^/# /' "$log"
    fi
    return 0
}
skip() {
    n=$((n + 1))
    echo "ok $n - $1 # SKIP $2"
}

prefix="$tmp/prefix"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
export LD_LIBRARY_PATH="$prefix/lib"

# ---- 1. install ---------------------------------------------------------------------------
log="$tmp/install.log"
installed_ok=1
{
    meson setup "$tmp/b" "$src" -Dtests=false -Dexamples=false -Dbench=false -Dman=enabled \
        --prefix="$prefix" --libdir=lib &&
        ninja -C "$tmp/b" install &&
        (cd "$prefix" && find . \( -type f -o -type l \) | sort) >"$tmp/files" &&
        diff -u - "$tmp/files" <<'FILES' &&
./bin/redlock
./include/redlock.h
./include/redlock/quorum.h
./include/redlock/sim.h
./include/redlock/sync.h
./lib/cmake/redlock/redlockConfig.cmake
./lib/cmake/redlock/redlockConfigVersion.cmake
./lib/libredlock-sim.a
./lib/libredlock-sim.so
./lib/libredlock-sim.so.1
./lib/libredlock-sim.so.1.0.0
./lib/libredlock.a
./lib/libredlock.so
./lib/libredlock.so.1
./lib/libredlock.so.1.0.0
./lib/pkgconfig/redlock-sim.pc
./lib/pkgconfig/redlock.pc
./share/man/man1/redlock.1
FILES
        objdump -p "$prefix/lib/libredlock.so.1.0.0" | grep -E 'SONAME +libredlock\.so\.1$' &&
        ! nm -D --defined-only "$prefix/lib/libredlock.so" | grep -E ' T ' | grep -v ' redlock_'
} >"$log" 2>&1 || installed_ok=0
[ $installed_ok = 1 ]
check "meson install: library (soname libredlock.so.1), the test kit, headers, pkg-config, CMake package, tool, man page; only redlock_ symbols exported" "$log"

if [ $installed_ok = 0 ]; then
    for what in "pkg-config consumer" "header for C99, C11, C++17" "ABI against abi/redlock.abi" \
        "man page" "meson subproject" "SPDX lines" "CMake consumer" "the tool's runpath" \
        "default libdir, hiredis private" "the test kit with pkg-config"; do
        n=$((n + 1))
        echo "not ok $n - $what # the install failed"
    done
    exit 0
fi

# ---- 2. a consumer with pkg-config only -----------------------------------------------------
cat >"$tmp/user.c" <<'C'
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <uv.h>
#include <redlock.h>

static void on_closed(redlock_client *client, void *data)
{
    (void)client;
    *(int *)data = 1;
}

int main(void)
{
    redlock_round r;
    if (redlock_round_init(&r, 3, 1000, 0.01, 0, 0) != 0)
        return 1;
    redlock_round_vote(&r, 0, REDLOCK_VOTE_YES, 100);
    if (redlock_round_vote(&r, 1, REDLOCK_VOTE_YES, 200) != REDLOCK_ROUND_WON)
        return 2;
    if (strcmp(redlock_err_name(REDLOCK_EBUSY), "REDLOCK_EBUSY") != 0)
        return 3;
    /* A client on the program's own libuv loop (pkg-config's Requires: libuv brings it). */
    uv_loop_t loop;
    uv_loop_init(&loop);
    redlock_options opts;
    redlock_options_init(&opts);
    opts.ttl_ms = 5000;
    const char *urls[] = {"redis://127.0.0.1:1"};
    redlock_client *client;
    char err[256];
    if (redlock_client_new(&loop, urls, 1, &opts, &client, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return 4;
    }
    if (redlock_client_loop(client) != &loop)
        return 5;
    int closed = 0;
    redlock_client_close(client, on_closed, &closed);
    uv_run(&loop, UV_RUN_DEFAULT);
    if (!closed || uv_loop_close(&loop) != 0)
        return 6;
    printf("libredlock %s\n", redlock_version_string());
    return 0;
}
C
log="$tmp/consumer.log"
{
    cc -std=c11 -Wall -Wextra -Wpedantic -Werror "$tmp/user.c" -o "$tmp/user" \
        $(pkg-config --cflags --libs redlock) &&
        "$tmp/user" | grep -F "libredlock $(pkg-config --modversion redlock)"
} >"$log" 2>&1
check "a program built with only pkg-config --cflags --libs redlock links and runs" "$log"

# ---- 11. the test kit with pkg-config ---------------------------------------------------------
# Run here, beside the library's consumer; numbered last, as it came last.
cat >"$tmp/kit_user.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <redlock.h>
#include <redlock/sim.h>

static void acquired(redlock_lock *lock, int status, const redlock_result *result, void *data)
{
    (void)result;
    *(int *)data = status == 0 ? 1 : -1;
    redlock_lock_free(lock);
}

int main(void)
{
    redlock_sim_options o;
    redlock_sim_options_init(&o);
    o.seed = 42;
    redlock_sim *sim;
    if (redlock_sim_new(&o, &sim) != 0)
        return 1;
    redlock_client *client;
    if (redlock_sim_client_new(sim, NULL, &client, NULL) != 0)
        return 2;
    int got = 0;
    if (redlock_acquire(client, "job", 3, 1000, NULL, acquired, &got) != 0)
        return 3;
    redlock_sim_run_for(sim, 100000);
    if (got != 1 || redlock_sim_verdict(sim, NULL, 0) != 0 ||
        strstr(redlock_sim_trace(sim, NULL), "n4 ran") == NULL)
        return 4;
    redlock_sim_free(sim);
    printf("kit ok\n");
    return 0;
}
C
log="$tmp/kit.log"
{
    cc -std=c11 -Wall -Wextra -Wpedantic -Werror "$tmp/kit_user.c" -o "$tmp/kit_user" \
        $(pkg-config --cflags --libs redlock-sim) &&
        "$tmp/kit_user" | grep -Fx "kit ok" &&
        cc -std=c11 -Wall -Wextra -Wpedantic -Werror "$tmp/kit_user.c" -o "$tmp/kit_user_s" \
            $(pkg-config --cflags redlock-sim) "$prefix/lib/libredlock-sim.a" \
            "$prefix/lib/libredlock.a" $(pkg-config --static --libs redlock-sim |
                sed 's/-lredlock-sim//; s/-lredlock//') &&
        ! readelf -d "$tmp/kit_user_s" | grep -F libredlock &&
        env -u LD_LIBRARY_PATH "$tmp/kit_user_s" | grep -Fx "kit ok" &&
        pkg-config --print-requires redlock-sim | grep -Fx "redlock = $(pkg-config --modversion redlock)" &&
        readelf -d "$prefix/lib/libredlock-sim.so.1" | grep -F '[libredlock.so.1]' &&
        objdump -p "$prefix/lib/libredlock-sim.so.1" | grep -E 'SONAME +libredlock-sim\.so\.1$' &&
        ! nm -D --defined-only "$prefix/lib/libredlock-sim.so" | grep -E ' T ' | grep -v ' redlock_sim_'
} >"$log" 2>&1
kit_rc=$?
kit_log="$log"

# ---- 3. the header, for C99, C11 and C++17 -------------------------------------------------
cat >"$tmp/header.c" <<'C'
#if defined(UV_FIRST) || defined(UV_AFTER)
#define _POSIX_C_SOURCE 200809L
#endif
#ifdef UV_FIRST
#include <uv.h>
#endif
#include <redlock.h>
#ifdef UV_AFTER
#include <uv.h>
#endif

#if defined(UV_FIRST) || defined(UV_AFTER)
/* uv.h's uv_loop_t and the header's struct uv_loop_s are one type. */
uv_loop_t *loop_of(const redlock_client *client);
uv_loop_t *loop_of(const redlock_client *client)
{
    return redlock_client_loop(client);
}
#endif

int main(void)
{
    redlock_options opts;
    redlock_options_init(&opts);
    redlock_lock_opts lock_opts;
    redlock_lock_opts_init(&lock_opts);
    redlock_auto_opts auto_opts;
    redlock_auto_opts_init(&auto_opts);
    return opts.size == sizeof(opts) && lock_opts.retry_count == -1 ? 0 : 1;
}
C
log="$tmp/header.log"
header_ok=1
# uv.h from a copy, as a program whose libuv lives outside the system's include directories
# has it: compilers keep quiet about what a system header does (a typedef seen twice, say).
uv_include="$(pkg-config --variable=includedir libuv)"
mkdir -p "$tmp/uv" && cp -r "$uv_include/uv.h" "$uv_include/uv" "$tmp/uv/" || header_ok=0
cflags="-I$tmp/uv $(pkg-config --cflags redlock)"
libs="$(pkg-config --libs redlock)"
for std in c99 c11; do
    for uv in NONE UV_FIRST UV_AFTER; do
        echo "== -std=$std $uv" >>"$log"
        cc -std=$std -Wall -Wextra -Wpedantic -Werror -D$uv -x c "$tmp/header.c" \
            -o "$tmp/header" $cflags $libs >>"$log" 2>&1 && "$tmp/header" >>"$log" 2>&1 ||
            header_ok=0
    done
done
for uv in NONE UV_FIRST; do
    echo "== c++ -std=c++17 $uv" >>"$log"
    c++ -std=c++17 -Wall -Wextra -Wpedantic -Werror -D$uv -x c++ "$tmp/header.c" \
        -o "$tmp/header" $cflags $libs >>"$log" 2>&1 && "$tmp/header" >>"$log" 2>&1 ||
        header_ok=0
done
[ $header_ok = 1 ]
check "the installed header compiles for C99 and C11 (-Wpedantic -Werror; uv.h before, after, none) and C++17" "$log"

# ---- 4. the ABI against the baseline ---------------------------------------------------------
log="$tmp/abi.log"
if [ "$(uname -m)" != x86_64 ]; then
    skip "ABI against abi/redlock.abi" "the baseline is for x86_64"
elif ! command -v abidw >/dev/null || ! command -v abidiff >/dev/null; then
    echo "abidw and abidiff are missing: install abigail-tools (tools/ensure-deps test does)" >"$log"
    false
    check "ABI against abi/redlock.abi" "$log"
else
    # abidiff leaves out the changes it calls harmless (an enumerator added, say) unless asked
    # for them alone with --harmless: the baseline is an exact record, so both runs must be
    # clean. The constants programs compile in (error codes, limits) are checked beside it.
    {
        "$src/abi/dump.sh" "$prefix/lib/libredlock.so.1" "$tmp/new.abi" &&
            abidiff --suppressions "$src/abi/redlock.suppr" "$src/abi/redlock.abi" "$tmp/new.abi" &&
            abidiff --harmless --suppressions "$src/abi/redlock.suppr" "$src/abi/redlock.abi" \
                "$tmp/new.abi" &&
            cc -std=c99 $cflags "$src/abi/constants.c" -o "$tmp/constants" &&
            "$tmp/constants" >"$tmp/constants.txt" &&
            diff -u "$src/abi/constants.txt" "$tmp/constants.txt" &&
            "$src/abi/dump.sh" "$prefix/lib/libredlock-sim.so.1" "$tmp/new-sim.abi" &&
            abidiff --suppressions "$src/abi/redlock.suppr" "$src/abi/redlock-sim.abi" \
                "$tmp/new-sim.abi" &&
            abidiff --harmless --suppressions "$src/abi/redlock.suppr" \
                "$src/abi/redlock-sim.abi" "$tmp/new-sim.abi"
    } >"$log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || echo "If the change is intended: ninja -C build abi-update, and commit abi/ with it (docs/api.md, \"ABI policy\")." >>"$log"
    [ $rc -eq 0 ]
    check "ABI of the installed libredlock.so.1, the header's constants and libredlock-sim.so.1 equal abi/ (abidiff)" "$log"
fi

# ---- 5. the man page and the tool ------------------------------------------------------------
log="$tmp/man.log"
{
    MANWIDTH=80 man -l "$prefix/share/man/man1/redlock.1" >"$tmp/man.txt" 2>"$tmp/man.err" &&
        ! [ -s "$tmp/man.err" ] &&
        grep -q '^NAME' "$tmp/man.txt" && grep -q '^EXIT STATUS' "$tmp/man.txt" &&
        grep -q 'redlock - hold a distributed lock' "$tmp/man.txt" &&
        "$prefix/bin/redlock" --version | grep -F "libredlock $(pkg-config --modversion redlock)"
} >"$log" 2>&1
cat "$tmp/man.err" >>"$log" 2>/dev/null
check "man -l renders the installed redlock(1) without warnings; the installed tool runs" "$log"

# ---- 6. as a subproject with default options ------------------------------------------------
mkdir -p "$tmp/sp/subprojects"
ln -s "$src" "$tmp/sp/subprojects/redlock"
cp "$tmp/user.c" "$tmp/sp/user.c"
cat >"$tmp/sp/meson.build" <<'M'
project('user', 'c', default_options: ['c_std=c11'])
subproject('redlock') # default options: the library only
executable('user', 'user.c', dependencies: dependency('redlock'))
M
log="$tmp/subproject.log"
{
    env -u PKG_CONFIG_PATH -u LD_LIBRARY_PATH meson setup "$tmp/sp/b" "$tmp/sp" &&
        ninja -C "$tmp/sp/b" &&
        env -u LD_LIBRARY_PATH "$tmp/sp/b/user" &&
        meson introspect --targets "$tmp/sp/b" >"$tmp/targets.json" &&
        python3 - "$tmp/targets.json" <<'PY'
import json, sys
targets = json.load(open(sys.argv[1]))
ours = sorted((t["name"], t["type"]) for t in targets if t.get("subproject") == "redlock")
print("subproject targets:", ours)
allowed = {("redlock", "shared library"), ("redlock", "static library")}
extra = [t for t in ours if t not in allowed]
sys.exit(1 if extra or not ours else 0)
PY
    [ -z "$(find "$tmp/sp/b/subprojects" -type f \( -name redlock -o -name redlock-bench \
        -o -name redlock-proxy -o -name minimal -o -name counter -o -name async_lock \
        -o -name 'test-*' \))" ]
} >"$log" 2>&1
check "a meson subproject with default options builds and runs; only the library is built for it" "$log"

# ---- 7. SPDX lines ---------------------------------------------------------------------------
log="$tmp/spdx.log"
{
    if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
        git -C "$src" ls-files
    else
        (cd "$src" && find . -type f -not -path './.git/*' -not -path './build*' | sed 's|^\./||')
    fi | grep -E '(\.(c|h|sh|py)|(^|/)meson\.build|^meson_options\.txt|^(\.ci|test|bench)/run|^test/mutants/run|^tools/ensure-deps|^tools/spdx-add)$' |
        grep -v '/corpus/' | while read -r f; do
        head -n 3 "$src/$f" | grep -q 'SPDX-License-Identifier: MIT' || echo "no SPDX line: $f"
    done | tee "$tmp/spdx.missing"
    [ ! -s "$tmp/spdx.missing" ]
} >"$log" 2>&1
check "every source file carries an SPDX-License-Identifier: MIT line" "$log"

# ---- 8. a CMake consumer, of the install moved whole ---------------------------------------
# Moved, the install is found only if the package computes every path from its own place.
moved="$tmp/moved"
mv "$prefix" "$moved"
mkdir -p "$tmp/cm"
cp "$tmp/user.c" "$tmp/cm/user.c"
cp "$tmp/kit_user.c" "$tmp/cm/kit_user.c"
cat >"$tmp/cm/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.13)
project(user C)
find_package(redlock ${NEXT_MAJOR} QUIET)
if(redlock_FOUND)
  message(FATAL_ERROR "find_package(redlock ${NEXT_MAJOR}) accepted ${redlock_VERSION}")
endif()
find_package(redlock ${VERSION} EXACT REQUIRED CONFIG)
foreach(kind IN ITEMS shared static)
  add_executable(user_${kind} user.c)
  set_target_properties(user_${kind} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  target_compile_options(user_${kind} PRIVATE -Wall -Wextra -Wpedantic -Werror)
endforeach()
target_link_libraries(user_shared PRIVATE redlock::redlock)
target_link_libraries(user_static PRIVATE redlock::redlock_static)
foreach(kind IN ITEMS shared static)
  add_executable(kit_${kind} kit_user.c)
  set_target_properties(kit_${kind} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  target_compile_options(kit_${kind} PRIVATE -Wall -Wextra -Wpedantic -Werror)
endforeach()
target_link_libraries(kit_shared PRIVATE redlock::sim)
target_link_libraries(kit_static PRIVATE redlock::sim_static)
CMAKE
version="$(sed -n 's/^Version: //p' "$moved/lib/pkgconfig/redlock.pc")"
log="$tmp/cmake.log"
if ! command -v cmake >/dev/null; then
    echo "cmake is missing: install it (tools/ensure-deps test does)" >"$log"
    false
else
    {
        echo "version $version" &&
            ! grep -rnF "$prefix" "$moved/lib/cmake" &&
            env -u LD_LIBRARY_PATH cmake -G Ninja -S "$tmp/cm" -B "$tmp/cm/b" \
                -DCMAKE_PREFIX_PATH="$moved" -DVERSION="$version" \
                -DNEXT_MAJOR=$((${version%%.*} + 1)) &&
            cmake --build "$tmp/cm/b" &&
            env -u LD_LIBRARY_PATH "$tmp/cm/b/user_shared" | grep -Fx "libredlock $version" &&
            "$tmp/cm/b/user_static" | grep -Fx "libredlock $version" &&
            readelf -d "$tmp/cm/b/user_shared" | grep -F '[libredlock.so.1]' &&
            ! readelf -d "$tmp/cm/b/user_static" | grep -F libredlock &&
            env -u LD_LIBRARY_PATH "$tmp/cm/b/kit_shared" | grep -Fx "kit ok" &&
            "$tmp/cm/b/kit_static" | grep -Fx "kit ok" &&
            readelf -d "$tmp/cm/b/kit_shared" | grep -F '[libredlock-sim.so.1]' &&
            ! readelf -d "$tmp/cm/b/kit_static" | grep -F libredlock
    } >"$log" 2>&1
fi
check "a CMake project finds the moved install (find_package(redlock) $version EXACT, not $((${version%%.*} + 1))) and runs a program on redlock::redlock and on redlock::redlock_static, and one of the test kit on redlock::sim and redlock::sim_static" "$log"

# ---- 9. the tool's runpath ------------------------------------------------------------------
log="$tmp/runpath.log"
{
    runpath="$(readelf -d "$moved/bin/redlock" | grep -E '\((RUNPATH|RPATH)\)')"
    found="$(env -u LD_LIBRARY_PATH ldd "$moved/bin/redlock" | grep -F libredlock)"
    echo "runpath: ${runpath:-none}; found: $found"
    grep -qF '[$ORIGIN/../lib]' <<<"$runpath" &&
        grep -qF "libredlock.so.1 => $moved/bin/../lib/libredlock.so.1" <<<"$found" &&
        env -u LD_LIBRARY_PATH "$moved/bin/redlock" --version | grep -F "libredlock $version"
} >"$log" 2>&1
check "the moved install's tool runs with no LD_LIBRARY_PATH: runpath \$ORIGIN/../lib finds its libredlock.so.1" "$log"
mv "$moved" "$prefix"

# ---- 10. meson's default libdir; hiredis private ----------------------------------------------
# The libdir meson picks for a prefix on this system (lib/x86_64-linux-gnu on Debian), from a
# project with no language (nothing compiled); then the same build reinstalled there.
log="$tmp/libdir.log"
p2="$tmp/prefix2"
mkdir -p "$tmp/empty"
echo "project('empty')" >"$tmp/empty/meson.build"
{
    meson setup "$tmp/empty/b" "$tmp/empty" --prefix="$p2" >/dev/null &&
        libdir="$(meson introspect --buildoptions "$tmp/empty/b" |
            python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "libdir"][0])')" &&
        echo "meson's default libdir here: $libdir" &&
        meson configure "$tmp/b" --prefix="$p2" --libdir="$libdir" &&
        ninja -C "$tmp/b" install >/dev/null &&
        ls "$p2/$libdir/pkgconfig/redlock.pc" "$p2/$libdir/cmake/redlock/redlockConfig.cmake" &&
        ! grep -rn 'include.*hiredis' "$p2/include" &&
        cflags="$(env PKG_CONFIG_PATH="$p2/$libdir/pkgconfig" pkg-config --cflags redlock)" &&
        echo "pkg-config --cflags redlock: $cflags" &&
        hiredis_cflags="$(pkg-config --cflags hiredis)" && echo "hiredis' own: $hiredis_cflags" &&
        ! grep -qi hiredis <<<"$cflags" &&
        ! for flag in $hiredis_cflags; do grep -F -- "$flag" <<<"$cflags"; done | grep -q . &&
        env PKG_CONFIG_PATH="$p2/$libdir/pkgconfig" pkg-config --static --libs redlock |
            grep -- '-lhiredis' &&
        cc -std=c11 -Wall -Wextra -Wpedantic -Werror "$tmp/user.c" -o "$tmp/user2" \
            $(env PKG_CONFIG_PATH="$p2/$libdir/pkgconfig" pkg-config --cflags --libs redlock) &&
        env LD_LIBRARY_PATH="$p2/$libdir" "$tmp/user2" | grep -F "libredlock $version" &&
        cc -std=c11 "$tmp/user.c" -o "$tmp/user2s" $cflags "$p2/$libdir/libredlock.a" \
            $(env PKG_CONFIG_PATH="$p2/$libdir/pkgconfig" pkg-config --static --libs redlock |
                sed 's/-lredlock//') &&
        ! readelf -d "$tmp/user2s" | grep -F libredlock &&
        env -u LD_LIBRARY_PATH "$tmp/user2s" | grep -F "libredlock $version"
} >"$log" 2>&1
check "meson's default libdir: P/<libdir>/pkgconfig and P/<libdir>/cmake/redlock; a pkg-config program runs shared and static; no hiredis in the headers or in --cflags" "$log"

(exit $kit_rc)
check "the test kit: a program built with pkg-config --cflags --libs redlock-sim runs a fleet, shared and static; libredlock-sim.so.1 links libredlock.so.1, exports only redlock_sim_*" "$kit_log"
