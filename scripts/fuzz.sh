#!/usr/bin/env bash
# Long fuzzing runs of the property tests that take outside input: the tsvector
# reader, the bounded JSON reader, lexeme quoting, the query analyser and the ts_rank_cd bound
# (crates/pg_corpus_core/tests/fuzz_props.rs), the filter parser (src/filters.rs) and the
# analyser's Unicode properties (tests/analysis_props.rs). CI runs them with proptest's default
# 256 cases; this runs CASES (default 200,000) of each, in release mode. A failure prints the
# minimal input proptest found: commit it as a test.
#
#   bash scripts/fuzz.sh               # 200,000 cases each
#   CASES=2000000 bash scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../crates/pg_corpus_core"
export PROPTEST_CASES="${CASES:-200000}"
start=$(date +%s)
cargo test --release --test fuzz_props
cargo test --release --lib filters::tests::the_filter_parser_answers_every_json_value
cargo test --release --test analysis_props
echo "==> fuzzing passed: ${PROPTEST_CASES} cases per property in $(( $(date +%s) - start )) s"
