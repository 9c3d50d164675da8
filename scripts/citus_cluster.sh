#!/usr/bin/env bash
# A private Citus cluster on loopback for the Citus test layer and benchmark: a
# coordinator and two workers, each a scripts/pgcluster.sh cluster with Citus preloaded, in
# DIR/coordinator, DIR/worker1 and DIR/worker2. Databases and node registration are the
# caller's (tests/integration/citus.py): Citus is set up per database.
#
#   scripts/citus_cluster.sh start DIR   start the three nodes (initdb if needed); prints
#                                        "coordinator URI", then "worker1 URI", "worker2 URI"
#   scripts/citus_cluster.sh stop DIR    stop them
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cmd="${1:-}"; dir="${2:-}"
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
NODES=(coordinator worker1 worker2)
case "$cmd" in
  start)
    for n in "${NODES[@]}"; do
      # max_prepared_transactions: Citus commits multi-shard writes with two-phase commit;
      # small memory settings: three servers share the machine
      uri="$(PGCLUSTER_OPTS="-c shared_preload_libraries=citus -c max_prepared_transactions=50 -c shared_buffers=128MB -c max_connections=80 -c maintenance_work_mem=128MB ${PGCLUSTER_OPTS:-}" \
             "$ROOT/scripts/pgcluster.sh" start "$dir/$n")"
      echo "$n $uri"
    done
    ;;
  stop)
    for n in "${NODES[@]}"; do
      [ -d "$dir/$n" ] && "$ROOT/scripts/pgcluster.sh" stop "$dir/$n" || true
    done
    ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
