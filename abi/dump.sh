#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# abi/dump.sh LIB OUT - write the ABI of the shared object LIB (built with debug info) as
# libabigail XML to OUT: every exported function, and the types include/ defines; types the
# library defines elsewhere (redlock_client's members, say) stay opaque, as they are to callers.
# The same command writes the baseline (abi/redlock.abi, through `ninja -C build abi-update`)
# and the dump that test/packaging/check.sh compares with it, so both see the same things.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -eq 2 ] || { echo "usage: abi/dump.sh LIB OUT" >&2; exit 64; }
exec abidw --no-corpus-path --no-comp-dir-path --no-show-locs --type-id-style hash \
    --headers-dir "$here/../include" --drop-private-types \
    --suppressions "$here/redlock.suppr" --out-file "$2" "$1"
