#!/usr/bin/env bash
# Idempotent set-up for building and testing pg_corpus on a Debian 12 machine
# (root, PostgreSQL 15 server + client preinstalled). Every step checks first
# and is skipped when already done; every failure stops with a clear message.
#
#   scripts/setup.sh            everything (system packages, pgvector, cargo-pgrx, python venv)
#
# Facts behind the steps: see ../shared/TOOLCHAIN.md of the project brief and
# docs/toolchain.md in this repository.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
CACHE="${PG_CORPUS_CACHE:-$HOME/.cache/pg_corpus}"
PGRX_VERSION="$(sed -nE 's/^pgrx = "=?([^"]+)"$/\1/p' "$ROOT/Cargo.toml")"
PGVECTOR_MIN="0.8.0"

step() { printf '\n==> %s\n' "$*"; }
die()  { printf '\nSETUP FAILED: %s\n' "$*" >&2; exit 1; }

[ -n "$PGRX_VERSION" ] || die "could not read the pgrx pin from Cargo.toml"
[ -x "$PG_CONFIG" ] || die "$PG_CONFIG not found: install the postgresql-15 server package"
mkdir -p "$CACHE"

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

apt_install() {
  # Install only what is missing: apt-get install of an installed package upgrades it.
  local missing=()
  for p in "$@"; do
    local name="${p%%=*}"
    dpkg-query -W -f='${Status}' "$name" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  step "apt-get install ${missing[*]}"
  $SUDO apt-get update -qq || die "apt-get update failed (is the Debian registry reachable?)"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    || return 1
}

# 1. System packages ---------------------------------------------------------
PGVER="$(dpkg-query -W -f='${Version}' postgresql-15 2>/dev/null || true)"
[ -n "$PGVER" ] || die "postgresql-15 is not installed"
# Pin the dev package to the installed server version: unpinned it upgrades server and libpq.
apt_install "postgresql-server-dev-15=$PGVER" || apt_install postgresql-server-dev-15 \
  || die "could not install postgresql-server-dev-15"
apt_install sudo pkg-config libssl-dev ca-certificates dpkg-dev || die "could not install base packages"

# 2. pgvector ----------------------------------------------------------------
PKGLIB="$("$PG_CONFIG" --pkglibdir)"
SHAREDIR="$("$PG_CONFIG" --sharedir)"
if [ -f "$PKGLIB/vector.so" ] && [ -f "$SHAREDIR/extension/vector.control" ]; then
  step "pgvector already installed ($(sed -nE "s/^default_version = '([^']+)'/\1/p" "$SHAREDIR/extension/vector.control"))"
else
  step "building pgvector from Debian trixie's source package"
  SRCDIR="$("$ROOT/scripts/pgvector_source.sh")" || die "could not fetch pgvector's source"
  # OPTFLAGS="" avoids -march=native, so the library runs on any x86-64 machine.
  make -s -C "$SRCDIR" PG_CONFIG="$PG_CONFIG" OPTFLAGS="" >/dev/null || die "pgvector build failed"
  $SUDO make -s -C "$SRCDIR" PG_CONFIG="$PG_CONFIG" OPTFLAGS="" install >/dev/null || die "pgvector install failed"
fi

# 3. cargo-pgrx --------------------------------------------------------------
if cargo pgrx --version 2>/dev/null | grep -q "cargo-pgrx $PGRX_VERSION\b"; then
  step "cargo-pgrx $PGRX_VERSION already installed"
else
  step "cargo install cargo-pgrx $PGRX_VERSION (about 8 minutes on 2 cores)"
  cargo install --locked cargo-pgrx --version "$PGRX_VERSION" --force \
    || die "cargo install cargo-pgrx $PGRX_VERSION failed"
fi
PGRX_HOME="${PGRX_HOME:-$HOME/.pgrx}"
if grep -qs "pg15 = \"$PG_CONFIG\"" "$PGRX_HOME/config.toml"; then
  step "cargo pgrx init already done"
else
  step "cargo pgrx init --pg15 $PG_CONFIG"
  cargo pgrx init --pg15 "$PG_CONFIG" || die "cargo pgrx init failed"
fi

# 4. Python venv for the test driver, demo and benchmarks ----------------------
VENV="$ROOT/.venv"
REQ="$ROOT/requirements.txt"
if [ -x "$VENV/bin/python" ] && cmp -s "$REQ" "$VENV/.requirements.installed"; then
  step "python venv up to date"
else
  step "python venv at $VENV"
  python3 -m venv "$VENV" || die "python3 -m venv failed"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQ" || die "pip install -r requirements.txt failed"
  cp "$REQ" "$VENV/.requirements.installed"
fi
# The Python package (clients/python: client, pg-corpus-mcp, pg-corpus-worker), editable: always
# the checkout's code; installed again when its pyproject.toml (commands, dependencies) changes.
PYPROJECT="$ROOT/clients/python/pyproject.toml"
if "$VENV/bin/python" -c "import pg_corpus, sys; sys.exit(0 if pg_corpus.__file__.startswith('$ROOT/') else 1)" 2>/dev/null \
   && cmp -s "$PYPROJECT" "$VENV/.pg_corpus-pyproject.installed"; then
  step "python package installed (clients/python, editable)"
else
  step "pip install -e clients/python"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -e "$ROOT/clients/python" \
    || die "pip install -e clients/python failed"
  cp "$PYPROJECT" "$VENV/.pg_corpus-pyproject.installed"
fi

step "setup complete"
