#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# abi/update.sh LIB CC... - rewrite the ABI baseline from the shared object LIB: abi/redlock.abi
# (abi/dump.sh) and abi/constants.txt (abi/constants.c compiled with CC). Run it through
# `ninja -C build abi-update` when a change of the ABI is intended, and commit the result with
# that change (abi/README.md).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -ge 2 ] || { echo "usage: abi/update.sh LIB CC..." >&2; exit 64; }
lib="$1"
shift
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$here/dump.sh" "$lib" "$here/redlock.abi"
"$@" -std=c99 -I"$here/../include" "$here/constants.c" -o "$tmp/constants"
"$tmp/constants" >"$here/constants.txt"
echo "abi/update.sh: wrote abi/redlock.abi and abi/constants.txt from $lib; review git diff abi/"
