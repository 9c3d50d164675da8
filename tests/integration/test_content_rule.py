"""Content means content: white space, invisible characters (zero-width, bidi marks, the BOM)
and control characters are not text. A parent whose required column holds only such
characters is incomplete, a text padded with them to `min_length` is too short — in the
searches, the BM25 statistics, find-similar and the health check alike."""
import psycopg
import pytest

# one character of each class, by name
BLANKS = {
    "tab": "\t", "newline": "\n", "carriage_return": "\r", "vertical_tab": "\x0b",
    "no_break_space": "\u00a0", "ideographic_space": "\u3000", "em_space": "\u2003",
    "line_separator": "\u2028", "zero_width_space": "\u200b", "zero_width_joiner": "\u200d",
    "left_to_right_mark": "\u200e", "right_to_left_mark": "\u200f", "arabic_letter_mark": "\u061c",
    "right_to_left_embedding": "\u202b", "word_joiner": "\u2060", "byte_order_mark": "\ufeff",
    "soft_hyphen": "\u00ad", "hangul_filler": "\u3164", "control": "\x01",
}
VISIBLE = "appeal zq"          # 9 content characters: below min_length 20 however padded
LONG = "the committee decided appeal zq about a permit for a building on the north side"


@pytest.fixture(scope="module")
def db(cluster):
    conn = cluster.create_db("pgc_content_rule")
    conn.execute("""
        CREATE TABLE parents (id bigint PRIMARY KEY, kind text NOT NULL, title text);
        CREATE TABLE items (id bigint PRIMARY KEY, parent_id bigint NOT NULL, body text NOT NULL,
                            tsv tsvector GENERATED ALWAYS AS (corpus.bm25_document(body, 'english')) STORED,
                            emb vector(3))""")
    rows_p, rows_i = [(1, "public", "A real title")], [(1, 1, LONG, "[1,0,0]")]
    for n, (name, ch) in enumerate(BLANKS.items()):
        blank_parent, padded_item, parent_item = 100 + n, 1000 + n, 2000 + n
        rows_p.append((blank_parent, "public", ch * 3))
        # an item whose parent's title is blank
        rows_i.append((parent_item, blank_parent, LONG, "[1,0,0]"))
        # an item padded with the character at both ends to well over min_length
        rows_i.append((padded_item, 1, ch * 30 + VISIBLE + ch * 30, "[1,0,0]"))
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO parents VALUES (%s, %s, %s)", rows_p)
        cur.executemany("INSERT INTO items (id, parent_id, body, emb) VALUES (%s, %s, %s, %s)", rows_i)
    conn.execute("SELECT corpus.corpus_create('content', isolation => '{\"kind\": \"public\"}')")
    conn.execute("""SELECT corpus.corpus_add_source('content', 'items', 'items', text_column => 'body',
                        tsv_column => 'tsv', embedding_column => 'emb', parent_table => 'parents',
                        parent_fk => 'parent_id', parent_required => '{title}', min_length => 20,
                        language => 'english')""")
    conn.execute("SELECT corpus.corpus_refresh_lexical_stats('content')")
    yield conn
    conn.close()


def ids(db, mode, k=200):
    rows = db.execute("SELECT item_id FROM corpus.corpus_hybrid_search('content', '[1,0,0]', 'appeal zq', "
                      "k => %s, mode => %s, max_per_parent => 0)", [k, mode]).fetchall()
    return {int(r[0]) for r in rows}


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "lexical"])
def test_only_the_item_with_content_and_a_titled_parent_is_searchable(db, mode):
    assert ids(db, mode) == {1}


def test_the_statistics_count_only_items_with_content(db):
    documents = db.execute("SELECT documents FROM corpus.lexical_totals WHERE corpus = 'content'").fetchone()[0]
    assert documents == 1


@pytest.mark.parametrize("name", sorted(BLANKS))
def test_find_similar_answers_an_item_without_content_like_a_missing_one(db, name):
    n = list(BLANKS).index(name)
    with pytest.raises(psycopg.Error) as missing:
        db.execute("SELECT * FROM corpus.corpus_find_similar('content', 'items', '999999')").fetchall()
    for item in (1000 + n, 2000 + n):
        with pytest.raises(psycopg.Error) as e:
            db.execute("SELECT * FROM corpus.corpus_find_similar('content', 'items', %s)", [str(item)]).fetchall()
        assert e.value.sqlstate == missing.value.sqlstate, item


def test_the_health_check_counts_each_hidden_item_by_its_rule(db):
    with db.cursor(row_factory=psycopg.rows.dict_row) as cur:
        rows = cur.execute("SELECT * FROM corpus.corpus_health_check('content')").fetchall()
    contract = next(r for r in rows if r["check"] == "searchable_contract")
    d = contract["detail"]
    assert (d["below_min_length"], d["items_hidden_by_incomplete_parents"], d["incomplete_parents"]) \
        == (len(BLANKS), len(BLANKS), len(BLANKS)), contract
    assert contract["status"] == "warn", contract


def test_the_content_function_measures_every_class(db):
    for name, ch in BLANKS.items():
        n = db.execute("SELECT corpus._content_length(%s)", [ch * 5 + "ab" + ch * 5]).fetchone()[0]
        assert n == 2, name
    assert db.execute("SELECT corpus._content_length('a \t\u00a0 b')").fetchone()[0] == 3
