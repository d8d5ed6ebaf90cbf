#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# abi/update.sh LIB KIT CC... - rewrite the ABI baseline from the shared object LIB: abi/redlock.abi
# (abi/dump.sh) and abi/constants.txt (abi/constants.c compiled with CC); and the test kit's from
# its shared object KIT: abi/redlock-sim.abi. Run it through
# `ninja -C build abi-update` when a change of the ABI is intended, and commit the result with
# that change (abi/README.md).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -ge 3 ] || { echo "usage: abi/update.sh LIB KIT CC..." >&2; exit 64; }
lib="$1"
kit="$2"
shift 2
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$here/dump.sh" "$lib" "$here/redlock.abi"
"$here/dump.sh" "$kit" "$here/redlock-sim.abi"
"$@" -std=c99 -I"$here/../include" "$here/constants.c" -o "$tmp/constants"
"$tmp/constants" >"$here/constants.txt"
echo "abi/update.sh: wrote abi/redlock.abi and abi/constants.txt from $lib, abi/redlock-sim.abi from $kit; review git diff abi/"
