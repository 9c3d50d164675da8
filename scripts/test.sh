#!/usr/bin/env bash
# The test layers, in order of cost. `make test` (and so .ci/run) runs them all; `make check`
# the inner loop (lint, core, regress, fast); `make test-<layer>` one.
#   lint         released SQL scripts unchanged (sql/releases/SHA256SUMS), cargo fmt --check,
#                clippy -D warnings (core and extension), mypy --strict (client)
#   core         pure Rust core: cargo test (unit + property tests), no PostgreSQL needed
#   regress      the extension built and installed (release) into the system PostgreSQL 15, then
#                the SQL regression files (pg_regress) in pg_test/
#   integration  out-of-process integration tests (pytest) in tests/integration/, the demo included
#   fast         the integration modules that pin the invariants (isolation, errors, owner-code
#                parity, content, side tables, public functions, filters, cache, re-embed, locks)
#   client       the Python package (clients/python: client, MCP server, re-embed worker): its tests
#   pg18         PostgreSQL 18 (scripts/pg18.sh): the extension built for 18, pg_regress and the
#                integration tests of the search path, standby, upgrade and docs against an 18 cluster
#   citus        Citus 13.2.2 (scripts/citus.sh builds it from ../shared/citus, cached): a
#                coordinator and two workers on loopback; searches equal to a single node, re-embed
#                end to end, the isolation probes, health check and explain (test_citus*.py)
# Usage: scripts/test.sh [layer ...]   (no layer: every layer but fast, in the order above)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/pg_corpus/target}"
PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
PYTEST=("$ROOT/.venv/bin/python" -m pytest -q -p no:cacheprovider)
FAST=(test_leak_regression test_errors test_owner_code_parity test_content_rule test_side_tables
      test_public_functions test_lenient_filters test_definition_cache test_reembed test_dba_write_locks)

step() { printf '\n==> %s\n' "$*"; }

installed=""
install() {
  if [ -z "$installed" ]; then
    step "build and install the extension"
    PG_CONFIG="$PG_CONFIG" "$ROOT/scripts/install.sh" >/dev/null
    installed=1
  fi
}

# A released version's install script and the upgrade scripts into it never change (databases
# were made with them): each has its sha256 in sql/releases/SHA256SUMS.
check_releases() {
  (cd "$ROOT/sql" && sha256sum --check --quiet releases/SHA256SUMS)
  local f v u
  for f in "$ROOT"/sql/releases/pg_corpus--*.sql; do
    v="${f##*/pg_corpus--}"; v="${v%.sql}"
    for u in "releases/pg_corpus--$v.sql" $(cd "$ROOT/sql" && ls upgrade/pg_corpus--*--"$v".sql 2>/dev/null); do
      grep -q "  $u\$" "$ROOT/sql/releases/SHA256SUMS" || {
        echo "sql/$u belongs to release $v but has no checksum in sql/releases/SHA256SUMS" >&2; exit 1; }
    done
  done
}

layer() {
  case "$1" in
    lint)
      step "lint: released scripts unchanged, cargo fmt, clippy, mypy"
      check_releases
      cargo fmt --all -- --check
      cargo clippy -p pg_corpus_core --all-targets --locked -- -D warnings
      cargo clippy -p pg_corpus --all-targets --locked -- -D warnings
      (cd "$ROOT/clients/python" && "$ROOT/.venv/bin/mypy" src) ;;
    core)
      step "core: cargo test -p pg_corpus_core"
      cargo test -p pg_corpus_core --locked ;;
    regress)
      install
      step "regress: pg_regress (pg_test/)"
      "$ROOT/pg_test/run.sh" "$ROOT/.pgdata/regress" ;;
    integration)
      install
      step "integration: tests/integration/ (the Citus modules are the citus layer's)"
      "${PYTEST[@]}" tests/integration \
        --ignore=tests/integration/test_citus.py --ignore=tests/integration/test_citus_isolation.py ;;
    fast)
      install
      step "fast: the invariants' integration modules"
      files=()
      for m in "${FAST[@]}"; do files+=("tests/integration/$m.py"); done
      "${PYTEST[@]}" "${files[@]}" ;;
    client)
      step "client: the Python package: client, MCP server, re-embed worker (clients/python/)"
      "${PYTEST[@]}" clients/python/tests ;;
    pg18)
      step "pg18: PostgreSQL 18 (scripts/pg18.sh)"
      "$ROOT/scripts/pg18.sh" ;;
    citus)
      step "citus: Citus (scripts/citus.sh, tests/integration/test_citus*.py)"
      "$ROOT/scripts/citus.sh"
      "${PYTEST[@]}" tests/integration/test_citus.py tests/integration/test_citus_isolation.py ;;
    *)
      echo "scripts/test.sh: unknown layer \"$1\" (lint core regress integration fast client pg18 citus)" >&2
      exit 2 ;;
  esac
}

"$ROOT/scripts/setup.sh"
layers=("$@")
[ ${#layers[@]} -gt 0 ] || layers=(lint core regress integration client pg18 citus)
for l in "${layers[@]}"; do
  layer "$l"
done
step "passed: ${layers[*]}"
