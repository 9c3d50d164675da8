#!/usr/bin/env python3
"""Load a BEIR-layout folder into the legal test schema as a corpus plus a gold set.

    .venv/bin/python scripts/load_beir.py URI FOLDER --corpus NAME --gold-set NAME \\
        [--source-kind KIND] [--limit-queries N] [--query-ids FILE] [--min-length N] [--create-schema]

FOLDER holds corpus.jsonl (`_id`, `title`, `text`), queries.jsonl (`_id`, `text`), qrels.tsv
(`query-id`, `corpus-id`, `score`, header line optional) and the e5 vectors corpus.e5s.npy /
queries.e5s.npy (float32 [n, dim], rows in file order; dim = the dimension of
precedent_chunks.embedding, 384 in the test schema).

What it writes (one transaction; nothing is written when any check fails):
  * one `case_law` parent per document: case_number = the document's `_id`, case_name = its title,
    source_kind = KIND (default `beir_<corpus>`), tags = {pg_corpus:load_beir, corpus:<NAME>};
  * one `precedent_chunks` item per document (chunk_index 0): content = "title. text" (the text
    alone when it already starts with the title, or when the title is empty — the string the
    vectors were made from, see the folder's SOURCE.md), embedding = its row of corpus.e5s.npy;
  * the corpus NAME: isolation {"source_kind": KIND}, one source `chunks` (precedent_chunks,
    ts_config simple, locator {doc_id, chunk_id}, min_length = min(50, the shortest non-empty
    document) unless --min-length), so that several sets share the tables without seeing each other;
  * the gold set NAME at level `parent`: one gold query per judged query (text + its row of
    queries.e5s.npy), one judgment per qrels line whose target is the document's case_law.id
    (grade = the score column);
  * the HNSW index precedent_chunks_embedding_idx (vector_cosine_ops, serial build) if the table
    has no cosine HNSW index yet, then ANALYZE.

Running it again replaces the set: the rows of KIND, the source `chunks` and the queries and
judgments of the gold set are rewritten. A document keeps its case_law.id (and its item id) as
long as its `_id` is unchanged, so the gold set's stored runs stay comparable across reloads.
It refuses to touch rows of KIND that it did not load itself, and a corpus or gold set of the
same name that is defined differently.

Importable: load_beir(conn, folder, corpus=..., gold_set=...) returns a LoadResult;
doc_ids(conn, corpus) maps case_law ids (the gold set's targets and the stored rankings) back to
the folder's document ids.
"""
import argparse
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
LEGAL_SCHEMA = ROOT / "tests" / "fixtures" / "legal_schema.sql"
MARKER = "pg_corpus:load_beir"
DEFAULT_MIN_LENGTH = 50          # the extension's default for corpus_add_source
NAME_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
GOLD_RE = re.compile(r"^[a-z_][a-z0-9_.-]{0,62}$")


class LoadError(Exception):
    """A problem with the folder or the arguments; nothing was written."""


@dataclass
class BeirSet:
    docs: list                 # [{"_id", "title", "text"}] in file order
    doc_vecs: np.ndarray       # [len(docs), dim] float32
    queries: list              # the selected queries [{"_id", "text"}], file order
    query_vecs: np.ndarray     # their vectors
    qrels: dict                # query id -> {doc id: grade}, selected queries only
    skipped_unjudged: int = 0  # queries of queries.jsonl without any judgment (not loaded)


@dataclass
class LoadResult:
    corpus: str
    gold_set: str
    source_kind: str
    documents: int
    empty_documents: list
    shortest_document: int
    min_length: int
    queries: int
    judgments: int
    skipped_unjudged_queries: int
    reused_ids: int
    index_built: bool
    seconds: float
    removed_documents: int = 0
    notes: list = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Reading the folder
# ---------------------------------------------------------------------------------------------

def doc_content(doc):
    """The text of a document as it was embedded (SOURCE.md): 'title. text', or the text alone
    when it already starts with the title or the title is empty."""
    title = (doc.get("title") or "").strip()
    text = (doc.get("text") or "").strip()
    if not title:
        return text
    if not text:
        return title
    if text.startswith(title):
        return text
    return f"{title}. {text}"


def _read_jsonl(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise LoadError(f"{path}:{n}: not JSON ({e.msg})") from None
            if not isinstance(obj, dict) or "_id" not in obj:
                raise LoadError(f"{path}:{n}: expected an object with an _id")
            obj["_id"] = str(obj["_id"])
            out.append(obj)
    ids = [o["_id"] for o in out]
    if len(set(ids)) != len(ids):
        seen, dups = set(), []
        for i in ids:
            if i in seen:
                dups.append(i)
            seen.add(i)
        raise LoadError(f"{path}: duplicate _id {dups[:5]}")
    return out


def _read_vectors(path, rows):
    if not path.exists():
        raise LoadError(f"{path} is missing (float32 [n, dim] e5 vectors, rows in file order)")
    v = np.load(path)
    if v.ndim != 2 or v.shape[0] != rows:
        raise LoadError(f"{path}: shape {v.shape}, expected [{rows}, dim] (one row per line)")
    if not np.isfinite(v).all():
        raise LoadError(f"{path}: contains NaN or Infinity")
    return v.astype(np.float32, copy=False)


def _read_qrels(path):
    qrels, where = {}, {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            parts = line.split("\t")
            if n == 1 and parts[0] in ("query-id", "query_id", "qid"):
                continue  # header
            if len(parts) != 3:
                raise LoadError(f"{path}:{n}: expected query-id<TAB>corpus-id<TAB>score")
            q, d, s = parts
            try:
                grade = float(s)
            except ValueError:
                raise LoadError(f"{path}:{n}: score {s!r} is not a number") from None
            if grade != int(grade) or grade < 0:
                raise LoadError(f"{path}:{n}: score {s!r} must be a non-negative integer grade")
            if d in qrels.setdefault(q, {}):
                raise LoadError(f"{path}:{n}: duplicate judgment of query {q!r} and document "
                                f"{d!r} (first on line {where[(q, d)]})")
            qrels[q][d] = int(grade)
            where[(q, d)] = n
    return qrels


def read_beir(folder, limit_queries=None, query_ids=None):
    """Read and check a BEIR folder. Only judged queries are kept (as trec_eval and BEIR do);
    query_ids (an iterable of ids, or None) and limit_queries (the first N, file order) narrow
    them further."""
    folder = Path(folder)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels.tsv"):
        if not (folder / name).exists():
            raise LoadError(f"{folder / name} is missing (BEIR layout: corpus.jsonl, "
                            "queries.jsonl, qrels.tsv, corpus.e5s.npy, queries.e5s.npy)")
    docs = _read_jsonl(folder / "corpus.jsonl")
    doc_vecs = _read_vectors(folder / "corpus.e5s.npy", len(docs))
    queries = _read_jsonl(folder / "queries.jsonl")
    query_vecs = _read_vectors(folder / "queries.e5s.npy", len(queries))
    if doc_vecs.shape[1] != query_vecs.shape[1]:
        raise LoadError(f"document vectors have {doc_vecs.shape[1]} dimensions, query vectors "
                        f"{query_vecs.shape[1]}")
    qrels = _read_qrels(folder / "qrels.tsv")
    doc_set = {d["_id"] for d in docs}
    query_set = {q["_id"] for q in queries}
    unknown_q = sorted(set(qrels) - query_set)
    if unknown_q:
        raise LoadError(f"qrels.tsv judges queries that queries.jsonl lacks: {unknown_q[:5]}")
    for q, judged in qrels.items():
        missing = sorted(set(judged) - doc_set)
        if missing:
            raise LoadError(f"qrels.tsv: query {q!r} judges documents that corpus.jsonl lacks: "
                            f"{missing[:5]}")
    judged_rows = [i for i, q in enumerate(queries) if q["_id"] in qrels]
    skipped = len(queries) - len(judged_rows)
    if query_ids is not None:
        wanted = [str(x) for x in query_ids]
        unknown = [x for x in wanted if x not in query_set]
        if unknown:
            raise LoadError(f"--query-ids: unknown query ids {unknown[:5]}")
        unjudged = [x for x in wanted if x not in qrels]
        if unjudged:
            raise LoadError(f"--query-ids: queries without judgments in qrels.tsv {unjudged[:5]}")
        wanted = set(wanted)
        judged_rows = [i for i in judged_rows if queries[i]["_id"] in wanted]
    if limit_queries is not None:
        if limit_queries < 1:
            raise LoadError("--limit-queries must be at least 1")
        judged_rows = judged_rows[:limit_queries]
    if not judged_rows:
        raise LoadError(f"{folder}: no judged query to load")
    sel = [queries[i] for i in judged_rows]
    return BeirSet(docs=docs, doc_vecs=doc_vecs, queries=sel,
                   query_vecs=query_vecs[judged_rows],
                   qrels={q["_id"]: qrels[q["_id"]] for q in sel}, skipped_unjudged=skipped)


def read_query_ids(path):
    """One query id per line; blank lines and lines starting with # are ignored."""
    with open(path, encoding="utf-8") as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]


# ---------------------------------------------------------------------------------------------
# Writing to the database
# ---------------------------------------------------------------------------------------------

def vector_text(row):
    # repr of the float64 value of each float32 parses back (strtof) to the same float32.
    return "[" + ",".join(map(repr, row.tolist())) + "]"


def _one(conn, query, params=None):
    row = conn.execute(query, params).fetchone()
    return row[0] if row else None


def _ensure_schema(conn, create_schema, log):
    has_ext = _one(conn, "SELECT count(*) FROM pg_extension WHERE extname = 'pg_corpus'")
    if not has_ext:
        if not create_schema:
            raise LoadError("the pg_corpus extension is not created in this database "
                            "(pass --create-schema, or CREATE EXTENSION pg_corpus CASCADE)")
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_corpus")
        log("created the extensions vector and pg_corpus")
    have = {t: _one(conn, "SELECT to_regclass(%s) IS NOT NULL", (t,))
            for t in ("case_law", "precedent_chunks")}
    if not any(have.values()):
        if not create_schema:
            raise LoadError("the tables case_law / precedent_chunks do not exist (pass "
                            "--create-schema to create the legal test schema)")
        conn.execute(LEGAL_SCHEMA.read_text())
        log(f"created the legal test schema ({LEGAL_SCHEMA.relative_to(ROOT)})")
    elif not all(have.values()):
        raise LoadError("only one of case_law / precedent_chunks exists: the legal test schema "
                        f"({LEGAL_SCHEMA.relative_to(ROOT)}) has both")


def _embedding_dim(conn):
    t = _one(conn, """SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
                       WHERE a.attrelid = 'precedent_chunks'::regclass AND a.attname = 'embedding'
                         AND NOT a.attisdropped""")
    m = re.fullmatch(r"vector\((\d+)\)", t or "")
    if not m:
        raise LoadError(f"precedent_chunks.embedding is {t or 'missing'}, expected vector(n)")
    return int(m.group(1))


def _guard(conn, corpus, gold_set, kind):
    """Refuse to replace what this loader did not make."""
    not_ours = _one(conn, "SELECT count(*) FROM case_law WHERE source_kind = %s "
                          "AND NOT tags @> ARRAY[%s]", (kind, MARKER))
    if not_ours:
        raise LoadError(f"case_law has {not_ours} rows of source_kind {kind!r} that "
                        "load_beir.py did not load; refusing to replace them (choose another "
                        "--source-kind)")
    others = [r[0] for r in conn.execute(
        """SELECT DISTINCT substr(t, 8) FROM case_law, unnest(tags) AS t
            WHERE source_kind = %s AND t LIKE 'corpus:%%' AND t <> %s ORDER BY 1""",
        (kind, f"corpus:{corpus}"))]
    if others:
        raise LoadError(f"the rows of source_kind {kind!r} were loaded for another corpus "
                        f"({', '.join(others)}); choose another --source-kind")
    row = conn.execute("SELECT isolation FROM corpus.corpora WHERE name = %s", (corpus,)).fetchone()
    if row is not None and row[0] != {"source_kind": kind}:
        raise LoadError(f"corpus {corpus!r} exists with isolation {json.dumps(row[0])}, not "
                        f"{{\"source_kind\": \"{kind}\"}}; drop it (corpus.corpus_drop) or load "
                        "under another --corpus / --source-kind")
    if row is not None:
        other = conn.execute(
            """SELECT name, item_table::text FROM corpus.sources
                WHERE corpus = %s AND name = 'chunks' AND item_table <> 'precedent_chunks'::regclass""",
            (corpus,)).fetchone()
        if other:
            raise LoadError(f"corpus {corpus!r} has a source 'chunks' on {other[1]}, not "
                            "precedent_chunks")
    g = conn.execute("SELECT corpus, level FROM corpus.gold_sets WHERE name = %s",
                     (gold_set,)).fetchone()
    if g is not None and (g[0] != corpus or g[1] != "parent"):
        raise LoadError(f"gold set {gold_set!r} exists for corpus {g[0]!r} at level {g[1]!r}; "
                        "delete it (DELETE FROM corpus.gold_sets WHERE name = ...) or choose "
                        "another --gold-set")
    return g is not None


def _has_cosine_hnsw(conn):
    return bool(_one(conn, """
        SELECT count(*) FROM pg_index x
          JOIN pg_class i ON i.oid = x.indexrelid
          JOIN pg_am am ON am.oid = i.relam
          JOIN pg_opclass oc ON oc.oid = x.indclass[0]
          JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = x.indkey[0]
         WHERE x.indrelid = 'precedent_chunks'::regclass AND am.amname = 'hnsw'
           AND oc.opcname = 'vector_cosine_ops' AND a.attname = 'embedding'
           AND x.indpred IS NULL"""))


def _copy(conn, table, columns, rows):
    """COPY rows into table (a name or a (schema, name) pair)."""
    name = sql.Identifier(*table) if isinstance(table, tuple) else sql.Identifier(table)
    stmt = sql.SQL("COPY {} ({}) FROM STDIN").format(
        name, sql.SQL(", ").join(map(sql.Identifier, columns)))
    with conn.cursor() as cur, cur.copy(stmt) as cp:
        for r in rows:
            cp.write_row(r)


def _ensure_language_column(conn, language, log):
    """precedent_chunks.content_bm25_<language>: pg_corpus' analyser as a generated column with
    a GIN index (one column per language, so sets of several languages share the table); with
    no language, precedent_chunks.content_tsv_simple: PostgreSQL's to_tsvector('simple', ...)
    (the legal schema's own content_tsv is built by the analyser in Hebrew)."""
    if language is None:
        column, expression = "content_tsv_simple", sql.SQL("to_tsvector('simple', content)")
    else:
        if not re.fullmatch(r"[a-z]{2,20}", language):
            raise LoadError(f"invalid language {language!r}")
        column = f"content_bm25_{language}"
        expression = sql.SQL("corpus.bm25_document(content, {})").format(sql.Literal(language))
    exists = _one(conn, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'precedent_chunks'::regclass "
                        "AND attname = %s AND NOT attisdropped", (column,))
    if not exists:
        log(f"  adding precedent_chunks.{column} ({expression.as_string(conn)}) + GIN and BM25 indexes")
        conn.execute(sql.SQL("ALTER TABLE precedent_chunks ADD COLUMN {} tsvector "
                             "GENERATED ALWAYS AS ({}) STORED").format(sql.Identifier(column), expression))
        conn.execute(sql.SQL("CREATE INDEX {} ON precedent_chunks USING gin ({})").format(
            sql.Identifier(f"precedent_chunks_{column}_idx"), sql.Identifier(column)))
        if language is not None:
            conn.execute(sql.SQL("CREATE INDEX {} ON precedent_chunks USING corpus_bm25 ({})").format(
                sql.Identifier(f"precedent_chunks_{column}_bm25"), sql.Identifier(column)))
    return column


def load_beir(conn, folder, corpus, gold_set, source_kind=None, limit_queries=None,
              query_ids=None, create_schema=False, min_length=None, description=None, log=None,
              language=None):
    """Load FOLDER into the database of `conn` (a psycopg 3 connection; autocommit or not, the
    load is one transaction of its own). Returns a LoadResult; raises LoadError for a problem
    with the folder or the arguments (nothing is written) and psycopg errors from the server."""
    log = log or (lambda msg: None)
    started = time.monotonic()
    folder = Path(folder)
    if not NAME_RE.match(corpus or ""):
        raise LoadError(f"invalid corpus name {corpus!r} (lower-case identifier, "
                        "^[a-z_][a-z0-9_]{0,62}$)")
    if not GOLD_RE.match(gold_set or ""):
        raise LoadError(f"invalid gold set name {gold_set!r} (^[a-z_][a-z0-9_.-]{{0,62}}$)")
    kind = source_kind or f"beir_{corpus}"
    data = read_beir(folder, limit_queries=limit_queries, query_ids=query_ids)
    contents = [doc_content(d) for d in data.docs]
    lengths = [len(c) for c in contents]
    empty = [d["_id"] for d, n in zip(data.docs, lengths) if n == 0]
    shortest = min((n for n in lengths if n > 0), default=0)
    if min_length is None:
        min_length = max(1, min(DEFAULT_MIN_LENGTH, shortest))
    elif min_length < 0:
        raise LoadError("--min-length must be >= 0")
    dropped = [d["_id"] for d, n in zip(data.docs, lengths) if 0 < n < min_length]
    notes = []
    if empty:
        notes.append(f"{len(empty)} empty document(s) loaded but never searchable: {empty[:10]}")
    if dropped:
        notes.append(f"{len(dropped)} document(s) shorter than min_length {min_length} are "
                     f"never searchable: {dropped[:10]}")

    with conn.transaction():
        _ensure_schema(conn, create_schema, log)
        dim = _embedding_dim(conn)
        if dim != data.doc_vecs.shape[1]:
            raise LoadError(f"the vectors have {data.doc_vecs.shape[1]} dimensions, "
                            f"precedent_chunks.embedding is vector({dim})")
        # Writers wait, readers do not; two loads of the same tables run one after the other.
        conn.execute("LOCK TABLE case_law, precedent_chunks IN SHARE ROW EXCLUSIVE MODE")
        gold_exists = _guard(conn, corpus, gold_set, kind)

        # Stable ids: a document keeps its parent and item id across reloads.
        old = {r[0]: (r[1], r[2]) for r in conn.execute(
            """SELECT c.case_number, c.id,
                      (SELECT min(p.id) FROM precedent_chunks p
                        WHERE p.case_law_id = c.id AND p.chunk_index = 0)
                 FROM case_law c WHERE c.source_kind = %s""", (kind,))}
        if _one(conn, "SELECT count(*) FROM corpus.sources WHERE corpus = %s AND name = 'chunks'",
                (corpus,)):
            conn.execute("SELECT corpus.corpus_drop_source(%s, 'chunks')", (corpus,))
        conn.execute("DELETE FROM case_law WHERE source_kind = %s", (kind,))  # items cascade
        next_parent = max([_one(conn, "SELECT coalesce(max(id), 0) FROM case_law")] +
                          [p for p, _ in old.values()]) + 1
        next_item = max([_one(conn, "SELECT coalesce(max(id), 0) FROM precedent_chunks")] +
                        [i for _, i in old.values() if i is not None]) + 1
        parent_of, item_of, reused = {}, {}, 0
        for d in data.docs:
            prev = old.get(d["_id"])
            if prev:
                parent_of[d["_id"]] = prev[0]
                reused += 1
            else:
                parent_of[d["_id"]] = next_parent
                next_parent += 1
            if prev and prev[1] is not None:
                item_of[d["_id"]] = prev[1]
            else:
                item_of[d["_id"]] = next_item
                next_item += 1
        tags = [MARKER, f"corpus:{corpus}"]
        _copy(conn, "case_law", ["id", "case_number", "case_name", "source_kind", "tags"],
              ([parent_of[d["_id"]], d["_id"], (d.get("title") or "").strip() or None, kind, tags]
               for d in data.docs))
        _copy(conn, "precedent_chunks",
              ["id", "case_law_id", "chunk_index", "content", "embedding"],
              ([item_of[d["_id"]], parent_of[d["_id"]], 0, c, vector_text(v)]
               for d, c, v in zip(data.docs, contents, data.doc_vecs)))
        log(f"  {len(data.docs)} documents as case_law + precedent_chunks "
            f"(source_kind {kind!r}, {reused} ids kept from the previous load)")

        if not _one(conn, "SELECT count(*) FROM corpus.corpora WHERE name = %s", (corpus,)):
            conn.execute(
                "SELECT corpus.corpus_create(%s, isolation => %s::jsonb, description => %s)",
                (corpus, json.dumps({"source_kind": kind}),
                 f"BEIR folder {folder.name} (case_law.source_kind = {kind}), "
                 "loaded by scripts/load_beir.py"))
        # --language: pg_corpus' analyser (a generated column per language); else PostgreSQL's
        # to_tsvector('simple', ...) (a column of its own)
        tsv_column = _ensure_language_column(conn, language, log)
        conn.execute(
            """SELECT corpus.corpus_add_source(%s, 'chunks', 'precedent_chunks',
                   text_column => 'content', tsv_column => %s,
                   embedding_column => 'embedding', parent_table => 'case_law',
                   parent_fk => 'case_law_id', parent_required => '{case_number}',
                   locator => '{"doc_id": "parent.case_number", "chunk_id": "id"}',
                   metadata => '{"title": "parent.case_name"}',
                   min_length => %s, ts_config => 'simple', language => %s)""",
            (corpus, tsv_column, min_length, language))

        n_judgments = sum(len(j) for j in data.qrels.values())
        desc = description or (f"BEIR folder {folder.name}: {len(data.queries)} queries, "
                               f"{n_judgments} judgments (targets are case_law ids; "
                               "case_law.case_number is the document _id)")
        if gold_exists:
            conn.execute("DELETE FROM corpus.gold_queries WHERE gold_set = %s", (gold_set,))
            conn.execute("UPDATE corpus.gold_sets SET description = %s WHERE name = %s",
                         (desc, gold_set))
        else:
            conn.execute("SELECT corpus.corpus_gold_set_create(%s, %s, 'parent', %s)",
                         (gold_set, corpus, desc))
        _copy(conn, ("corpus", "gold_queries"), ["gold_set", "query_id", "query_text", "query_vec"],
              ([gold_set, q["_id"], q.get("text") or None, vector_text(v)]
               for q, v in zip(data.queries, data.query_vecs)))
        _copy(conn, ("corpus", "gold_judgments"), ["gold_set", "query_id", "target", "grade"],
              ([gold_set, q["_id"], str(parent_of[doc]), grade]
               for q in data.queries for doc, grade in data.qrels[q["_id"]].items()))
        log(f"  gold set {gold_set!r}: {len(data.queries)} queries, {n_judgments} judgments "
            f"({data.skipped_unjudged} unjudged queries of queries.jsonl not loaded)")

        index_built = False
        if not _has_cosine_hnsw(conn):
            conn.execute("SET LOCAL max_parallel_maintenance_workers = 0")  # CVE-2026-3172
            conn.execute("CREATE INDEX precedent_chunks_embedding_idx ON precedent_chunks "
                         "USING hnsw (embedding vector_cosine_ops)")
            index_built = True
            log("  built the HNSW index precedent_chunks_embedding_idx")
        # The search estimates a corpus' slice with the planner: statistics must be current.
        conn.execute("ANALYZE case_law, precedent_chunks")

    gold_queries = conn.execute("SELECT (SELECT count(*) FROM corpus.gold_queries WHERE gold_set = %s)",
                                (gold_set,)).fetchone()[0]
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        conn.commit()
    for n in notes:
        log("  note: " + n)
    return LoadResult(
        corpus=corpus, gold_set=gold_set, source_kind=kind, documents=len(data.docs),
        empty_documents=empty, shortest_document=shortest, min_length=min_length,
        queries=gold_queries, judgments=n_judgments, skipped_unjudged_queries=data.skipped_unjudged,
        reused_ids=reused, index_built=index_built, seconds=time.monotonic() - started,
        removed_documents=len(set(old) - {d["_id"] for d in data.docs}), notes=notes)


def doc_ids(conn, corpus):
    """{case_law id as text: document _id} of a loaded corpus (its isolation's source_kind)."""
    row = conn.execute("SELECT isolation->>'source_kind' FROM corpus.corpora WHERE name = %s",
                       (corpus,)).fetchone()
    if row is None or row[0] is None:
        raise LoadError(f"corpus {corpus!r} is not a corpus loaded by load_beir.py")
    return {str(i): d for i, d in conn.execute(
        "SELECT id, case_number FROM case_law WHERE source_kind = %s", (row[0],))}


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Load a BEIR folder (corpus.jsonl, queries.jsonl, qrels.tsv, *.e5s.npy) as "
                    "a pg_corpus corpus and gold set in the legal test schema.")
    ap.add_argument("uri", help="libpq URI / conninfo of the target database")
    ap.add_argument("folder", type=Path)
    ap.add_argument("--corpus", required=True, help="corpus name (created or replaced)")
    ap.add_argument("--gold-set", required=True, help="gold set name (created or replaced)")
    ap.add_argument("--source-kind", help="case_law.source_kind of the rows (default beir_<corpus>)")
    ap.add_argument("--limit-queries", type=int, help="load only the first N judged queries")
    ap.add_argument("--query-ids", type=Path, help="file with the query ids to load, one a line")
    ap.add_argument("--min-length", type=int,
                    help="the source's min_length (default: min(50, shortest non-empty document))")
    ap.add_argument("--description", help="the gold set's description")
    ap.add_argument("--language", help="analyse with pg_corpus' analyser in this language "
                    "(english, hebrew, czech, ...: a generated corpus.bm25_document column); "
                    "default: the schema's to_tsvector('simple', ...) column")
    ap.add_argument("--create-schema", action="store_true",
                    help="create the extensions and the legal test schema when missing")
    args = ap.parse_args(argv)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    try:
        ids = read_query_ids(args.query_ids) if args.query_ids else None
        with psycopg.connect(args.uri) as conn:
            r = load_beir(conn, args.folder, corpus=args.corpus, gold_set=args.gold_set,
                          source_kind=args.source_kind, limit_queries=args.limit_queries,
                          query_ids=ids, create_schema=args.create_schema,
                          min_length=args.min_length, description=args.description, log=log,
                          language=args.language)
    except LoadError as e:
        log(f"load_beir: {e}")
        return 2
    except psycopg.Error as e:
        d = e.diag
        log(f"load_beir: {d.sqlstate or ''} {d.message_primary or e}")
        if d.message_detail:
            log(f"detail: {d.message_detail}")
        if d.message_hint:
            log(f"hint: {d.message_hint}")
        return 1
    log(f"loaded {r.documents} documents into corpus {r.corpus!r} and {r.queries} queries / "
        f"{r.judgments} judgments into gold set {r.gold_set!r} in {r.seconds:.1f} s "
        f"(min_length {r.min_length}; shortest document {r.shortest_document} characters)")
    log(f"evaluate: SELECT * FROM corpus.corpus_evaluate('{r.gold_set}');")
    return 0


if __name__ == "__main__":
    sys.exit(main())
