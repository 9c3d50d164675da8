"""A question's function words are not words of its subject: "Kdo je Svoboda? Kde je? Co je
to? Kdy?" finds the short record that names Svoboda through the evidence filter's rare-words
rule, in Czech and in Hebrew, in a small corpus and in a large one.

Each corpus is one short record naming the person among long, loosely related records (leases,
keys, flats; some of them ask their own questions with the same function words), with vector
thresholds set below every distance, as a corpus calibrated on another kind of question would
have: only the rare-words rule can admit the record. A question about someone the corpus never
names returns no rows.
"""
import random

import numpy as np
import pytest
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

DIM = 8

CZECH = dict(
    record="Klíče od bytu byly předány panu Svobodovi. Předání proběhlo v pondělí ráno.",
    question="Kdo je Svoboda? Kde je? Co je to? Kdy?",
    absent="Kdo je Dvořák? Kde je? Co je to?",
    words=("nájemní smlouva byt pronajímatel nájemce klíče vrácení kauce škoda oprava střecha dům "
           "výpověď lhůta měsíc platba faktura úřad žádost rozhodnutí odvolání soud řízení znalec "
           "posudek vlastník pozemek katastr zápis převod kupní cena zástava banka úvěr splátka").split(),
    function=("a je to co v na se že s z do o pro při po ale nebo jako který která které jeho její "
              "jsou byl byla bylo").split(),
    questions=["Kdo je odpovědný za škodu?", "Kde je sídlo pronajímatele?", "Kdy je splatná kauce?",
               "Co je to výpověď?"],
)
HEBREW = dict(
    record="המפתחות לדירה נמסרו למר סבובודה. המסירה התקיימה ביום שני בבוקר.",
    question="מי זה סבובודה? איפה הוא? מה זה?",
    absent="מי זה דבורזק? איפה הוא? מה זה?",
    words=("חוזה שכירות דירה משכיר שוכר מפתחות החזרה ערבון נזק תיקון גג בית הודעה תקופה חודש "
           "תשלום חשבונית לשכה בקשה החלטה ערעור משפט הליך מומחה חוות דעת בעלים מגרש רישום העברה "
           "מכר מחיר משכנתא בנק הלוואה תשלומים").split(),
    function="של את על עם אל כי גם זה זו הוא היא הם לא כל אשר".split(),
    questions=["מי אחראי לנזק?", "איפה משרד המשכיר?", "מה זה ערבון?", "מתי משלמים את הערבון?"],
)
LANGS = {"czech": CZECH, "hebrew": HEBREW}
SIZES = {"small": 60, "large": 3000}


def filler(rng, lang, n):
    """Long records of the language's vocabulary; one in a hundred asks a question of its own."""
    out = []
    for i in range(n):
        words = [rng.choice(lang["words"]) if rng.random() < 0.6 else rng.choice(lang["function"])
                 for _ in range(rng.randint(60, 120))]
        text = " ".join(words) + "."
        if i % 100 == 7:
            text = rng.choice(lang["questions"]) + " " + text
        out.append(text)
    return out


def vector(rng):
    v = np.array([rng.gauss(0, 1) for _ in range(DIM)])
    return "[" + ",".join(f"{x:.5f}" for x in v / np.linalg.norm(v)) + "]"


@pytest.fixture(scope="module")
def db(cluster):
    conn = cluster.create_db("pgc_question_words")
    rng = random.Random(20261203)
    for name, lang in LANGS.items():
        for size, n in SIZES.items():
            corpus = f"{name}_{size}"
            conn.execute(f"""CREATE TABLE {corpus} (
                id bigint PRIMARY KEY, body text NOT NULL,
                body_tsv tsvector GENERATED ALWAYS AS (corpus.bm25_document(body, '{name}')) STORED,
                embedding vector({DIM}))""")
            texts = filler(rng, lang, n - 1)
            texts.insert(rng.randrange(n), lang["record"])
            with conn.cursor() as cur:
                cur.executemany(f"INSERT INTO {corpus} (id, body, embedding) VALUES (%s, %s, %s::vector)",
                                [(i + 1, t, vector(rng)) for i, t in enumerate(texts)])
            conn.execute("SELECT corpus.corpus_create(%s, evidence => %s)",
                         [corpus, Jsonb({"vector": {"default": {"max_distance": 0.0001, "max_gap": 0.0001}}})])
            conn.execute(f"""SELECT corpus.corpus_add_source(%s, 'records', '{corpus}', text_column => 'body',
                             embedding_column => 'embedding', tsv_column => 'body_tsv', parent_fk => 'id', min_length => 10,
                             language => %s)""", [corpus, name])
    return conn


def search(db, corpus, question, **kw):
    args = "".join(f", {k} => %({k})s" for k in kw)
    with db.cursor(row_factory=dict_row) as cur:
        return cur.execute(f"SELECT * FROM corpus.corpus_hybrid_search(%(c)s, %(v)s::vector, %(t)s{args}) "
                           "ORDER BY rank", dict(c=corpus, v=vector(random.Random(1)), t=question, **kw)).fetchall()


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", LANGS)
def test_the_question_finds_the_record_that_names_the_person(db, name, size):
    corpus, lang = f"{name}_{size}", LANGS[name]
    record = db.execute(f"SELECT id::text FROM {corpus} WHERE body = %s", [lang["record"]]).fetchone()[0]
    rows = search(db, corpus, lang["question"], evidence=True)
    assert [r["item_id"] for r in rows] == [record], rows
    rare = rows[0]["evidence"]["rare_words"]
    assert rare["coverage"] == 1.0 and rare["counted_words"] == 1, rare
    # the function words are not even query words
    with db.cursor(row_factory=dict_row) as cur:
        ex = cur.execute("SELECT params FROM corpus.corpus_explain(%s, NULL, %s, evidence => true) "
                         "WHERE strategy = 'evidence_filter'", [corpus, lang["question"]]).fetchone()
    assert len(ex["params"]["rare_words"]["words"]) == 1, ex
    # someone the corpus never names: no rows, not the nearest neighbours
    assert search(db, corpus, lang["absent"], evidence=True) == []
    assert len(search(db, corpus, lang["absent"])) == 10


@pytest.mark.parametrize("name", LANGS)
def test_documents_and_queries_drop_the_same_words(db, name):
    lang = LANGS[name]
    doc = db.execute("SELECT array_agg(lexeme ORDER BY lexeme) FROM unnest(corpus.bm25_document(%s, %s))",
                     [lang["question"], name]).fetchone()[0]
    query = db.execute("SELECT array_agg(key ORDER BY key) FROM corpus.bm25_query(%s, %s)",
                       [lang["question"], name]).fetchone()[0]
    # the same keys: the one content word (with a fallback key in Czech), no function word
    assert doc == query and len([k for k in doc if not k.endswith("*")]) == 1, (doc, query)
    subject = {"czech": "svoboda", "hebrew": "סבובודה"}[name]
    for w in lang["function"] + lang["question"].replace("?", "").lower().split():
        assert w == subject or w not in doc, (w, doc)
