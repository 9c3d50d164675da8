#!/usr/bin/env bash
# Every test layer, in order of cost. Called by `make test` and so by .ci/run.
#   1. pure Rust core: cargo test (unit + property tests), no PostgreSQL needed
#   2. the extension built and installed (release) into the system PostgreSQL 15
#   3. SQL regression files (pg_regress) in pg_test/
#   4. out-of-process integration tests (pytest) in tests/integration/, the demo included
#   5. the Python client and MCP server (clients/python): mypy --strict, its tests
#   6. PostgreSQL 18 (scripts/pg18.sh): the extension built for 18, pg_regress and the
#      integration tests of the search path, standby, upgrade and docs against an 18 cluster
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/pg_corpus/target}"
PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"

step() { printf '\n==> %s\n' "$*"; }

"$ROOT/scripts/setup.sh"

step "layer 1: cargo test -p pg_corpus_core"
cargo test -p pg_corpus_core --locked

step "layer 2: build and install the extension"
PG_CONFIG="$PG_CONFIG" "$ROOT/scripts/install.sh" >/dev/null

step "layer 3: pg_regress (pg_test/)"
"$ROOT/pg_test/run.sh" "$ROOT/.pgdata/regress"

step "layer 4: integration tests (tests/integration/)"
"$ROOT/.venv/bin/python" -m pytest tests/integration -q -p no:cacheprovider

step "layer 5: the Python client and MCP server (clients/python/)"
(cd "$ROOT/clients/python" && "$ROOT/.venv/bin/mypy" src)
"$ROOT/.venv/bin/python" -m pytest clients/python/tests -q -p no:cacheprovider

step "layer 6: PostgreSQL 18 (scripts/pg18.sh)"
"$ROOT/scripts/pg18.sh"

step "all test layers passed"
