"""The isolation probes on Citus: the leak regression (test_leak_regression.py) and
the randomised isolation test (test_isolation_random.py) run unchanged against a coordinator
and two workers, their tables distributed:

* the legal schema as README "Scaling out" distributes it (tests/fixtures/legal_distribute.sql);
* the random worlds' tables: the parent table `org` by id, its item tables `docs` and `notes`
  by org_id colocated with it, and `memos` (no parent table: its isolation columns are on its
  own rows) by owner_id, its parent key, colocated too.

Their fixtures ask for `cluster` and `pgc`: here `cluster` makes Citus databases and `pgc`
loads the legal schema distributed. Every assertion of those modules holds on Citus: planted
perfect matches of one corpus never reach another corpus' search in any mode, filter or
option (positive controls included), and 1,020 random searches over random corpora return
only eligible rows of their corpus, k of them whenever k exist.
"""
from types import SimpleNamespace

import pytest

import citus_support as cs
import test_isolation_random as iso
from test_isolation_random import test_random_corpora_never_leak, world_db  # noqa: F401
from test_leak_regression import (  # noqa: F401
    legal,
    test_explain_every_subplan_carries_the_isolation_predicate,
    test_planted_item_is_top_hit_in_own_corpus,
    test_planted_item_never_in_foreign_corpus,
    test_unapproved_halacha_never_returned,
)

WORLD_DISTRIBUTE = [
    "ALTER TABLE docs DROP CONSTRAINT docs_pkey",
    "ALTER TABLE docs ADD PRIMARY KEY (id, org_id)",
    "ALTER TABLE notes DROP CONSTRAINT notes_pkey",
    "ALTER TABLE notes ADD PRIMARY KEY (id, org_id)",
    "ALTER TABLE memos DROP CONSTRAINT memos_pkey",
    "ALTER TABLE memos ADD PRIMARY KEY (id, owner_id)",
    "SELECT create_distributed_table('org', 'id')",
    "SELECT create_distributed_table('docs', 'org_id', colocate_with => 'org')",
    "SELECT create_distributed_table('notes', 'org_id', colocate_with => 'org')",
    "SELECT create_distributed_table('memos', 'owner_id', colocate_with => 'org')",
]


class DistributingConnection:
    """The coordinator's connection, which distributes the random worlds' tables right after
    the test module creates them (and sends a schema one statement at a time)."""

    def __init__(self, conn):
        self._conn = conn

    def execute(self, query, params=None, **kw):
        if query == iso.SCHEMA:
            for stmt in cs.statements(query):
                self._conn.execute(stmt)
            for stmt in WORLD_DISTRIBUTE:
                self._conn.execute(stmt)
            return None
        return self._conn.execute(query, params, **kw)

    def __getattr__(self, name):
        return getattr(self._conn, name)


class CitusDatabases:
    def __init__(self, citus):
        self.citus = citus

    def create_db(self, name):
        return DistributingConnection(self.citus.create_db(name))


@pytest.fixture(scope="module")
def cluster(citus_cluster):
    return CitusDatabases(citus_cluster)


@pytest.fixture(scope="module")
def pgc(pgc):
    ns = SimpleNamespace(**vars(pgc))
    ns.load_legal = lambda conn, data: cs.load_legal_distributed(conn, data, pgc.copy_rows, pgc.LEGAL_COLUMNS)
    return ns


def test_the_probed_tables_are_distributed(legal, world_db):
    for conn, tables in ((legal["conn"], ["case_law", "precedent_chunks", "halachot", "document_chunks"]),
                         (world_db["conn"], ["org", "docs", "notes", "memos"])):
        kinds = dict(conn.execute("SELECT table_name::text, citus_table_type FROM citus_tables").fetchall())
        assert {t: kinds.get(t) for t in tables} == {t: "distributed" for t in tables}, kinds
