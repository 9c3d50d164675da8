#!/usr/bin/env bash
# Print the folder of pgvector's source, unpacked from Debian trixie's source package (0.8.0)
# into $PG_CORPUS_CACHE/pgvector-src; fetched only when it is not there yet. Used by
# scripts/setup.sh (pgvector for PostgreSQL 15) and scripts/pg18.sh (pgvector for PostgreSQL 18
# on CPUs the wheel's build does not run on).
set -euo pipefail
CACHE="${PG_CORPUS_CACHE:-$HOME/.cache/pg_corpus}"
die() { printf '\npgvector source: %s\n' "$*" >&2; exit 1; }
SRCDIR="$(ls -d "$CACHE"/pgvector-src/pgvector-*/ 2>/dev/null | head -1 || true)"
if [ -z "$SRCDIR" ] || [ ! -f "$SRCDIR/Makefile" ]; then
  APTDIR="$CACHE/apt"
  mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial" "$CACHE/pgvector-src"
  URI="$(sed -nE 's/^URIs: *(http[^ ]*debian)\/?$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)"
  URI="${URI:-http://deb.debian.org/debian}"
  cat > "$APTDIR/trixie-src.sources" <<SRC
Types: deb-src
URIs: $URI
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  APTOPTS=(-o "Dir::Etc::sourcelist=$APTDIR/trixie-src.sources" -o "Dir::Etc::sourceparts=-"
           -o "Dir::State::Lists=$APTDIR/lists" -o "Dir::Cache=$APTDIR/cache")
  apt-get "${APTOPTS[@]}" update -qq >&2 || die "apt-get update for trixie sources failed"
  ( cd "$CACHE/pgvector-src" && rm -rf pgvector-*/ &&
    apt-get "${APTOPTS[@]}" source -qq pgvector >&2 ) || die "apt-get source pgvector failed"
  SRCDIR="$(ls -d "$CACHE"/pgvector-src/pgvector-*/ | head -1)"
  [ -n "$SRCDIR" ] || die "pgvector source not unpacked"
fi
echo "${SRCDIR%/}"
