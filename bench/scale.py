#!/usr/bin/env python3
r"""Scale benchmark: the legal schema at 100k and 1M chunks (+ N/5 halachot), the
seed's app-side hybrid search against the extension's modes, in one interleaved run.
(docs/scale.md)

    .venv/bin/python bench/scale.py                              # the full run: 100k and 1M
    .venv/bin/python bench/scale.py --sizes 100000               # 100k only
    .venv/bin/python bench/scale.py --sizes 5000,20000 --queries 20 --repeats 2 \
        --pgbench-seconds 3 --json /tmp/scale.json --markdown /tmp/scale.md --plot /tmp/scale.png
    .venv/bin/python bench/scale.py --sizes 1000000 --build-only  # build (or finish) the cache

What it does:
 1. one private cluster per size (bench/harness.py Cluster, in --cache-dir/<size>,
    outside the clone: default $PG_CORPUS_CACHE/scale or ~/.cache/pg_corpus/scale; as root,
    when the postgres OS user cannot enter that folder, /var/tmp/pg_corpus/scale). A size is
    built once: every build step is recorded (table bench_build, mirrored in DIR/build.json)
    with its timing and the data parameters (bench_meta); the next run reuses the finished
    steps and, once all are done, the whole database (--rebuild starts again). Loading commits
    every batch of BATCH rows with its number (bench_batches), so an interrupted load resumes
    where it stopped; an interrupted index build is redone. Build settings: shared_buffers
    --build-shared-buffers, maintenance_work_mem sized for the HNSW graph, parallel
    maintenance workers off (pgvector 0.8.0's parallel HNSW build has a CVE), autovacuum off;
    the run restarts the cluster with shared_buffers sized to the database (--shared-buffers);
 2. the schema is tests/fixtures/legal_schema.sql (vector(384) -> vector(--dim), its CREATE INDEX
    statements run after the load), plus content_bm25 / rule_bm25 tsvector columns GENERATED
    ALWAYS AS (corpus.bm25_document(text, 'hebrew')) STORED with SET STORAGE MAIN (README);
    content_tsv / rule_tsv (to_tsvector('simple', ...)) are the app-side baseline's columns.
    Data (seeded, regenerated batch by batch, so 1M x 1024-d never sits in memory): case_law
    parents (--chunks-per-parent chunks each), source_kind 'external_upload' 47.5%,
    'internal_committee' 47.5%, 'registry' 5%, and no 'withdrawn' rows; precedent_chunks (N) and
    halachot (N/5, random parents, 80% approved, 10% pending, 10% rejected). Text: Zipf words
    (bench/lexical_speed.py's vocabulary() and zipf_probabilities(), --vocab words, exponent
    --zipf) written in Hebrew letters (one letter per Latin letter), 60-150 words per chunk,
    20-50 per halacha; so the Hebrew analyser's prefix letters (ב כ ל מ) apply to about a
    quarter of the words. Embeddings: bench/filtered_ann.py's model (topic centre -> parent ->
    item in a 32-d latent space, random linear map to --dim, shared direction, noise,
    L2-normalised; its gaussian() and unit()), generated per batch; filtered_ann.embeddings()
    itself returns every vector at once, so the batch form is written here once. Binary COPY.
    Indexes: the fixture's B-trees, primary and foreign keys, GIN on the four tsvector columns,
    HNSW (vector_cosine_ops, m=16, ef_construction=64, serial) on both embeddings;
    VACUUM ANALYZE;
 3. corpora (language => 'hebrew', sources chunks and approved halachot, as
    tests/fixtures/legal_corpora.sql): external_precedents (external_upload, the measured
    corpus), internal_decisions (internal_committee), slice5 (registry: 5% of the parents, for
    the recall target) and empty_corpus (source_kind 'withdrawn': no rows, the fixed cost).
    A reused database keeps its corpora while the installed extension SQL is the same; when it
    changed, the extension is recreated (the BM25 columns are turned into plain columns first,
    DROP EXPRESSION, so that they and their indexes survive), corpora are redefined; when only
    the library changed, the lexical statistics are refreshed. Either way the stored BM25
    tsvectors of 500 rows per table must equal what the installed analyser produces now;
 4. --queries query texts (3-6 words, 1-3 of the 20 most frequent, the rest log-uniform over the
    rarer ranks, like lexical_speed.py's mixed queries) with query vectors (random chunks,
    perturbed), also stored in table bench_queries for pgbench;
 5. measures, every method in its own warmed-up session per size, all sizes interleaved: per
    round every (size, method, query) in a new shuffled order, --repeats rounds; a query's
    latency is the median of its rounds (wall clock at the client, local socket); p50/p95 over
    the queries. Methods:
      app_side        the seed's Python service: semantic chunks, semantic halachot (ORDER BY
                      embedding <=> v LIMIT 40, pgvector defaults), lexical chunks, lexical
                      halachot (ts_rank_cd over content_tsv / rule_tsv with an OR tsquery,
                      LIMIT 40), each joined to case_law with the source_kind filter (halachot:
                      approved), RRF (k 60) and the per-case_law_id cap (3) in Python, then one
                      content fetch query for the 10 hits
      hybrid          SELECT * FROM corpus.corpus_hybrid_search('external_precedents', v, text,
                      k => 10)
      semantic        the same, mode => 'semantic'
      lexical         the same, mode => 'lexical'
      bare            one bare branch: bench/filtered_ann.py's plain SQL (precedent_chunks JOIN
                      case_law, source_kind filter, ORDER BY embedding <=> v LIMIT 40,
                      pgvector defaults)
      empty           hybrid search of empty_corpus (same tables, no rows): the fixed cost
      slice_semantic  semantic mode on slice5 with max_per_parent => 0: recall@10 against the
                      exact top-10 computed with numpy over the slice's stored vectors (both
                      sources), and the rows returned
    then, once per query, lexical mode with SET pg_corpus.bm25_candidate_budget = 10^9
    (exhaustive BM25, as bench/lexical_speed.py does): overlap@10 of lexical mode with it;
 6. QPS of the hybrid search with pgbench (-n -f bench/scale/hybrid.sql -c N -j N -T
    --pgbench-seconds) at --clients, per size (sizes one after the other, the other clusters
    idle);
 7. profile of the largest size: EXPLAIN (ANALYZE, BUFFERS) of every subplan that
    corpus.corpus_explain prints for --explain-queries queries (main corpus, hybrid), the slice's
    semantic subplans and the empty corpus' subplans, run under the SET LOCALs it prints
    (bench/lexical_speed.py's explain()); the call's server time, and the durations of the
    statements a call runs inside (auto_explain, lexical_speed.call_profile());
 8. writes bench/out/raw/scale.json (raw numbers, machine, timestamps; not committed), docs/scale.png (p50
    against size per method, log-log; QPS against clients) and the results section of
    docs/scale.md (between the results:begin / results:end markers).

Clusters are stopped at the end unless --keep. --render-only rewrites the markdown and the plot
from --raw.
"""
import json
import math
import os
import re
import struct
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parent))
import filtered_ann as fa      # noqa: E402  the legal schema's values, the plain SQL
import harness as h            # noqa: E402
import lexical_speed as ls     # noqa: E402  EXPLAIN and nested-statement helpers, machine info

ROOT = fa.ROOT
DBNAME = "scale"
PGBENCH = Path("/usr/lib/postgresql/15/bin/pgbench")
PGBENCH_SCRIPT = ROOT / "bench" / "scale" / "hybrid.sql"
SCHEMA_FIXTURE = ROOT / "tests" / "fixtures" / "legal_schema.sql"
LANGUAGE = "hebrew"
BATCH = 10_000                 # rows per COPY batch (one transaction each)
GENERATOR = 1                  # bump when the generated data changes
SCHEMA_VERSION = 3             # bump when the DDL changes

# source_kind -> share of the parents (the last takes the rest), its corpus
KINDS = [("registry", 0.05, "slice5"),
         ("external_upload", 0.475, "external_precedents"),
         ("internal_committee", None, "internal_decisions")]
EMPTY_KIND, EMPTY = "withdrawn", "empty_corpus"
MAIN, MAIN_KIND = "external_precedents", "external_upload"
SLICE, SLICE_KIND = "slice5", "registry"
N_SOURCES = 2                  # sources of every corpus: chunks and halachot
REVIEW = (["approved", "pending", "rejected"], [0.8, 0.1, 0.1])
HEBREW = str.maketrans("bdfgklmnprstvzaeiou", "בדצגכלמנפרסתחזאעיוה")
COURTS = fa.COURTS
AREAS = fa.AREAS
APP_WINDOW = fa.SQL_LIMIT      # 40 per branch, as the extension's default window for k = 10
RRF_K, APP_CAP = 60, 3
BUDGET_EXHAUSTIVE = ls.BUDGET_EXHAUSTIVE

METHODS = {
    "app_side": "the seed's Python service: 4 branch queries + a content fetch, RRF (k 60) and "
                "the per-case_law_id cap (3) in Python",
    "hybrid": "corpus_hybrid_search(external_precedents, v, text, k => 10)",
    "semantic": "the same, mode => 'semantic'",
    "lexical": "the same, mode => 'lexical'",
    "bare": "one bare branch: precedent_chunks JOIN case_law WHERE source_kind = ... "
            "ORDER BY embedding <=> v LIMIT 40, pgvector defaults",
    "empty": "hybrid search of empty_corpus (no rows in the same tables): the fixed cost",
    "slice_semantic": "semantic mode on slice5 (5% of the parents), max_per_parent => 0",
}
SHORT = {"app_side": "app-side hybrid (seed)", "hybrid": "hybrid", "semantic": "semantic mode",
         "lexical": "lexical mode", "bare": "bare branch (1 source)",
         "empty": "empty corpus (hybrid)", "slice_semantic": "5% slice, semantic"}
EXT_SQL = {
    "hybrid": ("SELECT * FROM corpus.corpus_hybrid_search(%(c)s, %(v)s::vector, %(t)s, "
               "k => %(k)s)", "score"),
    "semantic": ("SELECT * FROM corpus.corpus_hybrid_search(%(c)s, %(v)s::vector, NULL, "
                 "k => %(k)s, mode => 'semantic')", "semantic_distance"),
    "lexical": ("SELECT * FROM corpus.corpus_hybrid_search(%(c)s, NULL, %(t)s, k => %(k)s, "
                "mode => 'lexical')", "lexical_score"),
    "empty": ("SELECT * FROM corpus.corpus_hybrid_search(%(c)s, %(v)s::vector, %(t)s, "
              "k => %(k)s)", "score"),
    "slice_semantic": ("SELECT * FROM corpus.corpus_hybrid_search(%(c)s, %(v)s::vector, NULL, "
                       "k => %(k)s, mode => 'semantic', max_per_parent => 0)",
                       "semantic_distance"),
}
EXT_CORPUS = {"hybrid": MAIN, "semantic": MAIN, "lexical": MAIN, "empty": EMPTY,
              "slice_semantic": SLICE}
BARE_SQL = fa.plain_sql(MAIN)          # the join form with %(v)s and %(kind)s

# the targets: (id, label, method ratio, threshold, <= or >=, judged at size or None)
TARGETS = [
    ("hybrid_vs_semantic", "hybrid p50 / semantic mode p50", 2.0, "<=", None),
    ("hybrid_vs_app", "hybrid p50 / app-side hybrid p50", 0.03, "<=", None),
    ("semantic_vs_bare", "semantic p50 / (bare branch p50 × 2 sources)", 2.5, "<=", None),
    ("lexical_vs_semantic", "lexical mode p50 / semantic mode p50", 1.5, "<=", 1_000_000),
    ("lexical_overlap", "lexical overlap@10 with exhaustive BM25 (mean)", 0.95, ">=", 1_000_000),
    ("empty_fixed_cost", "empty corpus (hybrid) p50, ms", 0.5, "<=", None),
    ("slice_recall", "5% slice recall@10 (mean), semantic mode", 0.95, ">=", 1_000_000),
    ("slice_rows", "5% slice: fewest rows returned (k = 10)", 10, ">=", 1_000_000),
]

log = h.log


# --------------------------------------------------------------------------------------------
# Folders and clusters
# --------------------------------------------------------------------------------------------

def postgres_can_enter(path):
    """As root, the cluster runs as the postgres OS user: it must be able to reach `path`."""
    if os.geteuid() != 0:
        return True
    p = Path(path)
    while not p.exists():
        p = p.parent
    res = subprocess.run(["runuser", "-u", "postgres", "--", "test", "-x", str(p)],
                         capture_output=True)
    return res.returncode == 0


def cache_dir(a):
    if a.cache_dir:
        return Path(a.cache_dir).expanduser()
    base = os.environ.get("PG_CORPUS_CACHE")
    d = Path(base) / "scale" if base else Path.home() / ".cache" / "pg_corpus" / "scale"
    if not postgres_can_enter(d):
        fallback = Path("/var/tmp/pg_corpus/scale")
        log(f"the postgres OS user cannot enter {d} (home folder not traversable): "
            f"using {fallback}")
        return fallback
    return d


def gb(nbytes):
    return f"{nbytes / 2**30:.1f} GB"


def mem_setting(nbytes, floor=256 * 2**20):
    """A memory setting in MB, rounded up to 64 MB."""
    mb = max(nbytes, floor) / 2**20
    return f"{int(math.ceil(mb / 64) * 64)}MB"


def ram_bytes():
    try:
        kb = int(Path("/proc/meminfo").read_text().split("\n")[0].split()[1])
        return kb * 1024
    except (OSError, ValueError, IndexError):
        return 8 * 2**30


def hnsw_memory(n_items, dim):
    """maintenance_work_mem for an in-memory HNSW build of n_items (pgvector keeps the vector
    and the neighbour lists of every element, m = 16: ~700 bytes besides the vector), +25%."""
    return int(n_items * (4 * dim + 700) * 1.25)


def start_cluster(directory, settings):
    """Start (or restart) the cluster in `directory` with these server settings."""
    return h.Cluster(directory, settings).start()


def build_settings(a, data):
    return {"shared_buffers": a.build_shared_buffers,
            "maintenance_work_mem": a.maintenance_work_mem or mem_setting(
                max(hnsw_memory(data.n_chunks, a.dim), 2**30)),
            "max_parallel_maintenance_workers": "0",
            "autovacuum": "off",
            "max_wal_size": "8GB",
            "checkpoint_timeout": "1800"}


def run_settings(a, db_bytes):
    if a.shared_buffers != "auto":
        sb = a.shared_buffers
    else:
        sb = mem_setting(min(db_bytes * 1.1, 0.35 * ram_bytes()))
    return {"shared_buffers": sb, "max_parallel_maintenance_workers": "0",
            "autovacuum": "on", "max_wal_size": "8GB", "checkpoint_timeout": "300"}


# --------------------------------------------------------------------------------------------
# Data: seeded, generated batch by batch
# --------------------------------------------------------------------------------------------

class Data:
    """Everything small is generated at once from the seed (parents, latent points, the map to
    `dim` dimensions, vocabulary); text and vectors per batch, each batch from its own seeded
    generators, so that any batch can be (re)generated alone."""

    def __init__(self, a, size):
        self.a, self.size, self.dim = a, size, a.dim
        cpp = a.chunks_per_parent
        self.n_parents = size // cpp
        self.n_chunks = self.n_parents * cpp
        self.n_halachot = int(round(size * a.halachot_ratio))
        rng = np.random.default_rng(a.seed)
        self.kind_of = np.empty(self.n_parents, dtype=object)
        order = rng.permutation(self.n_parents)
        start = 0
        for kind, share, _ in KINDS:
            n = self.n_parents - start if share is None else round(share * self.n_parents)
            self.kind_of[order[start:start + n]] = kind
            start += n
        # embeddings: bench/filtered_ann.py's model (see its embeddings()), in batches
        dims = min(h.LATENT_DIM, a.dim)
        self.latent_dim = dims
        parent_cluster = rng.integers(a.clusters, size=self.n_parents)
        centres = h.gaussian(rng, a.clusters, dims, 1.0)
        parents = centres[parent_cluster] + h.gaussian(rng, self.n_parents, dims, 0.6)
        self.chunk_parent = np.repeat(np.arange(self.n_parents), cpp)
        self.chunk_latent = parents[self.chunk_parent] + h.gaussian(rng, self.n_chunks, dims, 0.5)
        self.halacha_parent = np.sort(rng.integers(self.n_parents, size=self.n_halachot))
        self.halacha_latent = (parents[self.halacha_parent]
                               + h.gaussian(rng, self.n_halachot, dims, 0.5))
        self.review = rng.choice(REVIEW[0], size=self.n_halachot, p=REVIEW[1])
        self.projection = h.gaussian(rng, dims, a.dim, 1.0)
        self.common = h.gaussian(rng, 1, a.dim, 0.8)
        # text: bench/lexical_speed.py's Zipf vocabulary, in Hebrew letters
        self.vocab = np.array([w.translate(HEBREW) for w in h.vocabulary(rng, a.vocab)],
                              dtype=object)
        self.cdf = np.cumsum(h.zipf_probabilities(a.vocab, a.zipf))

    def embed(self, points, noise_rng):
        return h.unit(points @ self.projection + self.common
                       + h.gaussian(noise_rng, len(points), self.dim, 0.3))

    def texts(self, rng, n, lo_words, hi_words):
        lengths = rng.integers(lo_words, hi_words + 1, size=n)
        ranks = np.minimum(np.searchsorted(self.cdf, rng.random(int(lengths.sum())) * self.cdf[-1]),
                           len(self.vocab) - 1)
        words = self.vocab[ranks]
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        return [" ".join(words[bounds[i]:bounds[i + 1]]) for i in range(n)]

    def batches(self, table):
        n = self.n_chunks if table == "precedent_chunks" else self.n_halachot
        return (n + BATCH - 1) // BATCH

    def batch(self, table, b):
        """(first row index, texts, vectors) of batch b of a table."""
        code = 1 if table == "precedent_chunks" else 2
        a = self.a
        lo = b * BATCH
        if table == "precedent_chunks":
            hi = min(lo + BATCH, self.n_chunks)
            texts = self.texts(np.random.default_rng([a.seed, code, b, 0]), hi - lo,
                               a.min_words, a.max_words)
            latent = self.chunk_latent[lo:hi]
        else:
            hi = min(lo + BATCH, self.n_halachot)
            texts = self.texts(np.random.default_rng([a.seed, code, b, 0]), hi - lo,
                               a.halacha_min_words, a.halacha_max_words)
            latent = self.halacha_latent[lo:hi]
        vecs = self.embed(latent, np.random.default_rng([a.seed, code, b, 1]))
        return lo, texts, vecs

    def queries(self, n):
        """n query texts (lexical_speed.py's mixed queries: 3-6 words, 1-3 of the top 20,
        the rest log-uniform over the rarer ranks) with vectors near random chunks."""
        qrng = np.random.default_rng([self.a.seed, 7])
        top, size = ls.TOP_COMMON, len(self.vocab)
        out = []
        for _ in range(n):
            m = int(qrng.integers(3, 7))
            c = int(qrng.integers(1, min(3, m - 1) + 1))
            picked = [int(r) for r in qrng.choice(top, size=c, replace=False)]
            while len(picked) < m:
                r = int(np.exp(qrng.uniform(np.log(top + 1), np.log(size + 1)))) - 1
                if top <= r < size and r not in picked:
                    picked.append(r)
            qrng.shuffle(picked)
            out.append({"ranks": picked, "text": " ".join(self.vocab[r] for r in picked)})
        picks = qrng.choice(self.n_chunks, size=n, replace=False)
        vecs = self.embed(self.chunk_latent[picks]
                          + h.gaussian(qrng, n, self.latent_dim, 0.4), qrng)
        for q, v in zip(out, vecs):
            q["vector"] = v
            q["vtext"] = h.vec_text(v)
            q["words"] = q["text"].split()
        return out


def data_params(a, size):
    """What a built database depends on; a stored database with other values is rebuilt."""
    return dict(size=size, halachot_ratio=a.halachot_ratio, dim=a.dim,
                chunks_per_parent=a.chunks_per_parent, clusters=a.clusters, vocab=a.vocab,
                zipf=a.zipf, words=[a.min_words, a.max_words],
                halacha_words=[a.halacha_min_words, a.halacha_max_words], seed=a.seed,
                kinds=[[k, s] for k, s, _ in KINDS], review=[list(REVIEW[0]), list(REVIEW[1])],
                language=LANGUAGE, batch=BATCH, generator=GENERATOR, schema=SCHEMA_VERSION)


# --------------------------------------------------------------------------------------------
# Build
# --------------------------------------------------------------------------------------------

def fixture_statements(dim):
    """tests/fixtures/legal_schema.sql as statements: (tables, indexes); vector(384) -> dim."""
    text = SCHEMA_FIXTURE.read_text()
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    text = re.sub(r"vector\(\d+\)", f"vector({dim})", text)
    stmts = [s.strip() for s in text.split(";") if s.strip()]
    tables = [s for s in stmts if not s.upper().startswith("CREATE INDEX")]
    indexes = [s for s in stmts if s.upper().startswith("CREATE INDEX")]
    return tables, indexes


BM25_COLUMNS = [("precedent_chunks", "content_bm25", "content"), ("halachot", "rule_bm25", "rule")]

BENCH_TABLES = """
CREATE TABLE IF NOT EXISTS bench_meta (params jsonb NOT NULL);
CREATE TABLE IF NOT EXISTS bench_build (step text PRIMARY KEY, seconds float8 NOT NULL,
    finished timestamptz NOT NULL DEFAULT now(), info jsonb NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS bench_batches (tbl text NOT NULL, batch int NOT NULL,
    seconds float8 NOT NULL, PRIMARY KEY (tbl, batch));
"""


def step_done(conn):
    return {r[0]: {"seconds": r[1], "info": r[2]} for r in
            conn.execute("SELECT step, seconds, info FROM bench_build").fetchall()}


def record(conn, step, seconds, info=None):
    conn.execute("INSERT INTO bench_build (step, seconds, info) VALUES (%s, %s, %s) "
                 "ON CONFLICT (step) DO UPDATE SET seconds = excluded.seconds, "
                 "finished = now(), info = excluded.info",
                 [step, seconds, json.dumps(info or {})])


class IndexProgress(threading.Thread):
    """Logs pg_stat_progress_create_index every `every` seconds while an index is built."""

    def __init__(self, dsn, label, every=60):
        super().__init__(daemon=True)
        self.dsn, self.label, self.every = dsn, label, every
        self.stop = threading.Event()
        self.t0 = time.perf_counter()

    def run(self):
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                while not self.stop.wait(self.every):
                    row = conn.execute(
                        "SELECT phase, tuples_done, tuples_total, blocks_done, blocks_total "
                        "FROM pg_stat_progress_create_index LIMIT 1").fetchone()
                    if row is None:
                        continue
                    phase, td, tt, bd, bt = row
                    el = time.perf_counter() - self.t0
                    msg = f"  {self.label}: {phase}"
                    if tt:
                        msg += f", tuples {td:,}/{tt:,} ({100 * td / tt:.0f}%)"
                        if td:
                            msg += f", eta {el * (tt - td) / td / 60:.0f} min"
                    elif td:
                        msg += f", tuples {td:,}"
                    if bt:
                        msg += f", blocks {bd:,}/{bt:,}"
                    log(msg + f" ({el / 60:.1f} min)")
        except psycopg.Error as e:
            log(f"  (progress monitor stopped: {e})")


def copy_case_law(conn, data):
    with conn.cursor() as cur, cur.copy(
            "COPY case_law (id, case_number, case_name, court, source_kind, practice_area) "
            "FROM STDIN") as cp:
        for p in range(data.n_parents):
            cp.write_row([p + 1, f"{1000 + p}/{p % 25:02d}", f"תיק {p + 1}",
                          COURTS[p % len(COURTS)], data.kind_of[p], AREAS[p % len(AREAS)]])


PGCOPY_HEAD = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
PGCOPY_TAIL = struct.pack(">h", -1)


def text_field(s):
    b = s.encode()
    return struct.pack(">i", len(b)) + b


def encode_batch(data, table, lo, texts, vecs):
    """Binary COPY rows (pgvector's binary form: int16 dim, int16 unused, float4[] BE)."""
    be = vecs.astype(">f4")
    vec_head = struct.pack(">ihh", 4 + 4 * data.dim, data.dim, 0)
    parts = [PGCOPY_HEAD]
    if table == "precedent_chunks":
        head = struct.Struct(">hiqiqiiii")
        cpp = data.a.chunks_per_parent
        for j, text in enumerate(texts):
            i = lo + j
            parent = int(data.chunk_parent[i])
            chunk = i % cpp
            parts.append(head.pack(6, 8, i + 1, 8, parent + 1, 4, chunk, 4, chunk // 2 + 1))
            parts.append(text_field(text))
            parts.append(vec_head + be[j].tobytes())
    else:
        head = struct.Struct(">hiqiq")
        page = struct.Struct(">ii")
        for j, text in enumerate(texts):
            i = lo + j
            parent = int(data.halacha_parent[i])
            parts.append(head.pack(7, 8, i + 1, 8, parent + 1))
            parts.append(text_field(text))
            parts.append(text_field(" ".join(text.split()[:8])))       # supporting_quote
            parts.append(page.pack(4, 1 + i % 40))
            parts.append(text_field(str(data.review[i])))
            parts.append(vec_head + be[j].tobytes())
    parts.append(PGCOPY_TAIL)
    return b"".join(parts)


COPY_SQL = {
    "precedent_chunks": "COPY precedent_chunks (id, case_law_id, chunk_index, page_number, "
                        "content, embedding) FROM STDIN (FORMAT binary)",
    "halachot": "COPY halachot (id, case_law_id, rule, supporting_quote, page_number, "
                "review_status, embedding) FROM STDIN (FORMAT binary)",
}


def copy_items(conn, data, table):
    """Batches not yet loaded, one transaction each (with its number in bench_batches)."""
    done = {r[0] for r in conn.execute("SELECT batch FROM bench_batches WHERE tbl = %s",
                                       [table]).fetchall()}
    total = data.batches(table)
    todo = [b for b in range(total) if b not in done]
    if done:
        log(f"  {table}: {len(done)} of {total} batches loaded earlier, resuming")
    t0 = last = time.perf_counter()
    for n, b in enumerate(todo, 1):
        tb = time.perf_counter()
        lo, texts, vecs = data.batch(table, b)
        payload = encode_batch(data, table, lo, texts, vecs)
        with conn.transaction():
            with conn.cursor() as cur, cur.copy(COPY_SQL[table]) as cp:
                cp.write(payload)
            conn.execute("INSERT INTO bench_batches VALUES (%s, %s, %s)",
                         [table, b, time.perf_counter() - tb])
        now = time.perf_counter()
        if now - last > 30 or n == len(todo):
            el = now - t0
            rows = data.n_chunks if table == "precedent_chunks" else data.n_halachot
            log(f"  {table}: batch {n}/{len(todo)} (up to row {min((b + 1) * BATCH, rows):,}), "
                f"{el:.0f} s, {n * BATCH / el:,.0f} rows/s, "
                f"eta {el * (len(todo) - n) / n / 60:.1f} min")
            last = now
    # the step's time: every batch's, also those of an interrupted earlier run
    return {"seconds_all_batches": conn.execute(
        "SELECT sum(seconds) FROM bench_batches WHERE tbl = %s", [table]).fetchone()[0],
        "resumed": bool(done)}


def build(dsn, a, data, done, progress_dsn):
    """Runs every build step not yet recorded; returns nothing (timings are in bench_build)."""
    tables, fixture_indexes = fixture_statements(a.dim)
    with psycopg.connect(dsn, autocommit=True) as conn:
        # e.g. pgvector's "hnsw graph no longer fits into maintenance_work_mem"
        conn.add_notice_handler(
            lambda d: None if (d.message_primary or "").endswith("skipping")
            else log(f"  server notice: {d.message_primary}"))

        def step(name, fn, info=None):
            if name in done:
                return
            log(f"build step {name}")
            t = time.perf_counter()
            extra = fn()
            secs = time.perf_counter() - t
            if extra and extra.get("seconds_all_batches") is not None:
                secs = extra["seconds_all_batches"]
            record(conn, name, secs, {**(info or {}), **(extra or {})})
            done[name] = {"seconds": secs}
            log(f"  {name}: {secs:.1f} s")

        def schema():
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute("DROP EXTENSION IF EXISTS pg_corpus CASCADE")
            conn.execute("CREATE EXTENSION pg_corpus")
            record_extension(conn)
            # an interrupted earlier attempt of this step
            conn.execute("DROP TABLE IF EXISTS document_chunks, halachot, precedent_chunks, "
                         "case_law CASCADE")
            for s in tables:
                conn.execute(s)
            for table, col, src in BM25_COLUMNS:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {col} tsvector GENERATED ALWAYS "
                             f"AS (corpus.bm25_document({src}, '{LANGUAGE}')) STORED")
                # kept in the row, not in TOAST: the lexical branch reads it for every candidate
                conn.execute(f"ALTER TABLE {table} ALTER COLUMN {col} SET STORAGE MAIN")
            return {"bm25_generated": True}

        def btree():
            conn.execute("SET maintenance_work_mem = '1GB'")
            for s in fixture_indexes:
                if "USING gin" not in s:
                    conn.execute(s.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1))

        def hnsw(table, label):
            def fn():
                conn.execute("SET max_parallel_maintenance_workers = 0")   # pgvector 0.8.0 CVE
                mwm = build_settings(a, data)["maintenance_work_mem"]
                conn.execute(f"SET maintenance_work_mem = '{mwm}'")
                mon = IndexProgress(progress_dsn, label)
                mon.start()
                try:
                    conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_embedding_idx ON {table} "
                                 "USING hnsw (embedding vector_cosine_ops) "
                                 "WITH (m = 16, ef_construction = 64)")
                finally:
                    mon.stop.set()
                return {"maintenance_work_mem": mwm}
            return fn

        def gin(name, table, col):
            def fn():
                conn.execute("SET maintenance_work_mem = '1GB'")
                conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {table} USING gin ({col})")
            return fn

        # the fixture's GIN indexes (the 'simple' tsvectors of the app-side baseline)
        fixture_gin = [re.match(r"CREATE INDEX (\w+) ON (\w+) USING gin \((\w+)\)", s).groups()
                       for s in fixture_indexes if "USING gin" in s]
        step("schema", schema)
        step("case_law", lambda: copy_case_law(conn, data))
        step("precedent_chunks", lambda: copy_items(conn, data, "precedent_chunks"),
             {"rows": data.n_chunks})
        step("halachot", lambda: copy_items(conn, data, "halachot"), {"rows": data.n_halachot})
        step("btree", btree)
        for name, table, col in fixture_gin:
            if table in ("precedent_chunks", "halachot"):
                step(f"gin_{name}", gin(name, table, col))
        step("gin_precedent_chunks_bm25_idx",
             gin("precedent_chunks_bm25_idx", "precedent_chunks", "content_bm25"))
        step("gin_halachot_bm25_idx", gin("halachot_bm25_idx", "halachot", "rule_bm25"))

        # the lexical branch ranks through these (docs/lexical-index.md)
        for name, table, col in RANKING_INDEXES:
            step(f"corpus_bm25_{table}",
                 lambda name=name, table=table, col=col: ranking_index(conn, name, table, col))
        step("hnsw_precedent_chunks", hnsw("precedent_chunks", "HNSW precedent_chunks"))
        step("hnsw_halachot", hnsw("halachot", "HNSW halachot"))

        def vacuum():
            for t in ("case_law", "precedent_chunks", "halachot"):
                conn.execute(f"VACUUM ANALYZE {t}")
            conn.execute("SELECT pg_stat_force_next_flush()")
        step("vacuum_analyze", vacuum)


def sizes_of(conn):
    return dict(conn.execute("""
        SELECT 'database', pg_database_size(current_database())
        UNION ALL SELECT c.relname, pg_table_size(c.oid) FROM pg_class c
         WHERE c.relname IN ('case_law', 'precedent_chunks', 'halachot')
        UNION ALL SELECT i.relname, pg_relation_size(i.oid) FROM pg_class i
          JOIN pg_index x ON x.indexrelid = i.oid
          JOIN pg_class t ON t.oid = x.indrelid
         WHERE t.relname IN ('case_law', 'precedent_chunks', 'halachot')
    """).fetchall())


def define_corpora(conn):
    """The four corpora over the same tables (tests/fixtures/legal_corpora.sql's mapping, BM25
    columns, language hebrew); returns seconds per corpus (corpus_add_source refreshes the BM25
    statistics)."""
    took = {}
    corpora = [(name, kind) for kind, _, name in KINDS] + [(EMPTY, EMPTY_KIND)]
    for name, kind in corpora:
        t = time.perf_counter()
        conn.execute("SELECT corpus.corpus_drop(%s, if_exists => true)", [name])
        conn.execute("SELECT corpus.corpus_create(%s, isolation => %s::jsonb, filter_fields => "
                     "'{\"court\": \"text\", \"practice_area\": \"text\"}')",
                     [name, json.dumps({"source_kind": kind})])
        conn.execute(
            "SELECT corpus.corpus_add_source(%s, 'chunks', 'precedent_chunks', "
            "text_column => 'content', tsv_column => 'content_bm25', "
            "embedding_column => 'embedding', parent_table => 'case_law', "
            "parent_fk => 'case_law_id', parent_required => '{case_number,case_name}', "
            "locator => '{\"case_number\": \"parent.case_number\", \"page\": \"page_number\", "
            "\"chunk_index\": \"chunk_index\", \"chunk_id\": \"id\"}', "
            "metadata => '{\"case_name\": \"parent.case_name\", \"court\": \"parent.court\"}', "
            "language => %s)", [name, LANGUAGE])
        conn.execute(
            "SELECT corpus.corpus_add_source(%s, 'halachot', 'halachot', "
            "text_column => 'rule', tsv_column => 'rule_bm25', embedding_column => 'embedding', "
            "parent_table => 'case_law', parent_fk => 'case_law_id', "
            "parent_required => '{case_number,case_name}', "
            "rule => '{\"review_status\": \"approved\"}', "
            "locator => '{\"case_number\": \"parent.case_number\", \"page\": \"page_number\", "
            "\"quote\": \"supporting_quote\", \"halacha_id\": \"id\"}', "
            "metadata => '{\"case_name\": \"parent.case_name\", \"court\": \"parent.court\"}', "
            "language => %s)", [name, LANGUAGE])
        took[name] = time.perf_counter() - t
        log(f"  corpus {name}: {took[name]:.1f} s")
    return took


# (index, table, BM25 column): the corpus_bm25 indexes the build creates
RANKING_INDEXES = (("precedent_chunks_bm25_rank_idx", "precedent_chunks", "content_bm25"),
                   ("halachot_bm25_rank_idx", "halachot", "rule_bm25"))


def ranking_index(conn, name, table, col):
    conn.execute("SET maintenance_work_mem = '1GB'")
    conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {table} USING corpus_bm25 ({col})")


def recreate_extension(conn):
    """The installed extension SQL changed: recreate pg_corpus without losing the data."""
    h.recreate_extension(conn)
    record_extension(conn)


def record_extension(conn):
    """Which extension SQL this database's pg_corpus objects were created from."""
    record(conn, "extension", 0.0, {"fingerprint": ls.extension_fingerprint(),
                                    "library": h.installed_build()})


def analyser_check(conn, n=500):
    """Stored BM25 tsvectors of the first n rows per table against the installed analyser."""
    out = {}
    for table, col, src in BM25_COLUMNS:
        out[table] = conn.execute(
            f"SELECT count(*) FILTER (WHERE {col} IS DISTINCT FROM "
            f"corpus.bm25_document({src}, %s)) FROM {table} WHERE id <= %s",
            [LANGUAGE, n]).fetchone()[0]
    return out


def ensure_extension(conn, done):
    """Corpora defined with the installed pg_corpus; returns what was done and its seconds."""
    fingerprint, library = ls.extension_fingerprint(), h.installed_build()
    info = (done.get("corpora") or {}).get("info") or {}
    created = ((done.get("extension") or {}).get("info") or {}).get("fingerprint")
    action = None
    t = time.perf_counter()
    if created != fingerprint:
        log("the installed pg_corpus SQL differs from the one this database was built with: "
            "recreating the extension and the corpora (the data and indexes are kept)")
        recreate_extension(conn)
        action = "extension recreated"
    elif "corpora" not in done:
        action = "defined"
    if action:
        took = define_corpora(conn)
        info = {"fingerprint": fingerprint, "library": library, "corpora_s": took}
        record(conn, "corpora", time.perf_counter() - t, info)
        done["corpora"] = {"seconds": time.perf_counter() - t, "info": info}
    elif info.get("library") != library:
        log(f"pg_corpus library changed since the corpora were defined ({info.get('library')} "
            f"-> {library}): refreshing the lexical statistics")
        conn.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats()").fetchall()
        action = "statistics refreshed"
        info = {**info, "library": library, "refresh_s": time.perf_counter() - t}
        record(conn, "corpora", done["corpora"]["seconds"], info)
        done["corpora"]["info"] = info
    stale = analyser_check(conn)
    return {"action": action or "reused", "seconds": time.perf_counter() - t if action else 0.0,
            "library": library, "fingerprint": fingerprint, "stale_bm25_rows": stale}


def ensure_queries(conn, data, a, done):
    """Table bench_queries (for pgbench) holding this run's queries."""
    want = {"queries": a.queries, "seed": a.seed, "generator": GENERATOR}
    have = (done.get("queries") or {}).get("info")
    qs = data.queries(a.queries)
    if have != want:
        t = time.perf_counter()
        conn.execute("DROP TABLE IF EXISTS bench_queries")
        conn.execute(f"CREATE TABLE bench_queries (qid int PRIMARY KEY, qvec vector({a.dim}) "
                     "NOT NULL, qtext text NOT NULL)")
        with conn.cursor() as cur, cur.copy("COPY bench_queries FROM STDIN") as cp:
            for i, q in enumerate(qs, 1):
                cp.write_row([i, q["vtext"], q["text"]])
        conn.execute("ANALYZE bench_queries")
        record(conn, "queries", time.perf_counter() - t, want)
        done["queries"] = {"seconds": time.perf_counter() - t, "info": want}
    return qs


class Size:
    """One size's cluster, database, data and queries."""

    def __init__(self, a, size, root):
        self.a, self.size = a, size
        self.dir = root / str(size)
        self.data = Data(a, size)
        self.params = data_params(a, size)
        self.marker = self.dir / "build.json"
        self.uri = self.dsn = None
        self.build_info = {}

    def read_marker(self):
        try:
            m = json.loads(self.marker.read_text())
        except (OSError, ValueError):
            return None
        return m if m.get("params") == json.loads(json.dumps(self.params)) else None

    def write_marker(self, done, sizes):
        self.marker.write_text(json.dumps({
            "params": self.params, "complete": True, "sizes": sizes,
            "steps": {k: v.get("seconds") for k, v in done.items()},
            "written": datetime.now(timezone.utc).isoformat()}, indent=1))

    def open_db(self, settings, rebuild):
        """Start the cluster; (re)create the database when asked or its params differ;
        returns the recorded steps."""
        self.uri = start_cluster(self.dir, settings)
        self.dsn = make_conninfo(self.uri, dbname=DBNAME)
        with psycopg.connect(self.uri, autocommit=True) as admin:
            exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                   [DBNAME]).fetchone()
        stored = None
        if exists and not rebuild:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                try:
                    stored = conn.execute("SELECT params FROM bench_meta").fetchone()[0]
                except (psycopg.Error, TypeError):
                    stored = None
        if stored != json.loads(json.dumps(self.params)):
            if exists:
                log(f"size {self.size:,}: " + ("--rebuild" if rebuild else
                    "stored database has other parameters") + ": building it again")
            self.marker.unlink(missing_ok=True)
            with h.fresh_database(self.uri, DBNAME, extensions=()) as conn:
                conn.execute(BENCH_TABLES)
                conn.execute("INSERT INTO bench_meta VALUES (%s)", [json.dumps(self.params)])
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            return step_done(conn)

    def prepare(self, rebuild):
        """Build what is missing, then run with the run settings; returns build info."""
        a, data = self.a, self.data
        marker = None if rebuild else self.read_marker()
        t0 = time.perf_counter()
        built_now = self.build_info.get("built_now", False)
        if marker is None:
            log(f"size {self.size:,}: {data.n_chunks:,} chunks + {data.n_halachot:,} halachot "
                f"under {data.n_parents:,} parents, {a.dim}-d, in {self.dir}")
            done = self.open_db(build_settings(a, data), rebuild)
            missing = [s for s in BUILD_STEPS if s not in done]
            if missing:
                built_now = True
                self.end_stale_sessions()
                log(f"size {self.size:,}: build steps to run: {', '.join(missing)}")
                build(self.dsn, a, data, done, self.dsn)
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                sizes = sizes_of(conn)
            self.write_marker(done, sizes)
            db_bytes = sizes["database"]
        else:
            db_bytes = marker["sizes"]["database"]
            log(f"size {self.size:,}: reusing the build of {marker['written'][:16]} in "
                f"{self.dir} ({gb(db_bytes)})")
        done = self.open_db(run_settings(a, db_bytes), False)
        if any(s not in done for s in BUILD_STEPS):     # the database is not the marker's
            self.marker.unlink(missing_ok=True)
            return self.prepare(rebuild=False)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            ext = ensure_extension(conn, done)
            # (an extension recreated by an earlier version of this script lost them)
            for name, table, col in RANKING_INDEXES:
                ranking_index(conn, name, table, col)
            if any(ext["stale_bm25_rows"].values()):
                sys.exit(f"the installed analyser no longer produces the stored BM25 tsvectors "
                         f"({ext['stale_bm25_rows']} of 500 rows per table differ): "
                         "rerun with --rebuild")
            self.queries = ensure_queries(conn, data, a, done)
            sizes = sizes_of(conn)
            done = step_done(conn)
            generated = {t: conn.execute(
                "SELECT attgenerated <> '' FROM pg_attribute WHERE attrelid = %s::regclass "
                "AND attname = %s", [t, c]).fetchone()[0] for t, c, _ in BM25_COLUMNS}
        self.build_info = dict(
            dir=str(self.dir), built_now=built_now, prepare_s=time.perf_counter() - t0,
            steps={k: v["seconds"] for k, v in done.items()},
            step_info={k: v["info"] for k, v in done.items()},
            finished={k: None for k in done}, sizes=sizes, extension=ext,
            bm25_generated=generated, settings=run_settings(a, db_bytes),
            n_parents=data.n_parents, n_chunks=data.n_chunks, n_halachot=data.n_halachot)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for step, fin in conn.execute("SELECT step, finished FROM bench_build").fetchall():
                self.build_info["finished"][step] = fin.strftime("%Y-%m-%d %H:%M UTC")
            self.counts = dict(conn.execute("""
                SELECT 'chunks ' || p.source_kind, count(*) FROM precedent_chunks i
                  JOIN case_law p ON p.id = i.case_law_id GROUP BY p.source_kind
                UNION ALL
                SELECT 'halachot ' || p.source_kind, count(*) FILTER (WHERE review_status = 'approved')
                  FROM halachot i JOIN case_law p ON p.id = i.case_law_id GROUP BY p.source_kind
            """).fetchall())
        self.build_info["corpus_items"] = self.counts
        return self.build_info

    def end_stale_sessions(self):
        """An interrupted earlier build may leave its statement running in this private
        cluster (the server notices a vanished client only when it next talks to it): end the
        other sessions of the benchmark database before resuming."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid, left(query, 60), pg_terminate_backend(pid, 60000) "
                "FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend'").fetchall()
        for pid, query, _ in rows:
            log(f"  ended session {pid} of an interrupted run ({query!r})")

    def prewarm(self):
        """Into shared buffers, least needed first (what does not fit is evicted first)."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
            rels = []
            for t in ("precedent_chunks", "halachot"):
                rels.append(f"(SELECT reltoastrelid FROM pg_class WHERE oid = '{t}'::regclass)")
            rels += ["'case_law'::regclass", "'precedent_chunks'::regclass",
                     "'halachot'::regclass"]
            rels += [f"'{i}'::regclass" for i in (
                "case_law_pkey", "case_law_source_kind_idx", "precedent_chunks_pkey",
                "precedent_chunks_case_law_id_idx", "halachot_pkey", "halachot_case_law_id_idx",
                "precedent_chunks_tsv_idx", "halachot_tsv_idx", "precedent_chunks_bm25_idx",
                "halachot_bm25_idx", "halachot_embedding_idx", "precedent_chunks_embedding_idx",
                "precedent_chunks_bm25_rank_idx", "halachot_bm25_rank_idx")]
            t = time.perf_counter()
            blocks = 0
            for r in rels:
                blocks += conn.execute(f"SELECT pg_prewarm({r})").fetchone()[0]
            blocks += conn.execute("""
                SELECT coalesce(sum(pg_prewarm(c.oid)), 0) FROM pg_class c
                  JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = 'corpus' AND c.relkind IN ('r', 'i')""").fetchone()[0]
            log(f"size {self.size:,}: prewarmed {blocks * 8192 / 2**30:.1f} GB in "
                f"{time.perf_counter() - t:.0f} s")

    def stop(self):
        h.pgcluster("stop", self.dir)

    def current(self, phase):
        """Before a phase that opens new sessions: the extension in the database must be the
        installed one (a reinstall during the run is handled as at the start); records which
        library the phase ran with."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            ext = ensure_extension(conn, step_done(conn))
        if any(ext["stale_bm25_rows"].values()):
            log(f"WARNING size {self.size:,}, before {phase}: the installed analyser no longer "
                f"produces the stored BM25 tsvectors ({ext['stale_bm25_rows']})")
            ext["action"] = (ext["action"] if ext["action"] != "reused" else "") + \
                " analyser changed (stored BM25 tsvectors stale)"
        if ext["action"] != "reused":
            log(f"size {self.size:,}, before {phase}: {ext['action']} ({ext['seconds']:.0f} s)")
            self.build_info.setdefault("changes_during_run", []).append({"phase": phase, **ext})
        self.build_info.setdefault("library_by_phase", {})[phase] = ext["library"]


BUILD_STEPS = ["schema", "case_law", "precedent_chunks", "halachot", "btree",
               "gin_precedent_chunks_tsv_idx", "gin_halachot_tsv_idx",
               "gin_precedent_chunks_bm25_idx", "gin_halachot_bm25_idx",
               "corpus_bm25_precedent_chunks", "corpus_bm25_halachot",
               "hnsw_precedent_chunks", "hnsw_halachot", "vacuum_analyze"]


# --------------------------------------------------------------------------------------------
# Searches
# --------------------------------------------------------------------------------------------

APP_SEMANTIC = [
    ("chunks", "SELECT pc.id, pc.case_law_id, pc.embedding <=> %(v)s::vector AS distance "
               "FROM precedent_chunks pc JOIN case_law cl ON cl.id = pc.case_law_id "
               "WHERE cl.source_kind = %(kind)s "
               "ORDER BY pc.embedding <=> %(v)s::vector LIMIT %(n)s"),
    ("halachot", "SELECT h.id, h.case_law_id, h.embedding <=> %(v)s::vector AS distance "
                 "FROM halachot h JOIN case_law cl ON cl.id = h.case_law_id "
                 "WHERE cl.source_kind = %(kind)s AND h.review_status = 'approved' "
                 "ORDER BY h.embedding <=> %(v)s::vector LIMIT %(n)s"),
]
APP_LEXICAL = [
    ("chunks", "SELECT pc.id, pc.case_law_id, ts_rank_cd(pc.content_tsv, q) AS rank "
               "FROM precedent_chunks pc JOIN case_law cl ON cl.id = pc.case_law_id, "
               "to_tsquery('simple', %(q)s) q "
               "WHERE pc.content_tsv @@ q AND cl.source_kind = %(kind)s "
               "ORDER BY rank DESC LIMIT %(n)s"),
    ("halachot", "SELECT h.id, h.case_law_id, ts_rank_cd(h.rule_tsv, q) AS rank "
                 "FROM halachot h JOIN case_law cl ON cl.id = h.case_law_id, "
                 "to_tsquery('simple', %(q)s) q "
                 "WHERE h.rule_tsv @@ q AND cl.source_kind = %(kind)s "
                 "AND h.review_status = 'approved' ORDER BY rank DESC LIMIT %(n)s"),
]
APP_FETCH = ("SELECT 'chunks', pc.id, pc.content, cl.case_number, pc.page_number "
             "FROM precedent_chunks pc JOIN case_law cl ON cl.id = pc.case_law_id "
             "WHERE pc.id = ANY(%(c)s) "
             "UNION ALL "
             "SELECT 'halachot', h.id, h.rule, cl.case_number, h.page_number "
             "FROM halachot h JOIN case_law cl ON cl.id = h.case_law_id "
             "WHERE h.id = ANY(%(h)s)")


def app_side(conn, q, k):
    """The old way (an application's own service, written in Python on purpose): four branch queries,
    RRF over the four lists, the per-case_law_id cap, one content fetch."""
    orq = " | ".join("'" + w.replace("'", "''") + "'" for w in q["words"])
    lists = []
    for src, sql in APP_SEMANTIC:
        rows = conn.execute(sql, {"v": q["vtext"], "kind": MAIN_KIND, "n": APP_WINDOW},
                            prepare=False).fetchall()
        lists.append([(src, r[0], r[1]) for r in rows])
    for src, sql in APP_LEXICAL:
        rows = conn.execute(sql, {"q": orq, "kind": MAIN_KIND, "n": APP_WINDOW},
                            prepare=False).fetchall()
        lists.append([(src, r[0], r[1]) for r in rows])
    score, parent = {}, {}
    for lst in lists:
        for rank, (src, item, par) in enumerate(lst, 1):
            key = (src, str(item))
            score[key] = score.get(key, 0.0) + 1.0 / (RRF_K + rank)
            parent[key] = par
    per_parent, top = {}, []
    for key in sorted(score, key=lambda x: (-score[x], x)):
        p = parent[key]
        if per_parent.get(p, 0) >= APP_CAP:
            continue
        per_parent[p] = per_parent.get(p, 0) + 1
        top.append(key)
        if len(top) == k:
            break
    conn.execute(APP_FETCH, {"c": [int(i) for s, i in top if s == "chunks"],
                             "h": [int(i) for s, i in top if s == "halachot"]},
                 prepare=False).fetchall()
    return [(key, score[key]) for key in top]


def run_one(conn, method, q, k):
    """One search: [((source, item_id), score or distance)]."""
    if method == "app_side":
        return app_side(conn, q, k)
    if method == "bare":
        res = conn.execute(BARE_SQL, {"v": q["vtext"], "kind": MAIN_KIND}, prepare=False)
        return [(("chunks", str(r[0])), r[1]) for r in res.fetchall()]
    sql, col = EXT_SQL[method]
    cur = conn.execute(sql, {"c": EXT_CORPUS[method], "v": q["vtext"], "t": q["text"], "k": k},
                       prepare=False)
    rows = cur.fetchall()
    names = [d.name for d in cur.description]
    si, ii, vi = names.index("source"), names.index("item_id"), names.index(col)
    return [((r[si], r[ii]), r[vi]) for r in rows]


connect = h.session


# --------------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------------

def measure(sizes, a):
    """All sizes and methods interleaved: per round every (size, method, query) in a new
    shuffled order. Returns raw[size][method] = {latency_runs_ms, latency_ms, answers}."""
    conns = {(s.size, m): connect(s.dsn) for s in sizes for m in METHODS}
    rng = np.random.default_rng(a.seed + 2)
    log(f"warm-up: {a.warmup} queries x {len(conns)} (size, method) sessions")
    for s in sizes:
        for m in METHODS:
            for qi in range(a.warmup):
                run_one(conns[(s.size, m)], m, s.queries[qi % len(s.queries)], a.k)
    tasks = [(s, m, qi) for s in sizes for m in METHODS for qi in range(len(s.queries))]
    calls = {(s.size, m, qi): (lambda s=s, m=m, qi=qi: run_one(conns[(s.size, m)], m, s.queries[qi], a.k))
             for s, m, qi in tasks}
    times, answers = h.interleave(calls, a.repeats, rng, progress=True)
    for c in conns.values():
        c.close()
    raw = {}
    for s in sizes:
        raw[s.size] = {}
        for m in METHODS:
            runs = [times[(s.size, m, qi)] for qi in range(len(s.queries))]
            raw[s.size][m] = dict(latency_runs_ms=runs,
                                  latency_ms=[float(np.median(r)) for r in runs],
                                  answers=[[[list(key), val] for key, val in
                                            answers[(s.size, m, qi)]]
                                           for qi in range(len(s.queries))])
    return raw


def exhaustive(s, a):
    """Lexical mode with the candidate budget 10^9 (exact BM25), once per query."""
    out, lat = [], []
    with connect(s.dsn, [("pg_corpus.bm25_candidate_budget", str(BUDGET_EXHAUSTIVE))]) as conn:
        run_one(conn, "lexical", s.queries[0], a.k)
        for q in s.queries:
            ms, rows = h.timed(lambda: run_one(conn, "lexical", q, a.k))
            out.append([[list(key), val] for key, val in rows])
            lat.append(ms)
    return out, lat


def slice_vectors(s):
    """The 5% corpus' searchable items and their stored vectors (both sources)."""
    from pgvector.psycopg import register_vector
    keys, vecs = [], []
    with psycopg.connect(s.dsn, autocommit=True) as conn:
        register_vector(conn)
        with conn.cursor(binary=True) as cur:
            cur.execute("""
                SELECT 'chunks', i.id, i.embedding FROM precedent_chunks i
                  JOIN case_law p ON p.id = i.case_law_id
                 WHERE p.source_kind = %(k)s AND i.embedding IS NOT NULL
                   AND length(btrim(i.content)) >= 50
                UNION ALL
                SELECT 'halachot', i.id, i.embedding FROM halachot i
                  JOIN case_law p ON p.id = i.case_law_id
                 WHERE p.source_kind = %(k)s AND i.embedding IS NOT NULL
                   AND i.review_status = 'approved' AND length(btrim(i.rule)) >= 50""",
                        {"k": SLICE_KIND})
            for src, i, v in cur:
                keys.append((src, str(i)))
                vecs.append(np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v,
                                       dtype=np.float32))
    return keys, np.vstack(vecs) if vecs else np.zeros((0, s.a.dim), np.float32)


def slice_recall(s, answers, a):
    """recall@k of the slice's semantic answers against the exact top-k (numpy, cosine; a hit
    whose distance ties the exact k-th within filtered_ann.TIE_EPS counts), rows returned, and
    rows from outside the slice."""
    keys, V = slice_vectors(s)
    index = {key: i for i, key in enumerate(keys)}
    norms = np.linalg.norm(V.astype(np.float64), axis=1)
    rec, rows, foreign = [], [], []
    for q, ans in zip(s.queries, answers):
        q64 = q["vector"].astype(np.float64)
        approx = V @ q["vector"]
        cand = np.argpartition(-approx, min(len(approx) - 1, 4 * a.k))[:4 * a.k + 1] \
            if len(approx) > 4 * a.k else np.arange(len(approx))
        d = 1.0 - (V[cand].astype(np.float64) @ q64) / (norms[cand] * np.linalg.norm(q64))
        order = np.lexsort((cand, d))[:a.k]
        truth = {keys[cand[j]] for j in order}
        kth = float(d[order[-1]]) if len(order) else 0.0
        got = [tuple(key) for key, _ in ans[:a.k]]
        hits = 0
        for key in got:
            i = index.get(key)
            if i is None:
                continue
            di = 1.0 - float(V[i].astype(np.float64) @ q64) / (norms[i] * np.linalg.norm(q64))
            if key in truth or di <= kth + fa.TIE_EPS:
                hits += 1
        want = min(a.k, len(keys))
        rec.append(min(hits, want) / want if want else 1.0)
        rows.append(len(ans))
        foreign.append(sum(1 for key in got if key not in index))
    return dict(recall=rec, rows=rows, foreign=foreign, slice_items=len(keys))


def pgbench(s, a):
    """QPS of the hybrid search at each client count (bench/scale/hybrid.sql)."""
    ci = conninfo_to_dict(s.dsn)
    base = [str(PGBENCH), "-n", "-f", str(PGBENCH_SCRIPT), "-D", f"nq={len(s.queries)}",
            "-h", ci["host"], "-p", str(ci["port"]), "-U", ci.get("user", "postgres"), DBNAME]
    out = {}
    subprocess.run(base[:1] + ["-c", "1", "-j", "1", "-T", "2"] + base[1:], capture_output=True,
                   text=True)     # warm-up
    for c in a.clients:
        cmd = base[:1] + ["-c", str(c), "-j", str(c), "-T", str(a.pgbench_seconds)] + base[1:]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            log(f"pgbench failed ({res.returncode}): {res.stderr.strip()[-500:]}")
            out[c] = {"error": res.stderr.strip()[-500:]}
            continue
        text = res.stdout
        tps = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", text)
        latency = re.search(r"latency average = ([0-9.]+) ms", text)
        txns = re.search(r"number of transactions actually processed: (\d+)", text)
        failed = re.search(r"number of failed transactions: (\d+)", text)
        out[c] = dict(tps=float(tps.group(1)) if tps else None,
                      latency_ms=float(latency.group(1)) if latency else None,
                      transactions=int(txns.group(1)) if txns else None,
                      failed=int(failed.group(1)) if failed else 0,
                      command=" ".join(cmd[:1] + [x for x in cmd[1:] if x != ci["host"]]))
        log(f"  pgbench size {s.size:,}, {c} clients: {out[c]['tps']:.1f} tps, "
            f"{out[c]['latency_ms']:.1f} ms mean")
    return out


# --------------------------------------------------------------------------------------------
# Profile (largest size)
# --------------------------------------------------------------------------------------------

def explained_subplans(conn, corpus, q, k, mode):
    """Every subplan corpus.corpus_explain prints: (source, branch, strategy, SET LOCALs,
    psycopg SQL, params)."""
    return h.explained_subplans(conn, corpus, q["vector"] if mode != "lexical" else None,
                                q["text"] if mode != "semantic" else None, k, mode)


def nested_statements(conn, log_path, sql, params):
    """One call with auto_explain logging every nested statement (JSON, no ANALYZE): its
    statements' durations, first SQL line and plan, slowest first (read from the server log)."""
    conn.execute("SET auto_explain.log_min_duration = 0")
    start = log_path.stat().st_size
    conn.execute(sql, params, prepare=False).fetchall()
    conn.execute("SET auto_explain.log_min_duration = -1")
    with open(log_path, "rb") as f:
        f.seek(start)
        text = f.read().decode("utf-8", "replace")
    out = []
    for entry in re.split(r"\n(?=\d{4}-\d\d-\d\d )", text):
        m = re.search(r"duration: ([0-9.]+) ms  plan:\n(.*)", entry, re.S)
        if not m:
            continue
        try:
            doc = json.loads(m.group(2))
        except ValueError:
            continue
        query = doc.get("Query Text") or ""
        if "corpus.corpus_hybrid_search" in query:
            continue
        out.append(dict(ms=float(m.group(1)),
                        query=" ".join(query.split())[:160],
                        plan=h.plan_summary(doc["Plan"]) if "Plan" in doc else []))
    return sorted(out, key=lambda r: -r["ms"])


def shared_session(s, a, log_path):
    """A connection pool serves every corpus: in one session, searches of the main corpus
    first, then of the empty corpus (client ms), and the slowest statements inside one such
    empty-corpus call."""
    sql, _ = EXT_SQL["empty"]
    qs = s.queries
    out = {}
    with connect(s.dsn) as conn:
        fresh = [h.timed(lambda i=i: run_one(conn, "empty", qs[i % len(qs)], a.k))[0] for i in range(10)]
        for i in range(10):
            run_one(conn, "hybrid", qs[i % len(qs)], a.k)
        after = [h.timed(lambda i=i: run_one(conn, "empty", qs[(i + 10) % len(qs)], a.k))[0]
                 for i in range(20)]
        out.update(empty_dedicated_ms=fresh[1:], empty_after_main_ms=after,
                   empty_dedicated_p50=pct(fresh[1:], 50), empty_after_main_p50=pct(after, 50))
        try:
            conn.execute("LOAD 'auto_explain'")
            conn.execute("SET auto_explain.log_nested_statements = on")
            conn.execute("SET auto_explain.log_analyze = off")
            conn.execute("SET auto_explain.log_format = json")
            q = qs[0]
            out["empty_after_main_statements"] = nested_statements(
                conn, log_path, sql, {"c": EMPTY, "v": q["vtext"], "t": q["text"], "k": a.k})[:3]
        except (psycopg.Error, OSError) as e:
            log(f"  (nested statements not logged: {e})")
    return out


def profile(s, a):
    """EXPLAIN (ANALYZE, BUFFERS) of the subplans of the main corpus (hybrid), of the slice
    (semantic) and of the empty corpus (hybrid); server time of the calls; the durations of the
    statements inside a call (auto_explain)."""
    out = {"subplans": [], "calls": {}, "parts": {}}
    cases = [(MAIN, "hybrid", qi) for qi in range(min(a.explain_queries, len(s.queries)))]
    cases += [(SLICE, "semantic", 0), (EMPTY, "hybrid", 0)]
    with psycopg.connect(s.dsn, autocommit=True) as conn:
        for corpus, mode, qi in cases:
            q = s.queries[qi]
            for source, branch, strategy, settings, sql, values in explained_subplans(
                    conn, corpus, q, a.k, mode):
                p = ls.explain(conn, sql, values, settings, text=(qi == 0))
                p.update(corpus=corpus, mode=mode, query=qi, source=source, branch=branch,
                         strategy=strategy, settings=dict(settings))
                out["subplans"].append(p)
        for name, method in (("hybrid", "hybrid"), ("semantic", "semantic"),
                             ("lexical", "lexical"), ("empty", "empty")):
            sql, _ = EXT_SQL[method]
            ms = []
            for q in s.queries[:a.explain_queries]:
                params = {"c": EXT_CORPUS[method], "v": q["vtext"], "t": q["text"], "k": a.k}
                ms.append(ls.server_ms(conn, sql, params))
            out["calls"][name] = ms
        t = time.perf_counter()
        for _ in range(20):
            conn.execute("SELECT 1").fetchall()
        out["client_round_trip_ms"] = (time.perf_counter() - t) / 20 * 1000
        # the statements a call runs inside, from the server log
        log_path = s.dir / "server.log"
        try:
            conn.execute("LOAD 'auto_explain'")
            conn.execute("SET auto_explain.log_nested_statements = on")
            conn.execute("SET auto_explain.log_analyze = off")
            conn.execute("SET auto_explain.log_format = json")
            for name in ("hybrid", "empty"):
                sql, _ = EXT_SQL[name]
                runs = []
                for q in s.queries[:max(a.explain_queries, 1)]:
                    params = {"c": EXT_CORPUS[name], "v": q["vtext"], "t": q["text"], "k": a.k}
                    conn.execute(sql, params, prepare=False).fetchall()
                    for _ in range(3):
                        runs.append(ls.call_profile(conn, log_path, sql, params))
                keys = set().union(*runs)
                med = {k: float(np.median([r.get(k) or 0.0 for r in runs])) for k in keys}
                med["other"] = med.get("total", 0.0) - sum(v for k, v in med.items()
                                                           if k != "total")
                out["parts"][name] = med
        except (psycopg.Error, OSError) as e:
            log(f"  (call parts not measured: {e})")
    out["shared_session"] = shared_session(s, a, s.dir / "server.log")
    return out


# --------------------------------------------------------------------------------------------
# Summary
# --------------------------------------------------------------------------------------------

pct = h.pct


def summarise(out):
    a = out["args"]
    summary, quality, targets = {}, {}, {}
    for size in out["sizes"]:
        sz = str(size)
        raw = out["raw"][sz]
        summary[sz] = {}
        for m in METHODS:
            lat = raw[m]["latency_ms"]
            summary[sz][m] = dict(p50_ms=pct(lat, 50), p95_ms=pct(lat, 95),
                                  mean_ms=float(np.mean(lat)), max_ms=float(np.max(lat)),
                                  n=len(lat),
                                  rows_min=int(min(len(x) for x in raw[m]["answers"])),
                                  rows_mean=float(np.mean([len(x) for x in raw[m]["answers"]])))
        ex = out["exhaustive"][sz]
        ov = [ls.overlap([(tuple(k), v) for k, v in x], [(tuple(k), v) for k, v in y], a["k"])
              for x, y in zip(raw["lexical"]["answers"], ex["answers"])]
        rc = out["recall"][sz]
        quality[sz] = dict(overlap_mean=float(np.mean(ov)), overlap_min=float(np.min(ov)),
                           overlap_below_1=int(sum(o < 1 for o in ov)), overlap=ov,
                           exhaustive_p50_ms=pct(ex["latency_ms"], 50),
                           recall_mean=float(np.mean(rc["recall"])),
                           recall_min=float(np.min(rc["recall"])),
                           slice_rows_min=int(np.min(rc["rows"])),
                           slice_short=int(sum(r < a["k"] for r in rc["rows"])),
                           slice_foreign=int(np.sum(rc["foreign"])),
                           slice_items=rc["slice_items"])
        p = {m: summary[sz][m]["p50_ms"] for m in METHODS}
        value = {
            "hybrid_vs_semantic": p["hybrid"] / p["semantic"],
            "hybrid_vs_app": p["hybrid"] / p["app_side"],
            "semantic_vs_bare": p["semantic"] / (p["bare"] * N_SOURCES),
            "lexical_vs_semantic": p["lexical"] / p["semantic"],
            "lexical_overlap": quality[sz]["overlap_mean"],
            "empty_fixed_cost": p["empty"],
            "slice_recall": quality[sz]["recall_mean"],
            "slice_rows": quality[sz]["slice_rows_min"],
        }
        targets[sz] = {}
        for tid, label, thr, op, at in TARGETS:
            v = value[tid]
            met = v <= thr if op == "<=" else v >= thr
            targets[sz][tid] = dict(value=v, threshold=thr, op=op, met=bool(met),
                                    judged=(at is None or at == size))
    return summary, quality, targets


# --------------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------------

def fmt_ms(x):
    if x is None or x != x:
        return "–"
    return f"{x:.0f}" if x >= 100 else (f"{x:.1f}" if x >= 1 else f"{x:.2f}")


def fmt_size(n):
    n = int(n)
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else (
        f"{n // 1000}k" if n % 1000 == 0 else f"{n:,}")


def fmt_s(x):
    if x is None:
        return "–"
    return f"{x:.0f} s" if x < 600 else f"{x / 60:.0f} min"


def results_markdown(out):
    a, m = out["args"], out["machine"]
    sizes = [str(s) for s in out["sizes"]]
    summary, quality, targets = out["summary"], out["quality"], out["targets"]
    lines = [
        f"Run of {out['finished']} ({out['runtime_s'] / 60:.0f} min in all, builds included "
        "where a size was built in this run):",
        "",
        "```sh",
        out["command"],
        "```",
        "",
        f"Sizes: " + ", ".join(
            f"{fmt_size(s)} = {out['build'][s]['n_chunks']:,} chunks + "
            f"{out['build'][s]['n_halachot']:,} halachot under {out['build'][s]['n_parents']:,} "
            f"parents" for s in sizes) + f"; {a['dim']}-d embeddings; {a['queries']} queries, "
        f"k = {a['k']}, {a['repeats']} interleaved rounds (a query's latency is the median of "
        f"its rounds; p50/p95 over the queries). Measured corpus: `{MAIN}` "
        f"(source_kind external_upload, 47.5% of the parents; sources chunks and approved "
        f"halachot).",
        "",
        f"Machine: {m.get('cpu', '?')}, {m.get('cpus')} cores, {m.get('ram_gb', '?')} GB RAM; "
        f"PostgreSQL {m.get('postgres')}, pgvector {m['extensions'].get('vector')}, pg_corpus "
        f"{m['extensions'].get('pg_corpus')} (library installed {out['library_at_start']}"
        + ("" if out["library_at_start"] == out["library_at_end"] else
           f"; a new library was installed during the run, {out['library_at_end']}: "
           "the timed sessions kept the one they had loaded; library per phase: " + "; ".join(
               f"{fmt_size(s)} " + ", ".join(f"{ph} {lib[11:16]}" for ph, lib in
                                           out["build"][s].get("library_by_phase", {}).items())
               for s in sizes)
           + "".join(f"; {fmt_size(s)} before {c['phase']}: {c['action']}"
                     for s in sizes for c in out["build"][s].get("changes_during_run", [])))
        + f", work tree {m.get('commit', '?')}); shared_buffers per size: "
        + ", ".join(f"{fmt_size(s)} {out['build'][s]['settings']['shared_buffers']}"
                    for s in sizes)
        + f" (tables and indexes prewarmed); jit {m['settings'].get('jit')}. Load average "
        f"{out['load_before']} before, {out['load_after']} after: the two cores are shared "
        "with other work, so compare ratios from this run rather than absolute milliseconds.",
        "",
        "### Latency (client wall clock, ms)",
        "",
        "| method | " + " | ".join(f"{fmt_size(s)} p50 | {fmt_size(s)} p95" for s in sizes)
        + " | fewest rows |",
        "|---|" + "---:|---:|" * len(sizes) + "---:|",
    ]
    for meth in METHODS:
        cells = " | ".join(f"{fmt_ms(summary[s][meth]['p50_ms'])} | "
                           f"{fmt_ms(summary[s][meth]['p95_ms'])}" for s in sizes)
        rows_min = " / ".join(str(summary[s][meth]["rows_min"]) for s in sizes)
        lines.append(f"| {SHORT[meth]} | {cells} | {rows_min} |")
    lines += [
        "",
        "Exhaustive BM25 (lexical mode, budget 10^9, one run per query) p50: "
        + ", ".join(f"{fmt_size(s)} {fmt_ms(quality[s]['exhaustive_p50_ms'])} ms" for s in sizes)
        + "." + ("" if all(summary[s]["bare"]["rows_min"] >= fa.SQL_LIMIT for s in sizes) else
                 f" The bare branch returns fewer than {fa.SQL_LIMIT} rows where its HNSW scan "
                 "(ef_search 40, no iterative scan) is filtered after the index; the seed's "
                 "app-side branches starve the same way."),
        "",
        "### Targets",
        "",
        "| target | threshold | " + " | ".join(fmt_size(s) for s in sizes) + " |",
        "|---|---|" + "---|" * len(sizes),
    ]
    for tid, label, thr, op, at in TARGETS:
        cells = []
        for s in sizes:
            t = targets[s][tid]
            v = t["value"]
            val = (f"{v:.3f}" if tid in ("lexical_overlap", "slice_recall", "hybrid_vs_app")
                   else f"{v:.0f}" if tid == "slice_rows" else
                   f"{v:.2f} ms" if tid == "empty_fixed_cost" else f"{v:.2f}×")
            verdict = "met" if t["met"] else "missed"
            cells.append(f"{val} {verdict}" + ("" if t["judged"] else " (not judged here)"))
        thr_s = f"{op.replace('<=', '≤').replace('>=', '≥')} {thr:g}" + (
            "" if at is None else f" at {fmt_size(at)}")
        lines.append(f"| {label} | {thr_s} | " + " | ".join(cells) + " |")
    lines += [""]
    for s in sizes:
        q = quality[s]
        lines.append(
            f"- {fmt_size(s)}: lexical overlap@10 with exhaustive BM25 mean {q['overlap_mean']:.3f} "
            f"(min {q['overlap_min']:.1f}, {q['overlap_below_1']} of {a['queries']} queries "
            f"below 1); 5% slice ({q['slice_items']:,} searchable items): recall@10 mean "
            f"{q['recall_mean']:.3f} (min {q['recall_min']:.1f}), {q['slice_short']} queries "
            f"short of {a['k']} rows, {q['slice_foreign']} rows from outside the slice.")
    lines += [
        "",
        "### Throughput: hybrid search, pgbench (`bench/scale/hybrid.sql`, "
        f"{a['pgbench_seconds']} s per point)",
        "",
        "| clients | " + " | ".join(f"{fmt_size(s)} QPS | {fmt_size(s)} mean ms" for s in sizes)
        + " |",
        "|---:|" + "---:|---:|" * len(sizes),
    ]
    for c in a["clients"]:
        cells = []
        for s in sizes:
            r = out["qps"][s].get(str(c)) or {}
            cells.append(f"{r.get('tps', float('nan')):.1f} | {fmt_ms(r.get('latency_ms'))}"
                         if r.get("tps") is not None else "– | –")
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "### Build (once per size, cached outside the clone)",
        "",
        "| step | " + " | ".join(fmt_size(s) for s in sizes) + " |",
        "|---|" + "---:|" * len(sizes),
    ]
    steps = BUILD_STEPS + ["corpora", "queries"]
    for st in steps:
        lines.append(f"| {st} | " + " | ".join(fmt_s(out['build'][s]['steps'].get(st))
                                                for s in sizes) + " |")
    lines.append("| total | " + " | ".join(
        fmt_s(sum(v for k, v in out["build"][s]["steps"].items() if k in steps))
        for s in sizes) + " |")
    lines.append("| database size | " + " | ".join(
        gb(out["build"][s]["sizes"]["database"]) for s in sizes) + " |")
    lines.append("| HNSW chunks / halachot | " + " | ".join(
        f"{gb(out['build'][s]['sizes'].get('precedent_chunks_embedding_idx', 0))} / "
        f"{gb(out['build'][s]['sizes'].get('halachot_embedding_idx', 0))}" for s in sizes) + " |")
    lines += ["", "Built: " + "; ".join(
        f"{fmt_size(s)} finished {out['build'][s]['finished'].get('vacuum_analyze')}"
        + (" (this run)" if out["build"][s]["built_now"] else " (cached)")
        + f", corpora: {out['build'][s]['extension']['action']}"
        + ("" if all(out["build"][s]["bm25_generated"].values()) else
           ", BM25 columns plain since an extension re-creation (values from "
           "corpus.bm25_document, checked)")
        for s in sizes) + "."]
    prof = out.get("profile")
    if prof:
        lines += [
            "",
            f"### Profile ({fmt_size(out['profile_size'])}, query 1; EXPLAIN (ANALYZE, BUFFERS) "
            "of the subplans `corpus.corpus_explain` prints, under its SET LOCALs)",
            "",
            "| corpus / mode | source | branch | strategy | settings | exec ms | plan ms | "
            "buffers hit / read | plan |",
            "|---|---|---|---|---|---:|---:|---:|---|",
        ]
        for p in prof["subplans"]:
            if p["query"] != 0:
                continue
            sets = ", ".join(f"{k}={v}" for k, v in p["settings"].items())
            plan = " → ".join(x.strip() for x in p["summary"][:3])
            lines.append(f"| {p['corpus']} / {p['mode']} | {p['source']} | {p['branch']} | "
                         f"{p['strategy']} | {sets} | {p['execution_ms']:.2f} | "
                         f"{p['planning_ms']:.2f} | {p['shared_hit']:,} / {p['shared_read']:,} | "
                         f"{plan} |")
        main_sub = {}
        for p in prof["subplans"]:
            if p["corpus"] == MAIN:
                main_sub.setdefault(p["query"], 0.0)
                main_sub[p["query"]] += p["execution_ms"] + p["planning_ms"]
        calls = prof["calls"]
        lines += [
            "",
            "Server time of whole calls (EXPLAIN ANALYZE of the `SELECT * FROM "
            f"corpus_hybrid_search(...)`, median of {len(calls['hybrid'])} queries, in this "
            "order in one session): "
            + ", ".join(f"{k} {np.median(v):.2f} ms" for k, v in calls.items())
            + f"; the main corpus' subplans (execution + planning, summed) "
            f"{np.median(list(main_sub.values())):.2f} ms; client round trip of `SELECT 1` "
            f"{prof['client_round_trip_ms']:.3f} ms.",
        ]
        if prof.get("parts"):
            lines += ["", "Statements inside one call (auto_explain durations, ms, median; the "
                      "same session, hybrid first, then empty):", ""]
            for name, parts in prof["parts"].items():
                lines.append(f"- {name}: " + ", ".join(
                    f"{k} {v:.2f}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1])
                    if k != "total") + f"; total {parts.get('total', 0):.2f}")
        sh = prof.get("shared_session")
        if sh:
            lines += ["", "One session for several corpora (as a connection pool): the empty "
                      f"corpus' search p50 {sh['empty_dedicated_p50']:.2f} ms in a fresh "
                      f"session, {sh['empty_after_main_p50']:.2f} ms after 10 searches of "
                      f"`{MAIN}` in the same session."]
            for st in (sh.get("empty_after_main_statements") or [])[:1]:
                lines += [f"Its slowest inner statement then ({st['ms']:.2f} ms): "
                          f"`{st['query'][:110]}…` — plan: "
                          + " → ".join(x.strip() for x in st["plan"][:6]) + "."]
    return "\n".join(lines)


def write_markdown(path, out):
    h.write_results_section(path, "", results_markdown(out), "Scale")


def write_plot(path, out):
    sizes = [str(s) for s in out["sizes"]]
    x = [int(s) for s in sizes]
    with h.figure(path, 2, (14, 6)) as fa:
        if fa is None:
            return
        fig, (ax, bx) = fa
        for i, meth in enumerate(METHODS):
            color = f"C{i}"
            p50 = [out["summary"][s][meth]["p50_ms"] for s in sizes]
            p95 = [out["summary"][s][meth]["p95_ms"] for s in sizes]
            ax.plot(x, p50, "o-", color=color, label=SHORT[meth])
            ax.plot(x, p95, "_--", color=color, lw=0.8, markersize=12)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(x, [f"{fmt_size(s)}\n+{out['build'][s]['n_halachot']:,} hal." for s in sizes])
        ax.set_xlabel("chunks (+ halachot)")
        ax.set_ylabel("latency, ms (solid: p50, dashed: p95)")
        ax.set_title("Latency against size (client wall clock)", fontsize=10)
        ax.axhline(0.5, color="grey", ls=":", lw=1)
        ax.annotate("0.5 ms (fixed-cost target)", (x[0], 0.5), fontsize=7, color="grey",
                    xytext=(2, 2), textcoords="offset points")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        for j, s in enumerate(sizes):
            qps = out["qps"][s]
            cs = [c for c in out["args"]["clients"] if (qps.get(str(c)) or {}).get("tps")]
            bx.plot(cs, [qps[str(c)]["tps"] for c in cs], "o-", color=f"C{j}",
                    label=f"{fmt_size(s)} chunks")
        bx.set_ylim(bottom=0)
        bx.set_xscale("log", base=2)
        bx.set_xticks(out["args"]["clients"], [str(c) for c in out["args"]["clients"]])
        bx.set_xlabel("pgbench clients")
        bx.set_ylabel("hybrid searches per second")
        bx.set_title(f"Throughput of the hybrid search ({out['machine'].get('cpus')} cores)",
                     fontsize=10)
        bx.grid(True, alpha=0.3)
        bx.legend(fontsize=8)
        fig.suptitle(f"pg_corpus at scale: {out['args']['dim']}-d, k={out['args']['k']}, "
                     f"{out['args']['queries']} queries, corpus {MAIN}")


# --------------------------------------------------------------------------------------------

def parse_size(text):
    t = text.strip().lower()
    mult = 1_000_000 if t.endswith("m") else 1000 if t.endswith("k") else 1
    return int(float(t.rstrip("mk")) * mult)


def params(p):
    p.add_argument("--sizes", default="100000,1000000",
                   help="chunk counts, comma-separated (100k, 1M accepted); halachot = N/5")
    p.add_argument("--cache-dir", default=None,
                   help="where the clusters live, one folder per size (default "
                        "$PG_CORPUS_CACHE/scale or ~/.cache/pg_corpus/scale)")
    p.add_argument("--keep", action="store_true", help="leave the clusters running")
    p.add_argument("--rebuild", action="store_true", help="build every size again")
    p.add_argument("--build-only", action="store_true", help="build (or finish) and stop")
    p.add_argument("--render-only", action="store_true",
                   help="measure nothing: rewrite the markdown section and the plot from --raw")
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--halachot-ratio", type=float, default=0.2)
    p.add_argument("--chunks-per-parent", type=int, default=10)
    p.add_argument("--clusters", type=int, default=300)
    p.add_argument("--vocab", type=int, default=50_000)
    p.add_argument("--zipf", type=float, default=1.1)
    p.add_argument("--min-words", type=int, default=60)
    p.add_argument("--max-words", type=int, default=150)
    p.add_argument("--halacha-min-words", type=int, default=20)
    p.add_argument("--halacha-max-words", type=int, default=50)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--warmup", type=int, default=5, help="warm-up queries per session")
    p.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    p.add_argument("--clients", default="1,2,4,8")
    p.add_argument("--pgbench-seconds", type=int, default=30)
    p.add_argument("--explain-queries", type=int, default=3)
    p.add_argument("--build-shared-buffers", default="2GB")
    p.add_argument("--shared-buffers", default="auto",
                   help="during the run (auto: the database size + 10%%, at most 35%% of RAM)")
    p.add_argument("--maintenance-work-mem", default=None,
                   help="for the index builds (default: what the HNSW graph needs, >= 1GB)")


def run(a):
    a.size_list = sorted({parse_size(s) for s in a.sizes.split(",") if s.strip()})
    a.clients = [int(c) for c in a.clients.split(",") if c.strip()]
    if a.render_only:
        out = json.loads(Path(a.raw).read_text())
        write_markdown(Path(a.markdown), out)
        write_plot(Path(a.plot), out)
        return
    started = time.perf_counter()
    load_before = os.getloadavg()
    root = cache_dir(a)
    root.mkdir(parents=True, exist_ok=True)
    sizes = [Size(a, n, root) for n in a.size_list]
    phases = {}
    try:
        # build one size at a time, each cluster stopped afterwards (memory)
        for s in sizes:
            t = time.perf_counter()
            s.prepare(a.rebuild)
            if len(sizes) > 1 or a.build_only:
                s.stop()
            phases[f"prepare_{s.size}"] = time.perf_counter() - t
        if a.build_only:
            log("built: " + ", ".join(f"{s.size:,} in {s.dir}" for s in sizes))
            return
        for s in sizes:
            if len(sizes) > 1:
                s.prepare(False)        # cached now: starts with the run settings
            s.current("interleaved")
            s.prewarm()
        library_at_start = h.installed_build()
        t = time.perf_counter()
        raw = measure(sizes, a)
        phases["interleaved_s"] = time.perf_counter() - t
        t = time.perf_counter()
        ex, rec = {}, {}
        for s in sizes:
            log(f"size {s.size:,}: exhaustive BM25 and the slice's exact top-{a.k}")
            s.current("exhaustive")
            ans, lat = exhaustive(s, a)
            ex[str(s.size)] = dict(answers=ans, latency_ms=lat)
            rec[str(s.size)] = slice_recall(
                s, [[(tuple(k), v) for k, v in x] for x in raw[s.size]["slice_semantic"]["answers"]],
                a)
        phases["quality_s"] = time.perf_counter() - t
        t = time.perf_counter()
        qps = {}
        for s in sizes:
            log(f"size {s.size:,}: pgbench at {a.clients} clients, {a.pgbench_seconds} s each")
            s.current("pgbench")
            qps[str(s.size)] = {str(c): v for c, v in pgbench(s, a).items()}
        phases["pgbench_s"] = time.perf_counter() - t
        t = time.perf_counter()
        largest = sizes[-1]
        log(f"size {largest.size:,}: profile")
        largest.current("profile")
        prof = profile(largest, a)
        phases["profile_s"] = time.perf_counter() - t
        machine = ls.machine_info(largest.dsn)
    finally:
        if not a.keep:
            for s in sizes:
                try:
                    s.stop()
                except SystemExit:
                    pass
    out = dict(
        finished=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        command=a.command,
        args={**{k: v for k, v in vars(a).items() if k != "size_list"}},
        sizes=a.size_list, machine=machine, methods=METHODS,
        library_at_start=library_at_start, library_at_end=h.installed_build(),
        load_before=" ".join(f"{x:.2f}" for x in load_before),
        load_after=" ".join(f"{x:.2f}" for x in os.getloadavg()),
        build={str(s.size): s.build_info for s in sizes},
        queries={str(s.size): [q["text"] for q in s.queries] for s in sizes},
        raw={str(k): v for k, v in raw.items()}, exhaustive=ex, recall=rec, qps=qps,
        profile=prof, profile_size=largest.size, phases_s=phases)
    out["summary"], out["quality"], out["targets"] = summarise(out)
    out["runtime_s"] = time.perf_counter() - started
    h.write_raw(a.raw, out)
    write_markdown(a.markdown, out)
    write_plot(Path(a.plot), out)
    log(f"done in {out['runtime_s'] / 60:.1f} min: {a.raw}, {a.markdown}, {a.plot}")
    print(results_markdown(out))


SPEC = h.Spec(name="scale", about=__doc__.split("\n\n")[0], run=run, params=params, cluster=False,
              outputs=h.page_outputs("scale", "scale"),
              smoke=["--sizes", "3000", "--dim", "32", "--vocab", "2000", "--clusters", "20",
                     "--queries", "4", "--warmup", "1", "--repeats", "1", "--clients", "1",
                     "--pgbench-seconds", "2", "--explain-queries", "1",
                     "--build-shared-buffers", "256MB", "--shared-buffers", "256MB",
                     "--maintenance-work-mem", "256MB",
                     "--cache-dir", str(ROOT / ".pgdata" / "bench-scale-smoke")])

if __name__ == "__main__":
    h.main(SPEC, doc=__doc__)
