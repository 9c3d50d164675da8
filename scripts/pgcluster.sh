#!/usr/bin/env bash
# A private PostgreSQL 15 cluster in a project folder: no system service, a free port, its
# socket inside the folder. Used by `make demo`, the integration tests and the benchmarks.
#
#   scripts/pgcluster.sh start DIR   initdb if needed, start if stopped; prints the libpq URI
#   scripts/pgcluster.sh stop DIR    fast shutdown (pg_ctl stop), never by killing processes
#   scripts/pgcluster.sh uri DIR     the libpq URI of a running cluster (database postgres)
#   scripts/pgcluster.sh status DIR  exit 0 when running
#   scripts/pgcluster.sh standby DIR PRIMARY_DIR
#                                    a streaming hot standby of the running cluster in PRIMARY_DIR
#                                    (pg_basebackup -R if DIR has no data yet); prints its URI
#
# As root the cluster runs as the `postgres` OS user (initdb refuses root); the superuser role
# inside is `postgres`, authentication is trust on the socket and on 127.0.0.1 only.
# PGCLUSTER_OPTS (e.g. "-c shared_buffers=2GB") is appended to the server options at start,
# after the defaults below, so it overrides them (used by the benchmarks).
set -euo pipefail

PGBIN="${PGBIN:-$(/usr/lib/postgresql/15/bin/pg_config --bindir)}"
cmd="${1:-}"; dir="${2:-}"; primary="${3:-}"
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop|uri|status DIR | standby DIR PRIMARY_DIR" >&2; exit 2; }
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
data="$dir/data"; sock="$dir/socket"; portfile="$dir/port"

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

running() { [ -f "$data/postmaster.pid" ] && as_owner "$PGBIN/pg_ctl" -D "$data" status >/dev/null 2>&1; }

uri() {
  local port; port="$(cat "$portfile")"
  # libpq URI with the socket directory as host (percent-encoded path).
  local enc; enc="$(printf '%s' "$sock" | sed 's|/|%2F|g')"
  echo "postgresql://postgres@${enc}:${port}/postgres"
}

free_port() {
  python3 - <<'PY'
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

port_free() {
  python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except (OSError, ValueError):
    sys.exit(1)
finally:
    s.close()
PY
}

# Accepting connections on its socket.
ready() {
  [ -f "$portfile" ] && as_owner "$PGBIN/pg_isready" -q -h "$sock" -p "$(cat "$portfile")" >/dev/null 2>&1
}

# A cluster that runs (or is starting or dying, e.g. just after kill -9 of its postmaster):
# wait until it accepts connections or is gone. Returns 0 when it runs.
settle() {
  running || return 1
  for _ in $(seq 1 120); do
    ready && return 0
    running || return 1
    sleep 0.5
  done
  running
}

launch() {
  # the port of the last start when it is still free: a standby's primary_conninfo names it
  port=""
  if [ -f "$portfile" ] && port_free "$(cat "$portfile")"; then port="$(cat "$portfile")"; fi
  [ -n "$port" ] || port="$(free_port)"
  # pgrx appends a Rust backtrace to error details when RUST_BACKTRACE is set: keep the
  # server's errors what users see on a production server.
  unset RUST_BACKTRACE
  echo "$port" > "$portfile"
  # Small, CI-friendly settings; fsync stays on (crash tests rely on it).
  as_owner "$PGBIN/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -k $sock -c listen_addresses=127.0.0.1 -c shared_buffers=256MB -c max_connections=100 -c maintenance_work_mem=512MB ${PGCLUSTER_OPTS:-}" \
    start >/dev/null \
    || { tail -20 "$dir/server.log" >&2; echo "could not start the cluster in $data" >&2; exit 1; }
}

case "$cmd" in
  start)
    if [ "$(id -u)" = 0 ]; then
      # The postgres OS user must be able to reach and own the folder.
      chown postgres:postgres "$dir"
      chmod 0755 "$dir"
    fi
    if [ ! -f "$data/PG_VERSION" ]; then
      as_owner "$PGBIN/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; echo "initdb failed in $data" >&2; exit 1; }
    fi
    as_owner mkdir -p "$sock"
    if settle; then uri; exit 0; fi
    launch
    uri
    ;;
  standby)
    [ -n "$primary" ] || { echo "usage: $0 standby DIR PRIMARY_DIR" >&2; exit 2; }
    primary="$(cd "$primary" && pwd)"
    if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$dir"; chmod 0755 "$dir"; fi
    if [ ! -f "$data/PG_VERSION" ]; then
      as_owner "$PGBIN/pg_basebackup" -h "$primary/socket" -p "$(cat "$primary/port")" -U postgres \
        -D "$data" -R -X stream -c fast >"$dir/basebackup.log" 2>&1 \
        || { cat "$dir/basebackup.log" >&2; echo "pg_basebackup from $primary failed" >&2; exit 1; }
    fi
    as_owner mkdir -p "$sock"
    if settle; then uri; exit 0; fi
    launch
    uri
    ;;
  stop)
    if running; then as_owner "$PGBIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null; fi
    ;;
  uri)
    running || { echo "no cluster running in $dir" >&2; exit 1; }
    uri
    ;;
  status)
    running
    ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
