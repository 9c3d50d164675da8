#!/usr/bin/env bash
# SQL regression tests (pg_regress) against a private cluster, run as the postgres OS user as
# pg_graphql's bin/installcheck does (cargo pgrx regress refuses to run as root).
#   pg_test/run.sh [DIR]   DIR: cluster folder (default .pgdata/regress)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${1:-$ROOT/.pgdata/regress}"
PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
REGRESS="$("$PG_CONFIG" --pkglibdir)/pgxs/src/test/regress/pg_regress"
[ -x "$REGRESS" ] || { echo "pg_regress not found at $REGRESS (postgresql-server-dev-15)" >&2; exit 1; }

"$ROOT/scripts/pgcluster.sh" start "$DIR" >/dev/null
trap '"$ROOT/scripts/pgcluster.sh" stop "$DIR"' EXIT
port="$(cat "$DIR/port")"
OUT="$DIR/regress-out"
rm -rf "$OUT"; mkdir -p "$OUT"
[ "$(id -u)" = 0 ] && chown postgres "$OUT"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

tests=$(cd "$ROOT/pg_test/sql" && ls *.sql | sed 's/\.sql$//' | sort)
as_pg psql -h "$DIR/socket" -p "$port" -U postgres -d postgres -qAt \
  -c "DROP DATABASE IF EXISTS pg_corpus_regress" -c "CREATE DATABASE pg_corpus_regress"
status=0
as_pg "$REGRESS" --use-existing --host="$DIR/socket" --port="$port" --user=postgres \
  --dbname=pg_corpus_regress --inputdir="$ROOT/pg_test" --outputdir="$OUT" $tests || status=$?
if [ $status -ne 0 ]; then
  [ -f "$OUT/regression.diffs" ] && cat "$OUT/regression.diffs"
  echo "pg_regress failed: outputs in $OUT" >&2
fi
exit $status
