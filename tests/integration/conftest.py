"""Shared fixtures of the out-of-process integration suite.

* `cluster` (session): ONE private PostgreSQL 15 cluster started with scripts/pgcluster.sh in
  ${PG_CORPUS_TEST_DIR:-<repo>/.pgdata/test}; stopped at the end of the session
  (PG_CORPUS_TEST_KEEP=1 leaves it running for debugging).
* `cluster.create_db(name)`: a fresh database with `CREATE EXTENSION vector; CREATE EXTENSION
  pg_corpus`, returned as an autocommit psycopg connection; dropped at the end of the session.
* `pgc` (session): helpers shared by the modules (seeded data generators, the legal schema loader,
  a search wrapper). Everything random is drawn from numpy default_rng with fixed seeds.
"""
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import psycopg
import pytest
from psycopg.rows import dict_row

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
PGCLUSTER = ROOT / "scripts" / "pgcluster.sh"
DIM = 384  # the legal schema's vector(384)

# --------------------------------------------------------------------------------------------
# The cluster
# --------------------------------------------------------------------------------------------


class Cluster:
    def __init__(self, directory: str, uri: str):
        self.dir = directory
        self.uri = uri
        self._conns = []
        self._dbs = []

    def dsn(self, dbname: str) -> str:
        return psycopg.conninfo.make_conninfo(self.uri, dbname=dbname)

    def connect(self, dbname: str = "postgres", **kw) -> psycopg.Connection:
        kw.setdefault("autocommit", True)
        conn = psycopg.connect(self.dsn(dbname), **kw)
        self._conns.append(conn)
        return conn

    def create_db(self, name: str, extensions: bool = True) -> psycopg.Connection:
        """A fresh database (dropped first if a previous run left it) with vector + pg_corpus."""
        with psycopg.connect(self.uri, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
            if extensions:
                have = admin.execute(
                    "SELECT 1 FROM pg_available_extensions WHERE name = 'pg_corpus'").fetchone()
                if not have:
                    pytest.fail("the pg_corpus extension is not installed in this PostgreSQL "
                                "(no pg_corpus.control): run `cargo pgrx install` first",
                                pytrace=False)
        self._dbs.append(name)
        conn = self.connect(name)
        if extensions:
            conn.execute("CREATE EXTENSION vector")
            conn.execute("CREATE EXTENSION pg_corpus")
        return conn

    def close(self):
        for c in self._conns:
            try:
                c.close()
            except Exception:
                pass
        with psycopg.connect(self.uri, autocommit=True) as admin:
            for name in self._dbs:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def cluster():
    directory = os.environ.get("PG_CORPUS_TEST_DIR") or str(ROOT / ".pgdata" / "test")
    res = subprocess.run(["bash", str(PGCLUSTER), "start", directory],
                         capture_output=True, text=True, timeout=180)
    if res.returncode != 0:
        pytest.fail(f"pgcluster.sh start {directory} failed:\n{res.stdout}\n{res.stderr}",
                    pytrace=False)
    uri = res.stdout.strip().splitlines()[-1]
    assert uri.startswith("postgresql://"), uri
    c = Cluster(directory, uri)
    try:
        yield c
    finally:
        try:
            c.close()
        finally:
            if os.environ.get("PG_CORPUS_TEST_KEEP") != "1":
                subprocess.run(["bash", str(PGCLUSTER), "stop", directory],
                               capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="session")
def citus_cluster():
    """A coordinator and two workers with Citus (tests/integration/citus_support.py), in
    ${PG_CORPUS_CITUS_DIR:-<repo>/.pgdata/citus}: only the Citus layer's modules ask for it."""
    import citus_support

    try:
        c = citus_support.CitusCluster.start()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield c
    finally:
        try:
            c.close()
        finally:
            if os.environ.get("PG_CORPUS_TEST_KEEP") != "1":
                c.stop()


# --------------------------------------------------------------------------------------------
# Seeded data
# --------------------------------------------------------------------------------------------

# Pseudo-words are built only from these letters: planted "unique" query words use q/x/z/y/w/j,
# so they can never collide with generated text.
CONSONANTS = "bdfgklmnprstv"
VOWELS = "aeiou"

HEBREW_WORDS = ["ערעור", "הלכה", "בית", "משפט", "עליון", "ועדה", "החלטה", "תביעה", "נזיקין",
                "חוזה", "רשלנות", "פיצויים", "ראיות", "עדות", "פסק", "דין", "מחוזי", "ערר",
                "היטל", "השבחה", "תכנון", "בנייה", "מקרקעין", "תוכנית", "מקומית", "הפקעה"]

COURTS = ["בית המשפט העליון", "בית המשפט המחוזי בירושלים", "בית המשפט המחוזי בתל אביב",
          "ועדת הערר מחוז מרכז"]
PRACTICE_AREAS = ["planning", "betterment_levy", "compensation", "expropriation"]
SECTIONS = ["facts", "arguments", "ruling", "appendix"]


def make_vocab(rng, n):
    words, seen = [], set()
    while len(words) < n:
        syl = rng.integers(2, 5)
        w = "".join(CONSONANTS[rng.integers(len(CONSONANTS))] + VOWELS[rng.integers(len(VOWELS))]
                    for _ in range(syl))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


class TextGen:
    """Random text over a fixed pseudo-word vocabulary, Zipf-like frequencies (seeded)."""

    def __init__(self, seed, vocab_size=2000, hebrew=False):
        self.rng = np.random.default_rng(seed)
        self.vocab = make_vocab(self.rng, vocab_size)
        p = 1.0 / np.arange(1, vocab_size + 1)
        self.p = p / p.sum()
        self.hebrew = hebrew

    def words(self, n):
        idx = self.rng.choice(len(self.vocab), size=n, p=self.p)
        out = [self.vocab[i] for i in idx]
        if self.hebrew:
            for j in range(n):
                if self.rng.random() < 0.3:
                    out[j] = HEBREW_WORDS[self.rng.integers(len(HEBREW_WORDS))]
        return out

    def text(self, lo, hi):
        return " ".join(self.words(int(self.rng.integers(lo, hi + 1))))


def unit(v):
    v = np.asarray(v, dtype=np.float64)
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return (v / n).astype(np.float32)


def random_unit_vectors(rng, n, dim):
    return unit(rng.standard_normal((n, dim)))


def vec_text(v):
    """pgvector text form; float32 values with 9 significant digits round-trip exactly."""
    if v is None:
        return None
    return "[" + ",".join("%.9g" % float(x) for x in np.asarray(v, dtype=np.float32)) + "]"


def generate_legal_data(seed, n_cases=120, n_documents=30, dim=DIM):
    """Seeded rows for the legal schema (tests/fixtures/legal_schema.sql).

    Includes deliberately unsearchable rows: short texts (< 50 chars), NULL embeddings,
    non-approved halachot, cases with an empty or NULL case_name.
    Every item's embedding = normalise(its case's topic + noise).
    """
    rng = np.random.default_rng(seed)
    tg = TextGen(seed + 1, hebrew=True)
    data = {"case_law": [], "precedent_chunks": [], "halachot": [], "document_chunks": []}
    chunk_id, hal_id, doc_chunk_id = 1000, 5000, 9000

    def emb(topic, p_null=0.05):
        if rng.random() < p_null:
            return None
        return unit(topic + rng.standard_normal(dim) * 0.05)

    for cid in range(1, n_cases + 1):
        kind = "external_upload" if rng.random() < 0.5 else "internal_committee"
        court = COURTS[rng.integers(len(COURTS))]
        area = PRACTICE_AREAS[rng.integers(len(PRACTICE_AREAS))]
        r = rng.random()
        name = None if r < 0.04 else ("" if r < 0.07 else "פלוני נ' " + tg.text(1, 3))
        data["case_law"].append(dict(
            id=cid, case_number=f'עע"מ {1000 + cid}/{int(rng.integers(10, 25))}', case_name=name,
            court=court, source_kind=kind, practice_area=area, headnote=tg.text(10, 30),
            summary=tg.text(20, 60), tags=[tg.words(1)[0]]))
        topic = random_unit_vectors(rng, 1, dim)[0]
        for j in range(int(rng.integers(3, 10))):
            chunk_id += 1
            data["precedent_chunks"].append(dict(
                id=chunk_id, case_law_id=cid, chunk_index=j, page_number=int(1 + j // 2),
                content=tg.text(4, 45), embedding=emb(topic)))
        for _ in range(int(rng.integers(0, 4))):
            hal_id += 1
            status = rng.choice(["approved", "pending", "rejected"], p=[0.6, 0.25, 0.15])
            data["halachot"].append(dict(
                id=hal_id, case_law_id=cid, rule=tg.text(6, 30), supporting_quote=tg.text(5, 15),
                page_number=int(rng.integers(1, 20)), review_status=str(status),
                embedding=emb(topic)))
    for did in range(1, n_documents + 1):
        area = PRACTICE_AREAS[rng.integers(len(PRACTICE_AREAS))]
        case_id = int(rng.integers(1, n_cases + 1))
        topic = random_unit_vectors(rng, 1, dim)[0]
        for j in range(int(rng.integers(4, 12))):
            doc_chunk_id += 1
            data["document_chunks"].append(dict(
                id=doc_chunk_id, document_id=did, case_id=case_id, practice_area=area,
                page_number=j + 1, section=SECTIONS[rng.integers(len(SECTIONS))],
                content=tg.text(4, 45), embedding=emb(topic)))
    return data


LEGAL_COLUMNS = {
    "case_law": ["id", "case_number", "case_name", "court", "source_kind", "practice_area",
                 "headnote", "summary", "tags"],
    "precedent_chunks": ["id", "case_law_id", "chunk_index", "page_number", "content",
                         "embedding"],
    "halachot": ["id", "case_law_id", "rule", "supporting_quote", "page_number", "review_status",
                 "embedding"],
    "document_chunks": ["id", "document_id", "case_id", "practice_area", "page_number", "section",
                        "content", "embedding"],
}


def copy_rows(conn, table, columns, rows):
    """COPY dict rows; numpy vectors are written in pgvector's text form."""
    with conn.cursor() as cur:
        with cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as cp:
            for r in rows:
                cp.write_row([vec_text(r[c]) if isinstance(r[c], np.ndarray) else r[c]
                              for c in columns])


def run_sql_file(conn, path):
    conn.execute(Path(path).read_text())


def load_legal(conn, data):
    """legal_schema.sql + data + legal_indexes.sql + legal_corpora.sql, in that order (the data
    is loaded before the corpora are registered, so no embedding starts out stale)."""
    run_sql_file(conn, FIXTURES / "legal_schema.sql")
    for table, cols in LEGAL_COLUMNS.items():
        copy_rows(conn, table, cols, data[table])
    run_sql_file(conn, FIXTURES / "legal_indexes.sql")
    run_sql_file(conn, FIXTURES / "legal_corpora.sql")


# --------------------------------------------------------------------------------------------
# Search wrapper
# --------------------------------------------------------------------------------------------

_DEFAULT = object()
_TYPES = {"k": "int", "filters": "jsonb", "mode": "text", "max_per_parent": "int",
          "candidates": "int", "rrf_k": "int", "include_stale": "bool",
          "feedback": "bool", "extra_queries": "jsonb", "filter_mode": "text", "offset": "int"}


SEARCH_COLUMNS = ("rank, corpus, source, item_id, parent_id, score, semantic_rank, semantic_distance, "
                  "lexical_rank, lexical_score, content, locator, metadata, query_ranks")
# the columns of releases before 0.3.0
SEARCH_COLUMNS_0_2 = SEARCH_COLUMNS.replace(", query_ranks", "")


def search_sql(**kw):
    """SQL + params of one corpus_hybrid_search call; only the named arguments given are passed
    (the rest take their SQL defaults)."""
    args = ["%(corpus)s::text", "%(query_vec)s::vector", "%(query_text)s::text"]
    columns = kw.pop("_columns", SEARCH_COLUMNS)
    params = {"corpus": kw.pop("corpus"), "query_vec": kw.pop("query_vec"),
              "query_text": kw.pop("query_text")}
    if isinstance(params["query_vec"], np.ndarray):
        params["query_vec"] = vec_text(params["query_vec"])
    for name, value in kw.items():
        if value is _DEFAULT:
            continue
        if name in ("filters", "extra_queries") and not isinstance(value, str) and value is not None:
            value = json.dumps(value, default=lambda x: [float(v) for v in x])
        args.append(f'"{name}" => %({name})s::{_TYPES[name]}')
        params[name] = value
    sql = f"SELECT {columns} FROM corpus.corpus_hybrid_search({', '.join(args)}) ORDER BY rank"
    return sql, params


def search(conn, corpus, query_vec, query_text, **kw):
    sql, params = search_sql(corpus=corpus, query_vec=query_vec, query_text=query_text, **kw)
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(sql, params)
        return cur.fetchall()


@pytest.fixture
def role(db, request):
    """A fresh role named by the test module's ROLE, on the module's `db`, dropped with what it
    owns afterwards."""
    name = request.module.ROLE
    db.execute(f"DROP ROLE IF EXISTS {name}")
    db.execute(f"CREATE ROLE {name}")
    yield name
    db.execute(f"DROP OWNED BY {name}")
    db.execute(f"DROP ROLE {name}")


def as_role(conn, role, sql, params=None):
    """Rows of `sql` run under SET ROLE `role` (reset afterwards, also on error)."""
    conn.execute(f"SET ROLE {role}")
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.execute("RESET ROLE")


def drop_roles(conn, roles):
    """Drop test roles with what they own and what was granted to them."""
    for r in roles:
        conn.execute(f"DROP OWNED BY {r}")
        conn.execute(f"DROP ROLE {r}")


def _exists(pid):
    """The process exists, zombies included: pg_ctl (kill(pid, 0)) takes an unreaped postmaster
    for a running one, so a restart waits until it is reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def kill_9_postmaster(directory, timeout=60):
    """SIGKILL the postmaster of the private cluster in `directory` (scripts/pgcluster.sh) and
    wait until it and its children are gone: the crash a restart must recover from."""
    pid = int(Path(directory, "data", "postmaster.pid").read_text().split()[0])
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    kids = [int(p) for p in out.split()]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while _exists(pid) or any(_exists(k) for k in kids):
        if time.monotonic() > deadline:
            raise AssertionError("the postmaster and its children did not exit after SIGKILL")
        time.sleep(0.1)


@pytest.fixture(scope="session")
def pgc():
    return SimpleNamespace(
        ROOT=ROOT, FIXTURES=FIXTURES, LEGAL_COLUMNS=LEGAL_COLUMNS, DIM=DIM, COURTS=COURTS, PRACTICE_AREAS=PRACTICE_AREAS,
        SECTIONS=SECTIONS, DEFAULT=_DEFAULT, SEARCH_COLUMNS=SEARCH_COLUMNS, SEARCH_COLUMNS_0_2=SEARCH_COLUMNS_0_2,
        TextGen=TextGen, make_vocab=make_vocab, unit=unit,
        random_unit_vectors=random_unit_vectors, vec_text=vec_text,
        generate_legal_data=generate_legal_data, load_legal=load_legal, copy_rows=copy_rows,
        run_sql_file=run_sql_file, search=search, search_sql=search_sql, as_role=as_role,
        drop_roles=drop_roles, kill_9_postmaster=kill_9_postmaster,
    )
