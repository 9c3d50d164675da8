#!/usr/bin/env bash
# Citus 13.2.2 for the Citus test layer, built from ../shared/citus/ (no registry
# carries Citus) against the system PostgreSQL 15 and installed into its directories.
# Idempotent: the build is cached in $CACHE/citus-13.2.2 (outside the clone) and skipped when
# the installed citus.so is the cached build's; a fresh machine builds it (about 6 minutes on
# 2 cores). The archive's sha256 is checked against the SHA256SUMS beside it.
#
#   scripts/citus.sh           build if needed and install; prints the installed version
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
CACHE="${PG_CORPUS_CACHE:-$HOME/.cache/pg_corpus}"
VERSION="13.2.2"
BUILD="$CACHE/citus-$VERSION"
PKGLIB="$("$PG_CONFIG" --pkglibdir)"
# The brief's shared/ folder: $PG_CORPUS_SHARED, beside this checkout, or beside the repository
# it was cloned from (a CI clone elsewhere), whichever holds the archive.
SHARED=""
origin="$(git -C "$ROOT" remote get-url origin 2>/dev/null || true)"
for d in "${PG_CORPUS_SHARED:-}" "$ROOT/../shared" ${origin:+"$origin/../shared"}; do
  if [ -n "$d" ] && [ -f "$d/citus/citus-$VERSION.tar.gz" ]; then SHARED="$d"; break; fi
done
ARCHIVE="$SHARED/citus/citus-$VERSION.tar.gz"

step() { printf '\n==> %s\n' "$*" >&2; }
die()  { printf '\nCITUS SETUP FAILED: %s\n' "$*" >&2; exit 1; }

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi


installed_matches() {
  [ -f "$BUILD/.built" ] && [ -f "$PKGLIB/citus.so" ] && [ -f "$BUILD/src/backend/distributed/citus.so" ] \
    && cmp -s "$PKGLIB/citus.so" "$BUILD/src/backend/distributed/citus.so"
}

if installed_matches; then
  step "Citus $VERSION already built and installed"
  exit 0
fi

# Build dependencies (Debian 12), installed only when missing.
missing=()
for p in libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev libselinux1-dev libxslt1-dev \
         libpam0g-dev libreadline-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  step "apt-get install ${missing[*]}"
  $SUDO apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >/dev/null || die "could not install Citus' build dependencies"
fi

if [ ! -f "$BUILD/.built" ]; then
  [ -n "$SHARED" ] || die "citus-$VERSION.tar.gz not found in the project brief's shared/citus/ folder \
(looked beside $ROOT and beside ${origin:-its origin}; set PG_CORPUS_SHARED to the shared/ folder)"
  (cd "$SHARED/citus" && sha256sum -c --quiet --ignore-missing SHA256SUMS) \
    || die "$ARCHIVE does not match SHA256SUMS"
  step "building Citus $VERSION in $BUILD (about 6 minutes on 2 cores)"
  rm -rf "$BUILD"
  mkdir -p "$BUILD"
  tar -xzf "$ARCHIVE" -C "$BUILD"   # git archive: the tree at the top level
  [ -x "$BUILD/configure" ] || die "unexpected archive layout in $ARCHIVE"
  (cd "$BUILD" && PG_CONFIG="$PG_CONFIG" ./configure --quiet >"$BUILD/configure.log" 2>&1) \
    || { tail -20 "$BUILD/configure.log" >&2; die "configure failed"; }
  make -s -C "$BUILD" -j2 >"$BUILD/make.log" 2>&1 || { tail -30 "$BUILD/make.log" >&2; die "make failed"; }
  touch "$BUILD/.built"
fi
step "installing Citus $VERSION into $("$PG_CONFIG" --version)"
$SUDO make -s -C "$BUILD" install >"$BUILD/install.log" 2>&1 || { tail -20 "$BUILD/install.log" >&2; die "make install failed"; }
installed_matches || die "the installed citus.so is not the cached build"
