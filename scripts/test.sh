#!/usr/bin/env bash
# Every test layer, in order of cost. Called by `make test` and so by .ci/run.
#   1. pure Rust core: cargo test (unit + property tests), no PostgreSQL needed
#   2. the extension built and installed (release) into the system PostgreSQL 15
#   3. SQL regression files (pg_regress) in pg_test/
#   4. out-of-process integration tests (pytest) in tests/integration/, the demo included
#   5. the Python client and MCP server (clients/python): mypy --strict, its tests
#   6. PostgreSQL 18 (scripts/pg18.sh): the extension built for 18, pg_regress and the
#      integration tests of the search path, standby, upgrade and docs against an 18 cluster
#   7. Citus (scripts/citus.sh builds Citus 13.2.2 from ../shared/citus, cached): a coordinator
#      and two workers on loopback; searches equal to a single node, re-embed end to end,
#      the isolation probes, health check and explain (tests/integration/test_citus*.py)
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
# (the Citus modules are layer 7's: they need Citus installed)
"$ROOT/.venv/bin/python" -m pytest tests/integration -q -p no:cacheprovider \
  --ignore=tests/integration/test_citus.py --ignore=tests/integration/test_citus_isolation.py

step "layer 5: the Python client and MCP server (clients/python/)"
(cd "$ROOT/clients/python" && "$ROOT/.venv/bin/mypy" src)
"$ROOT/.venv/bin/python" -m pytest clients/python/tests -q -p no:cacheprovider

step "layer 6: PostgreSQL 18 (scripts/pg18.sh)"
"$ROOT/scripts/pg18.sh"

step "layer 7: Citus (scripts/citus.sh, tests/integration/test_citus*.py)"
"$ROOT/scripts/citus.sh"
"$ROOT/.venv/bin/python" -m pytest -q -p no:cacheprovider \
  tests/integration/test_citus.py tests/integration/test_citus_isolation.py

step "all test layers passed"
