#!/usr/bin/env bash
# Build and install the extension into PG_CONFIG's PostgreSQL: the library and the current
# version's install script (cargo pgrx install), plus the install scripts of past releases
# (sql/releases/) and the upgrade scripts between versions (sql/upgrade/), so that
# ALTER EXTENSION pg_corpus UPDATE works from any release.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/pg_corpus/target}"
cd "$ROOT"
cargo pgrx install --release --pg-config "$PG_CONFIG" "$@"
install -m 644 sql/releases/pg_corpus--*.sql sql/upgrade/pg_corpus--*--*.sql "$("$PG_CONFIG" --sharedir)/extension/"
