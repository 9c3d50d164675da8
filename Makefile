# pg_corpus — developer entry points. Run `make help` for the list.

PG_CONFIG        ?= /usr/lib/postgresql/15/bin/pg_config
# Outside the work tree: the build is large and survives a fresh checkout.
CARGO_TARGET_DIR ?= $(HOME)/.cache/pg_corpus/target
export CARGO_TARGET_DIR
VENV             ?= .venv
PYTHON           ?= $(VENV)/bin/python
DEMO_DIR         ?= .pgdata/demo

.DEFAULT_GOAL := help
.PHONY: help setup install test demo demo-stop

help:
	@echo "make setup      system packages, pgvector, cargo-pgrx, python venv (scripts/setup.sh)"
	@echo "make test       every test layer: cargo test, pg_regress, integration tests (scripts/test.sh)"
	@echo "make install    build and install the extension into $(PG_CONFIG)'s PostgreSQL"
	@echo "make demo       setup + install, then a private cluster in $(DEMO_DIR) with the sample"
	@echo "make demo-stop  stop the demo cluster"

# --- build ----------------------------------------------------------------------------------

setup:
	scripts/setup.sh

install:
	PG_CONFIG=$(PG_CONFIG) scripts/install.sh

# --- tests ----------------------------------------------------------------------------------

test:
	scripts/test.sh

# --- demo -----------------------------------------------------------------------------------
# Re-runnable: the cluster is reused when it runs, and load_sample.py recreates the database.

demo:
	scripts/setup.sh
	$(MAKE) --no-print-directory install
	@set -e; \
	uri="$$(scripts/pgcluster.sh start $(DEMO_DIR))"; \
	echo "==> loading demo/sample into $$uri"; \
	db="$$($(PYTHON) demo/load_sample.py "$$uri")"; \
	$(PYTHON) demo/demo.py "$$db"; \
	echo; \
	echo "The demo database: psql \"$$db\""; \
	echo "Search your own text: $(PYTHON) demo/demo.py \"$$db\" --query \"...\" (see demo/README.md)"; \
	echo "stop it with: make demo-stop"

demo-stop:
	scripts/pgcluster.sh stop $(DEMO_DIR)
