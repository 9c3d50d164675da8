"""Pages: corpus_hybrid_search's "offset" skips that many rows of the ranking, so that pages of k
rows are disjoint slices of one ranking — the first page is the search of k rows, the second
holds ranks k+1..2k of the same ranking, in every mode, with and without the per-parent cap and
the evidence filter — until the corpus has nothing more to give."""
import psycopg
import pytest
from psycopg.rows import dict_row

SEED = 8117
EXT = "external_precedents"
K = 5


@pytest.fixture(scope="module")
def db(cluster, pgc):
    conn = cluster.create_db("pgc_pages")
    pgc.load_legal(conn, pgc.generate_legal_data(SEED, n_cases=40, n_documents=8))
    return conn


def query(db):
    vec, text = db.execute("SELECT embedding::text, left(content, 40) FROM precedent_chunks ORDER BY id "
                           "LIMIT 1").fetchone()
    return vec, text


def page(db, offset, **kw):
    vec, text = query(db)
    args = "".join(f", {k} => %({k})s" for k in kw)
    with db.cursor(row_factory=dict_row) as cur:
        return cur.execute(f'SELECT * FROM corpus.corpus_hybrid_search(%(c)s, %(v)s::vector, %(t)s, k => {K}{args}, '
                           '"offset" => %(o)s) ORDER BY rank', dict(c=EXT, v=vec, t=text, o=offset, **kw)).fetchall()


@pytest.mark.parametrize("cap", [0, 1, 3])
@pytest.mark.parametrize("mode", ["hybrid", "semantic", "lexical"])
def test_pages_are_disjoint_slices_of_one_ranking(db, mode, cap):
    first = page(db, 0, mode=mode, max_per_parent=cap)
    vec, text = query(db)
    with db.cursor(row_factory=dict_row) as cur:
        plain = cur.execute(f"SELECT * FROM corpus.corpus_hybrid_search(%s, %s::vector, %s, k => {K}, mode => %s, "
                            "max_per_parent => %s) ORDER BY rank", [EXT, vec, text, mode, cap]).fetchall()
    assert [r["item_id"] for r in first] == [r["item_id"] for r in plain] and len(first) == K
    seen, per_parent, offset = set(), {}, 0
    while True:
        rows = page(db, offset, mode=mode, max_per_parent=cap)
        assert [r["rank"] for r in rows] == list(range(offset + 1, offset + 1 + len(rows)))
        for r in rows:
            key = (r["source"], r["item_id"])
            assert key not in seen, f"{key} on two pages"
            seen.add(key)
            n = per_parent[r["parent_id"]] = per_parent.get(r["parent_id"], 0) + 1
            assert not cap or n <= cap
        if len(rows) < K:
            break
        offset += K
        assert offset < 2000
    # every item the search can return with a window of everything: the pages hold them all
    # (under a cap, which of a parent's items come first may differ between the two rankings;
    # how many each parent gives may not)
    with db.cursor() as cur:
        everything = cur.execute(
            "SELECT source, item_id, parent_id FROM corpus.corpus_hybrid_search(%s, %s::vector, %s, k => 1000, "
            "mode => %s, max_per_parent => %s)", [EXT, vec, text, mode, cap]).fetchall()
    assert len(everything) < 1000
    if not cap:
        assert seen == {(s, i) for s, i, _ in everything}
    counts = {}
    for _, _, parent in everything:
        counts[parent] = counts.get(parent, 0) + 1
    assert per_parent == counts
    assert offset >= 2 * K, "the corpus gave at least three pages"


def test_pages_with_evidence_hold_only_hits_with_evidence(db):
    rows = page(db, 0, evidence=True) + page(db, K, evidence=True)
    assert all(r["evidence"] for r in rows)
    assert len({r["item_id"] for r in rows}) == len(rows)


@pytest.mark.parametrize("offset,state", [(-1, "22023"), (10_001, "22023"), (None, "22004")])
def test_a_bad_offset_is_refused(db, offset, state):
    with pytest.raises(psycopg.Error) as e:
        page(db, offset)
    assert e.value.sqlstate == state and e.value.diag.message_hint
