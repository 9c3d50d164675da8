"""The soak in CI: 3 searchers, a writer, an embedding worker and 2 DBAs (statistics refreshes,
corpus_alter) on the legal database for 40 s; tests/integration/soak.py says what is checked.
bench/soak.py runs the long version."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import soak  # noqa: E402

SEED = 4242


@pytest.fixture(scope="module")
def db(cluster, pgc):
    conn = cluster.create_db("pgc_soak")
    pgc.load_legal(conn, pgc.generate_legal_data(SEED, n_cases=80, n_documents=10))
    conn.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats()")
    return conn


def test_searchers_writers_worker_and_refreshes_together_lose_nothing(cluster, db):
    stats, problems = soak.run(cluster.dsn(db.info.dbname), seconds=40, seed=SEED)
    assert stats.errors == []
    assert stats.leaks == [], "a search returned an item of another corpus"
    assert stats.stale_served == [], "a hit called fresh was queued in the search's snapshot"
    assert problems == []
    # it did what a soak must do
    assert stats.searches >= 100 and stats.writes >= 100 and stats.stored >= 50
    assert stats.refreshes + stats.alters >= 10
