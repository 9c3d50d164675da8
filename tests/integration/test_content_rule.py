"""Content means content: white space, invisible characters (zero-width, bidi marks, the BOM)
and control characters are not text. A parent whose required column holds only such
characters is incomplete, a text padded with them to `min_length` is too short — in the
searches, the BM25 statistics, find-similar and the health check alike."""
import re

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


def test_searches_ask_whether_a_stored_text_reaches_the_minimum_as_its_count_says(db):
    """corpus._has_content(text, n), what searches ask, reads a stored text's beginning first:
    for texts stored inline, compressed and out of line, whose content lies at the start, only
    past a long blank beginning, or falls one character short, it answers _content_length >= n."""
    rng = __import__("random").Random(5)
    texts = []
    for name, ch in list(BLANKS.items()) + [("space", " ")]:
        texts += [ch * 30 + VISIBLE + ch * 30,            # 9 content characters
                  ch * 5000 + LONG,                       # content only past a long blank start
                  (ch + "x") * 3000,                      # compressible, one character a step
                  LONG + ch * 9000]
    # incompressible (random letters, Hebrew and emoji: 2 and 4 bytes a character), out of line
    alphabet = "abcdefghij שלוםעולם 😀ž"
    texts += ["".join(rng.choice(alphabet) for _ in range(n)) for n in (0, 1, 19, 20, 21, 300, 20000)]
    db.execute("DROP TABLE IF EXISTS stored")
    db.execute("CREATE TABLE stored (id int, plain text, kept text)")
    db.execute("ALTER TABLE stored ALTER COLUMN plain SET STORAGE EXTERNAL")   # out of line, uncompressed
    with db.cursor() as cur:
        cur.executemany("INSERT INTO stored VALUES (%s, %s, %s)", [(i, t, t) for i, t in enumerate(texts)])
    # (texts over 2 kB go out of line: plain ones uncompressed, kept ones compressed when they
    # shrink)
    assert db.execute("SELECT count(*) FROM stored WHERE pg_column_size(kept) < octet_length(kept)"
                      ).fetchone()[0] > 0, "some values are compressed"
    wrong = db.execute("""
        SELECT s.id, m.n, c.col FROM stored s, generate_series(0, 80) AS m(n),
               LATERAL (VALUES ('plain', s.plain), ('kept', s.kept)) AS c(col, v)
         WHERE corpus._has_content(c.v, m.n) IS DISTINCT FROM (corpus._content_length(c.v) >= m.n)""").fetchall()
    assert wrong == [], wrong[:10]
    for big in (2 ** 31 - 1, 10 ** 6):
        assert db.execute("SELECT bool_or(corpus._has_content(kept, %s)) FROM stored", [big]).fetchone()[0] is False
    assert db.execute("SELECT corpus._has_content('', -1), corpus._has_content(NULL, 1)").fetchone() == (True, None)
    # the searches' contract is written with it
    for mode in ("lexical", "semantic"):
        plan = db.execute("SELECT sql FROM corpus.corpus_explain('content', '[1,0,0]', 'appeal', mode => %s)",
                          [mode]).fetchone()[0]
        assert re.search(r'corpus\._has_content\((i\."body"|\w+\.(doc|item)_text), 20\)', plan), plan
        assert not re.search(r'_content_length\((i\."body"|\w+\.(doc|item)_text)', plan), plan
