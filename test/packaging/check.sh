#!/usr/bin/env bash
# check.sh SRC_ROOT - the library works installed (header + pkg-config) and as a meson
# subproject. Prints TAP.
set -uo pipefail
src="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "1..2"

cat >"$tmp/user.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <redlock.h>
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
    printf("%s\n", redlock_version_string());
    return 0;
}
C

# 1. Installed: the header compiles under strict C11 and pkg-config links it.
if meson setup "$tmp/b" "$src" -Dtests=false --prefix="$tmp/prefix" --libdir=lib >"$tmp/log" 2>&1 &&
    ninja -C "$tmp/b" install >>"$tmp/log" 2>&1 &&
    export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" &&
    cc -std=c11 -Wall -Wextra -Wpedantic -Werror "$tmp/user.c" -o "$tmp/user" \
        $(pkg-config --cflags --libs redlock) >>"$tmp/log" 2>&1 &&
    LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/user" >>"$tmp/log" 2>&1 &&
    ! nm -D --defined-only "$tmp/prefix/lib/libredlock.so" | grep -E ' T ' | grep -v ' redlock_' >>"$tmp/log"
then
    echo "ok 1 - installed library, header and pkg-config (only redlock_ symbols exported)"
else
    echo "not ok 1 - installed library, header and pkg-config"
    sed 's/^/# /' "$tmp/log"
fi

# 2. As a subproject: dependency('redlock') finds the override.
mkdir -p "$tmp/sp/subprojects"
ln -s "$src" "$tmp/sp/subprojects/redlock"
cp "$tmp/user.c" "$tmp/sp/user.c"
cat >"$tmp/sp/meson.build" <<'M'
project('user', 'c', default_options: ['c_std=c11'])
subproject('redlock', default_options: ['tests=false'])
executable('user', 'user.c', dependencies: dependency('redlock'))
M
if meson setup "$tmp/sp/b" "$tmp/sp" >"$tmp/log2" 2>&1 && ninja -C "$tmp/sp/b" >>"$tmp/log2" 2>&1 &&
    "$tmp/sp/b/user" >>"$tmp/log2" 2>&1
then
    echo "ok 2 - meson subproject"
else
    echo "not ok 2 - meson subproject"
    sed 's/^/# /' "$tmp/log2"
fi
