#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/clusters.sh NODES MASTERS - the program redlock-bench's cluster scenario runs for each
# number of masters (--cluster-former PATH; bench/run --scenario cluster passes this one): forms
# NODES Redis Clusters of MASTERS masters each on loopback (clusters_start, servers.sh), prints
# their cluster:// URLs on one line, comma-separated, then waits until its standard input closes
# (redlock-bench closes it when it is done with them, or exits) and stops its servers by pid, also
# on Ctrl-C. Exit status 0; 1, with the reason on stderr and nothing on stdout, when the clusters
# could not be formed; 64 on bad arguments.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ $# -ne 2 ] || ! [[ "$1" =~ ^[1-9][0-9]*$ && "$2" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: bench/clusters.sh NODES MASTERS (both counts >= 1)" >&2
    exit 64
fi
. "$here/servers.sh"
trap 'clusters_stop' EXIT
trap 'exit 130' INT TERM
clusters_start "$1" "$2" || exit 1
(IFS=,; echo "${clusters_urls[*]}")
while read -r _; do :; done
exit 0
