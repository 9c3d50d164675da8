# pg_corpus — developer entry points. Run `make help` for the list.

PG_CONFIG        ?= /usr/lib/postgresql/15/bin/pg_config
# Outside the work tree: the build is large and survives a fresh checkout.
CARGO_TARGET_DIR ?= $(HOME)/.cache/pg_corpus/target
export CARGO_TARGET_DIR
VENV             ?= .venv
PYTHON           ?= $(VENV)/bin/python
DEMO_DIR         ?= .pgdata/demo

.DEFAULT_GOAL := help
.PHONY: help setup install test check lint test-core test-regress test-integration test-fast \
        test-client test-pg18 test-citus demo demo-stop

help:
	@echo "make setup      system packages, pgvector, cargo-pgrx, python venv (scripts/setup.sh)"
	@echo "make test       every test layer (scripts/test.sh): what CI runs"
	@echo "make check      the inner loop: lint, core, regress and the fast integration set"
	@echo "make lint       cargo fmt --check, clippy -D warnings, mypy --strict"
	@echo "make test-core | test-regress | test-integration | test-fast | test-client | test-pg18 | test-citus"
	@echo "                one layer (see scripts/test.sh)"
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

check:
	scripts/test.sh lint core regress fast

lint:
	scripts/test.sh lint

test-core test-regress test-integration test-fast test-client test-pg18 test-citus:
	scripts/test.sh $(@:test-%=%)

# --- demo -----------------------------------------------------------------------------------
# Re-runnable: the cluster is reused when it runs, and load_sample.py recreates the database.

demo:
	@start=$$(date +%s); \
	elapsed() { echo "    ($$(( $$(date +%s) - start )) s since the start)"; }; \
	set -e; \
	echo "==> [1/4] setup: system packages, pgvector, cargo-pgrx, python venv"; \
	scripts/setup.sh; elapsed; \
	echo "==> [2/4] build and install the extension (about 10 minutes the first time)"; \
	$(MAKE) --no-print-directory install; elapsed; \
	echo "==> [3/4] private cluster in $(DEMO_DIR), loading demo/sample"; \
	uri="$$(scripts/pgcluster.sh start $(DEMO_DIR))"; \
	db="$$($(PYTHON) demo/load_sample.py "$$uri")"; elapsed; \
	echo "==> [4/4] searches"; \
	$(PYTHON) demo/demo.py "$$db"; elapsed; \
	tcp="postgresql://postgres@127.0.0.1:$$(cat $(DEMO_DIR)/port)/pg_corpus_demo"; \
	echo; \
	echo "The demo database (psql, psycopg, SQLAlchemy as postgresql+psycopg://…): $$tcp"; \
	echo "  psql \"$$tcp\""; \
	echo "Search your own text: $(PYTHON) demo/demo.py \"$$tcp\" --query \"...\" (see demo/README.md)"; \
	echo "stop it with: make demo-stop"

demo-stop:
	scripts/pgcluster.sh stop $(DEMO_DIR)
