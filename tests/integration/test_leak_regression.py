"""Regression test for the seed system's cross-corpus leak (task #56).

In the seed, the halacha branch of the precedent-library search joined case_law without
`source_kind`, so an approved halacha of the internal committee corpus came back from a search of
the external corpus (and vice versa). Here we plant, for each direction and for both sources
(halachot and precedent_chunks), an item that is the best possible match on BOTH branches: its
embedding IS the query vector and its text is the only text containing the query words (one decoy
in the other corpus contains one of the words, so the foreign lexical branch has something to
return). A search of the other corpus must never return it — whatever the mode, the caller
filters or the options — while a search of its own corpus returns it at rank 1 (positive
control, so the negative assertions cannot pass vacuously because, e.g., the item is
unsearchable or the query finds nothing).

How I convinced myself these tests fail when isolation breaks: if any subplan drops the corpus
predicate, the planted item is the nearest neighbour (distance 0) / the best lexical match of the
whole shared table, so it would be in the foreign top-k of that branch and thus in the fused
result; `test_planted_item_is_top_hit_in_own_corpus` shows the same query does surface it.
"""
import json

import numpy as np
import psycopg
import pytest

SEED = 56

INT_CASE, EXT_CASE = 9001, 9002
INT_NUMBER, EXT_NUMBER = 'ועדה 9001/24', 'עע"מ 9002/24'
COURT = "בית המשפט העליון"      # shared by both planted cases: a court filter cannot separate them
AREA = "planning"

KIND = {"internal_decisions": "internal_committee", "external_precedents": "external_upload"}
OTHER = {"internal_decisions": "external_precedents", "external_precedents": "internal_decisions"}

# name: (own corpus, source, item table, item id, case, unique query words, decoy id)
TARGETS = {
    "internal_halacha": ("internal_decisions", "halachot", 77001, INT_CASE,
                         ("zyqvarn", "xoqlitz"), 78001),
    "internal_chunk": ("internal_decisions", "chunks", 77101, INT_CASE,
                       ("wejquost", "yzzomar"), 78101),
    "external_halacha": ("external_precedents", "halachot", 77002, EXT_CASE,
                         ("qwyxtal", "jozqir"), 78002),
    "external_chunk": ("external_precedents", "chunks", 77102, EXT_CASE,
                       ("xaqjumb", "wyzqel"), 78102),
}
PENDING_HALACHA = (77003, ("jiqquzor", "xwyvel"))


@pytest.fixture(scope="module")
def legal(cluster, pgc):
    conn = cluster.create_db("pgc_leak")
    data = pgc.generate_legal_data(SEED)
    rng = np.random.default_rng(SEED + 100)
    tg = pgc.TextGen(SEED + 101)
    vectors = {}

    def filler():
        return tg.text(12, 16)

    data["case_law"] += [
        dict(id=INT_CASE, case_number=INT_NUMBER, case_name="ועדה נ' פלוני", court=COURT,
             source_kind="internal_committee", practice_area=AREA, headnote=filler(),
             summary=filler(), tags=[]),
        dict(id=EXT_CASE, case_number=EXT_NUMBER, case_name="פלוני נ' אלמוני", court=COURT,
             source_kind="external_upload", practice_area=AREA, headnote=filler(),
             summary=filler(), tags=[]),
    ]
    for name, (corpus, source, item_id, case, words, decoy_id) in TARGETS.items():
        q = pgc.random_unit_vectors(rng, 1, pgc.DIM)[0]
        vectors[name] = q
        text = f"{words[0]} {filler()} {words[1]} {words[0]}"
        foreign_case = EXT_CASE if case == INT_CASE else INT_CASE
        # the decoy: one of the words once, in the OTHER corpus, in the other source
        decoy_text = f"{filler()} {words[0]} {filler()}"
        decoy_vec = pgc.random_unit_vectors(rng, 1, pgc.DIM)[0]
        if source == "halachot":
            data["halachot"].append(dict(
                id=item_id, case_law_id=case, rule=text, supporting_quote=filler(),
                page_number=3, review_status="approved", embedding=q))
            data["precedent_chunks"].append(dict(
                id=decoy_id, case_law_id=foreign_case, chunk_index=50, page_number=9,
                content=decoy_text, embedding=decoy_vec))
        else:
            data["precedent_chunks"].append(dict(
                id=item_id, case_law_id=case, chunk_index=40, page_number=7, content=text,
                embedding=q))
            data["halachot"].append(dict(
                id=decoy_id, case_law_id=foreign_case, rule=decoy_text,
                supporting_quote=filler(), page_number=2, review_status="approved",
                embedding=decoy_vec))
    # a NOT approved internal halacha, also a perfect match: the other half of the seed's
    # halacha filter (review_status) must still hold.
    pq = pgc.random_unit_vectors(rng, 1, pgc.DIM)[0]
    vectors["pending"] = pq
    pid, pwords = PENDING_HALACHA
    data["halachot"].append(dict(
        id=pid, case_law_id=INT_CASE, rule=f"{pwords[0]} {filler()} {pwords[1]}",
        supporting_quote=filler(), page_number=4, review_status="pending", embedding=pq))

    pgc.load_legal(conn, data)

    # the planted words really are (almost) unique: target text + one decoy each
    for name, (_, _, _, _, words, _) in TARGETS.items():
        n = conn.execute(
            "SELECT (SELECT count(*) FROM halachot WHERE rule_tsv @@ to_tsquery('simple', %(q)s))"
            " + (SELECT count(*) FROM precedent_chunks"
            "    WHERE content_tsv @@ to_tsquery('simple', %(q)s))",
            {"q": " | ".join(words)}).fetchone()[0]
        assert n == 2, (name, n)
    return dict(conn=conn, vectors=vectors)


def kinds_of_parents(conn, parent_ids):
    rows = conn.execute("SELECT id::text, source_kind FROM case_law WHERE id::text = ANY(%s)",
                        [list(parent_ids)]).fetchall()
    return dict(rows)


def assert_all_hits_belong_to(conn, rows, corpus):
    """Every hit names `corpus`, and its parent case (looked up by us) has the corpus' kind;
    the hit's parent_id is the item's real case_law_id."""
    kinds = kinds_of_parents(conn, {r["parent_id"] for r in rows})
    for r in rows:
        assert r["corpus"] == corpus, r
        assert kinds.get(r["parent_id"]) == KIND[corpus], (
            f"foreign item in {corpus}: source={r['source']} item={r['item_id']} "
            f"parent={r['parent_id']} kind={kinds.get(r['parent_id'])}")
        table = "halachot" if r["source"] == "halachot" else "precedent_chunks"
        real_parent = conn.execute(f"SELECT case_law_id::text FROM {table} WHERE id::text = %s",
                                   [r["item_id"]]).fetchone()
        assert real_parent is not None and real_parent[0] == r["parent_id"], r


FILTER_CASES = {
    "no_filter": {},
    "court": {"court": COURT},
    "court_list": {"court": ["בית המשפט העליון", "בית המשפט המחוזי בירושלים",
                             "בית המשפט המחוזי בתל אביב", "ועדת הערר מחוז מרכז"]},
    "practice_area": {"practice_area": AREA},
    "own_case_number": None,   # filled per target: the planted item's own case number
}
OPTION_CASES = {
    "defaults": {},
    "no_cap_k50": {"k": 50, "max_per_parent": 0},
    "stale_small_window": {"include_stale": True, "candidates": 5, "k": 5},
    # the approximate path (HNSW + iterative scan) instead of the exact one for small slices
    "forced_ann": {"_ann": True},
    "forced_ann_no_cap": {"_ann": True, "k": 30, "max_per_parent": 0},
    # a second, feedback round (where the mode allows it: pg_corpus.hybrid_feedback)
    "feedback": {"_feedback": True},
    "feedback_no_cap_k30": {"_feedback": True, "k": 30, "max_per_parent": 0},
    # extra queries (multi-query, HyDE) that are all the planted item's best match, weighted
    # far above the original query
    "extra_queries": {"_extra": True},
    "extra_queries_no_cap_k30": {"_extra": True, "k": 30, "max_per_parent": 0},
}


def extra_queries_for(mode, vec, words):
    """Extra queries that each find the planted item first in every branch the mode runs: its
    own vector (a HyDE passage's embedding), its words (a rewrite), one word alone, both."""
    text_queries = [{"text": " ".join(words), "weight": 50, "label": "rewrite"},
                    {"text": words[1], "label": "keyword"}]
    vector_queries = [{"vector": [float(x) for x in vec], "weight": 100, "label": "hyde"},
                      {"vector": [float(x) for x in vec], "text": " ".join(reversed(words))}]
    return {"semantic": vector_queries, "lexical": text_queries}.get(mode, text_queries + vector_queries)


def search_with_options(conn, pgc, corpus, vec, text, mode, filters, opts):
    opts = dict(opts)
    ann = opts.pop("_ann", False)
    feedback = opts.pop("_feedback", False)
    if opts.pop("_extra", False):
        opts["extra_queries"] = extra_queries_for(mode, vec, text.split())
    if ann:
        conn.execute("SET pg_corpus.exact_search_max_rows = 0")
    if feedback:
        conn.execute("SET pg_corpus.hybrid_feedback = on")
    try:
        return pgc.search(conn, corpus, vec, text, mode=mode, filters=filters, **opts)
    finally:
        conn.execute("RESET pg_corpus.exact_search_max_rows")
        conn.execute("RESET pg_corpus.hybrid_feedback")


@pytest.mark.parametrize("option_case", list(OPTION_CASES))
@pytest.mark.parametrize("filter_case", list(FILTER_CASES))
@pytest.mark.parametrize("mode", ["semantic", "lexical", "hybrid"])
@pytest.mark.parametrize("target", list(TARGETS))
def test_planted_item_never_in_foreign_corpus(legal, pgc, target, mode, filter_case,
                                              option_case):
    conn = legal["conn"]
    own, source, item_id, case, words, decoy_id = TARGETS[target]
    foreign = OTHER[own]
    filters = FILTER_CASES[filter_case]
    if filters is None:
        filters = {"case_number": INT_NUMBER if case == INT_CASE else EXT_NUMBER}
    opts = OPTION_CASES[option_case]
    rows = search_with_options(conn, pgc, foreign, legal["vectors"][target], " ".join(words),
                               mode, filters, opts)

    leaked = [r for r in rows if r["source"] == source and r["item_id"] == str(item_id)]
    assert not leaked, f"#56 regression: {target} returned by a {foreign} search ({mode}, " \
                       f"filters={json.dumps(filters, ensure_ascii=False)}, {opts})"
    assert_all_hits_belong_to(conn, rows, foreign)
    assert len(rows) <= opts.get("k", 10)

    # non-vacuity of the foreign search itself: it runs and finds foreign items
    if filter_case != "own_case_number":
        if mode == "semantic" or (mode == "hybrid" and opts.get("_extra")):
            # (heavy extra vector queries outrank the decoy's lexical hits in a hybrid search)
            assert len(rows) == opts.get("k", 10), "foreign semantic search found too few rows"
        else:
            # the decoy (one query word, foreign corpus) is the only foreign lexical match
            assert str(decoy_id) in {r["item_id"] for r in rows}, \
                f"the foreign decoy {decoy_id} is missing: the lexical branch returned nothing"
    else:
        # no foreign case carries the planted item's case number
        assert rows == []


@pytest.mark.parametrize("option_case", ["defaults", "forced_ann", "feedback", "extra_queries"])
@pytest.mark.parametrize("filter_case", ["no_filter", "court", "practice_area",
                                         "own_case_number"])
@pytest.mark.parametrize("mode", ["semantic", "lexical", "hybrid"])
@pytest.mark.parametrize("target", list(TARGETS))
def test_planted_item_is_top_hit_in_own_corpus(legal, pgc, target, mode, filter_case,
                                               option_case):
    """Positive control: the exact query that must not leak does find the item at home."""
    conn = legal["conn"]
    own, source, item_id, case, words, _ = TARGETS[target]
    filters = FILTER_CASES[filter_case]
    if filters is None:
        filters = {"case_number": INT_NUMBER if case == INT_CASE else EXT_NUMBER}
    rows = search_with_options(conn, pgc, own, legal["vectors"][target], " ".join(words), mode,
                               filters, OPTION_CASES[option_case])
    assert rows, f"{own} search returned nothing"
    hit = planted_hit(rows, source, item_id)
    assert hit is not None, f"{target} not found in its own corpus: {brief(rows)}"
    assert hit["parent_id"] == str(case)
    # Every (source, branch) list is its own RRF input, so in semantic mode the other source's
    # nearest item ties with the planted one (both 1/21); the tie-break puts "chunks" first.
    assert hit["score"] == rows[0]["score"], brief(rows)
    if mode == "semantic":
        assert hit["rank"] <= 2, brief(rows)
    elif mode == "hybrid":
        assert hit["rank"] == 1, brief(rows)
    else:
        # the planted words occur in no other item of this corpus
        assert [(r["source"], r["item_id"]) for r in rows] == [(source, str(item_id))]
    if mode in ("semantic", "hybrid"):
        assert hit["semantic_rank"] == 1
        # with feedback the semantic list is the moved vector's (its distance is to that vector)
        if option_case != "feedback" or mode != "hybrid":
            assert hit["semantic_distance"] == pytest.approx(0.0, abs=1e-5)
    if mode in ("lexical", "hybrid"):
        assert hit["lexical_rank"] == 1
    assert_all_hits_belong_to(conn, rows, own)


def planted_hit(rows, source, item_id):
    return next((r for r in rows if (r["source"], r["item_id"]) == (source, str(item_id))), None)


def brief(rows):
    return [(r["rank"], r["source"], r["item_id"], r["parent_id"], round(r["score"], 5))
            for r in rows[:5]]


@pytest.mark.parametrize("mode", ["semantic", "lexical", "hybrid"])
def test_unapproved_halacha_never_returned(legal, pgc, mode):
    """The review_status rule (the other half of the seed's halacha filter) holds in the
    halacha's own corpus, in every mode."""
    conn = legal["conn"]
    pid, words = PENDING_HALACHA
    for corpus in ("internal_decisions", "external_precedents"):
        rows = pgc.search(conn, corpus, legal["vectors"]["pending"], " ".join(words), mode=mode,
                          max_per_parent=0, k=50)
        assert not [r for r in rows if r["source"] == "halachot" and r["item_id"] == str(pid)]
        if mode == "semantic":
            assert len(rows) == 50  # the search itself works
    # and the item is a real candidate otherwise: approving it (in a transaction we roll back)
    # makes it a top-scored internal hit, so the absence above is due to the rule alone
    with conn.transaction() as tx:
        conn.execute("UPDATE halachot SET review_status = 'approved' WHERE id = %s", [pid])
        rows = pgc.search(conn, "internal_decisions", legal["vectors"]["pending"],
                          " ".join(words), mode=mode, include_stale=True)
        hit = planted_hit(rows, "halachot", pid)
        assert hit is not None and hit["score"] == rows[0]["score"], brief(rows)
        raise psycopg.Rollback(tx)


@pytest.mark.parametrize("corpus", ["internal_decisions", "external_precedents"])
def test_explain_every_subplan_carries_the_isolation_predicate(legal, pgc, corpus):
    """corpus_explain shows the exact subplans: one per (source, branch), each naming the
    isolation column, with the corpus' value bound (or inlined)."""
    conn = legal["conn"]
    rows = conn.execute(
        "SELECT source, branch, strategy, sql, params::text FROM corpus.corpus_explain("
        "%s, %s::vector, %s, mode => 'hybrid')",
        [corpus, pgc.vec_text(legal["vectors"]["internal_halacha"]), "zyqvarn xoqlitz"]
    ).fetchall()
    pairs = {(r[0], r[1]) for r in rows}
    assert {("chunks", "semantic"), ("chunks", "lexical"), ("halachot", "semantic"),
            ("halachot", "lexical")} <= pairs, pairs
    for source, branch, strategy, sql, params in rows:
        assert "source_kind" in sql, (source, branch, sql)
        assert KIND[corpus] in sql or KIND[corpus] in params, (source, branch, sql, params)
        assert KIND[OTHER[corpus]] not in sql and KIND[OTHER[corpus]] not in params


def fetch_outcome(conn, corpus, source, item):
    """The rows of corpus_fetch, or its error as (SQLSTATE, message with the id replaced)."""
    try:
        with conn.transaction():
            return conn.execute("SELECT corpus, source, item_id, parent_id FROM corpus.corpus_fetch(%s, %s, %s)",
                                [corpus, source, item]).fetchall()
    except psycopg.Error as e:
        return e.sqlstate, e.diag.message_primary.replace(item, "ID")


@pytest.mark.parametrize("mode", ["semantic", "lexical", "hybrid"])
@pytest.mark.parametrize("target", list(TARGETS))
def test_planted_item_never_on_a_page_fetch_or_why_not_of_the_foreign_corpus(legal, pgc, target, mode):
    """The paths beside a search hold the same predicate: no page of the foreign ranking and no
    typed search returns the planted item; fetching it or asking why it is missing from the
    foreign corpus is answered exactly as for an id that does not exist, while at home the
    fetch returns it and why-not says it is returned."""
    conn = legal["conn"]
    own, source, item_id, case, words, _ = TARGETS[target]
    foreign, vec, text = OTHER[own], legal["vectors"][target], " ".join(words)
    pages, offset = [], 0
    while offset < 100:
        rows = pgc.search(conn, foreign, vec, text, mode=mode, k=25, offset=offset, max_per_parent=0)
        assert [r["rank"] for r in rows] == list(range(offset + 1, offset + 1 + len(rows)))
        pages += rows
        if len(rows) < 25:
            break
        offset += 25
    assert planted_hit(pages, source, item_id) is None, f"{target} on a page of {foreign} ({mode})"
    assert_all_hits_belong_to(conn, pages, foreign)
    assert pages, "the foreign pages are empty: the check above is vacuous"
    typed = conn.execute("SELECT source, item_id FROM corpus.corpus_hybrid_search_typed(NULL::bigint, %s, %s::vector, "
                         "%s, mode => %s, k => 50, max_per_parent => 0)",
                         [foreign, pgc.vec_text(vec), text, mode]).fetchall()
    assert (source, item_id) not in typed and typed

    missing = fetch_outcome(conn, foreign, source, "987654321")
    assert missing[0] == "42704"
    assert fetch_outcome(conn, foreign, source, str(item_id)) == missing
    assert fetch_outcome(conn, own, source, str(item_id)) == [(own, source, str(item_id), str(case))]

    def why(corpus, item):
        return conn.execute("SELECT reason, detail::text, replace(hint, %s, 'ID') FROM corpus.corpus_why_not("
                            "%s, %s, %s, %s::vector, %s, mode => %s)",
                            [item, corpus, source, item, pgc.vec_text(vec), text, mode]).fetchall()
    assert why(foreign, str(item_id)) == why(foreign, "987654321")
    assert [r[0] for r in why(foreign, str(item_id))] == ["not_in_corpus"]
    assert [r[0] for r in why(own, str(item_id))] == ["returned"]


def test_planted_items_never_leak_during_and_after_an_embedding_switch(legal, pgc):
    """The chunks' embeddings rebuilt in a new column beside the searched one, then made
    current: in both states no planted item reaches a search of the other corpus in any mode,
    and each is still found at home (semantically too: by the column current at the time)."""
    conn = legal["conn"]
    conn.execute(f"ALTER TABLE precedent_chunks ADD COLUMN embedding_v2 vector({pgc.DIM})")
    conn.execute("SELECT corpus.corpus_embedding_build('precedent_chunks', 'embedding', 'embedding_v2', 'v2')")
    conn.execute("UPDATE precedent_chunks SET embedding_v2 = embedding")

    def check(phase):
        for target, (own, source, item_id, _, words, _) in TARGETS.items():
            vec, text = legal["vectors"][target], " ".join(words)
            for mode in ("semantic", "lexical", "hybrid"):
                rows = pgc.search(conn, OTHER[own], vec, text, mode=mode, k=25, max_per_parent=0)
                assert rows and planted_hit(rows, source, item_id) is None, (phase, target, mode)
                assert_all_hits_belong_to(conn, rows, OTHER[own])
                home = pgc.search(conn, own, vec, text, mode=mode, k=10)
                hit = planted_hit(home, source, item_id)
                assert hit is not None and hit["rank"] <= 2, (phase, target, mode, brief(home))
                assert mode == "lexical" or hit["semantic_rank"] == 1, (phase, target, mode)

    check("building")
    # (items without an embedding wait for the new column too: the switch is forced)
    assert conn.execute("SELECT corpus.corpus_embedding_switch('precedent_chunks', 'embedding', 'embedding_v2', "
                        "force => true)").fetchone()[0] == 2
    plans = conn.execute("SELECT sql FROM corpus.corpus_explain('external_precedents', %s::vector, NULL, "
                         "mode => 'semantic') WHERE source = 'chunks'",
                         [pgc.vec_text(legal["vectors"]["external_chunk"])]).fetchall()
    assert plans and all("embedding_v2" in p[0] for p in plans)
    check("switched")
