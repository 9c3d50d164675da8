#!/usr/bin/env python3
"""What the side tables' row-level security costs a plain role (sql/access.sql): the time of
`SELECT count(*)` on each of them as a role that reads every item in full, against the owner
(who bypasses the policies), with many corpora.

    .venv/bin/python bench/side_table_policy.py          # writes bench/results/side_table_policy.md
    .venv/bin/python bench/side_table_policy.py --policies-from REV --out bench/results/side_table_policy_REV.md
                                                         # the same with the policies of an older revision

What it does:
 1. starts a private cluster (bench/harness.py: .pgdata/bench-side_table_policy by default)
    and creates the database `side_table_policy` with `CREATE EXTENSION vector; CREATE
    EXTENSION pg_corpus`;
 2. creates one table of ITEMS items (every one holding "alpha", so that each corpus has a
    champion list, plus four words of a 500-word vocabulary; no embeddings, so every item is
    queued) and CORPORA corpora, each with one source over the whole table (corpus_create +
    corpus_add_source, which computes the corpus' statistics): CORPORA x ~500 statistics rows,
    CORPORA totals and champion lists, ITEMS queue entries (one slot);
 3. creates a role with SELECT on the table (it reads every source in full: every policy admits
    every row to it) and, for each side table, runs `SELECT count(*)` RUNS times as that role
    and as the owner (the superuser), and once more as the role with track_functions = 'all'
    (and no parallel workers) to count the calls of the policies' check functions
    (corpus._reads_corpus_in_full, corpus._reads_in_full) in that statement;
 4. prints and writes the medians to --out. The cluster is stopped at the end unless --keep.

With --policies-from REV the installed policies are replaced by the CREATE POLICY statements of
sql/access.sql at git revision REV before anything is loaded (the functions they call must
exist in the installed version): an older definition measured with the same build.
"""
import statistics
import subprocess
import sys
import time
from pathlib import Path

from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402

ROOT = h.ROOT
DBNAME = "side_table_policy"
READER = "side_policy_reader"
TABLES = ("lexical_stats", "lexical_totals", "lexical_champions", "embedding_queue")
CHECKS = ("corpus._reads_corpus_in_full(text)", "corpus._reads_in_full(regclass,name[])")


def build(conn, corpora, items):
    conn.execute("""CREATE TABLE items (id int PRIMARY KEY, doc_id int NOT NULL, body text NOT NULL,
                        tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED, emb vector(3))""")
    conn.execute("""INSERT INTO items (id, doc_id, body)
                    SELECT i, i / 4, 'alpha w' || (i * 7 %% 500) || ' w' || (i * 31 %% 499) || ' w' || (i * 17 %% 497)
                                     || ' w' || (i * 13 %% 491)
                      FROM generate_series(1, %s) AS i""", [items])
    conn.execute("CREATE INDEX ON items USING gin (tsv)")
    conn.execute("ANALYZE items")
    t0 = time.monotonic()
    for n in range(corpora):
        name = f"side_{n:03d}"
        conn.execute("SELECT corpus.corpus_create(%s)", [name])
        conn.execute("""SELECT corpus.corpus_add_source(%s, 'items', 'items', text_column => 'body', tsv_column => 'tsv',
                            embedding_column => 'emb', parent_fk => 'doc_id', min_length => 5)""", [name])
    h.log(f"{corpora} corpora in {time.monotonic() - t0:.1f} s")
    conn.execute(f"DROP ROLE IF EXISTS {READER}")
    conn.execute(f"CREATE ROLE {READER}")
    conn.execute(f"GRANT SELECT ON items TO {READER}")


def timed_count(conn, table, role):
    if role:
        conn.execute(f"SET ROLE {role}")
    try:
        t = time.perf_counter()
        n = conn.execute(f"SELECT count(*) FROM corpus.{table}").fetchone()[0]
        return n, (time.perf_counter() - t) * 1000
    finally:
        conn.execute("RESET ROLE")


def check_calls(conn, table, role):
    """(rows counted, calls of the policies' check functions) of one count(*) of `table` as
    `role`: the difference of the cumulative statistics around it, each read after this
    backend reported its counts (no parallel workers, which would report theirs on their own).
    tests/integration/test_side_table_policy_cost.py asserts with it."""
    calls = "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE funcid = ANY (%s::regprocedure[])"
    conn.execute("SET track_functions = 'all'")
    conn.execute("SET max_parallel_workers_per_gather = 0")
    try:
        conn.execute("SELECT pg_stat_force_next_flush()")
        before = conn.execute(calls, [list(CHECKS)]).fetchone()[0]
        n, _ = timed_count(conn, table, role)
        conn.execute("SELECT pg_stat_force_next_flush()")
        return n, conn.execute(calls, [list(CHECKS)]).fetchone()[0] - before
    finally:
        conn.execute("RESET track_functions")
        conn.execute("RESET max_parallel_workers_per_gather")


def apply_policies(conn, rev):
    """The side tables' policies as sql/access.sql defines them at git revision `rev`, in
    place of the installed ones (to measure an older definition with the same build)."""
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:sql/access.sql"], capture_output=True,
                          text=True, check=True).stdout
    policies = re.findall(r"^CREATE POLICY .*?;$", text, re.S | re.M)
    assert policies, f"no CREATE POLICY in sql/access.sql at {rev}"
    for name, table in conn.execute("SELECT policyname, schemaname || '.' || tablename FROM pg_policies "
                                    "WHERE schemaname = 'corpus'").fetchall():
        conn.execute(sql.SQL("DROP POLICY {} ON {}").format(sql.Identifier(name), sql.SQL(table)))
    for p in policies:
        conn.execute(p)


def measure(conn, runs):
    out = {}
    for table in TABLES:
        owner_ms, reader_ms = [], []
        for _ in range(runs):
            rows, ms = timed_count(conn, table, None)
            owner_ms.append(ms)
            seen, ms = timed_count(conn, table, READER)
            reader_ms.append(ms)
            assert seen == rows, f"{table}: the reader saw {seen} of {rows} rows"
        out[table] = dict(rows=rows, owner=statistics.median(owner_ms), reader=statistics.median(reader_ms),
                          calls=check_calls(conn, table, READER)[1])
        h.log(f"{table}: {rows} rows, owner {out[table]['owner']:.1f} ms, plain role {out[table]['reader']:.1f} ms, "
               f"{out[table]['calls']} check calls")
    return out


def write(path, results, info, command):
    rows = [(f"corpus.{table}", f"{r['rows']:,}", f"{r['owner']:.1f}", f"{r['reader']:.1f}",
             f"{r['reader'] / r['owner']:.1f}", f"{r['calls']:,}") for table, r in results.items()]
    text = "\n".join([
        "# The side tables' row-level security at many corpora", "",
        "`SELECT count(*)` on each side table as a plain role that reads the items in full (every policy "
        "admits every row to it) and as the owner (who bypasses the policies), medians; check calls: the "
        "policies' check functions (`corpus._reads_corpus_in_full`, `corpus._reads_in_full`) called in one "
        "such statement as the plain role (track_functions = 'all'). bench/side_table_policy.py's docstring "
        "has the method.", "", "```sh", command, "```", "", info, "",
        h.table(["table", "rows", "owner ms", "plain role ms", "plain role / owner", "check calls"], rows), ""])
    Path(path).write_text(text)
    print(text)


def params(p):
    p.add_argument("--corpora", type=int, default=300)
    p.add_argument("--items", type=int, default=2000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--policies-from", metavar="REV",
                   help="measure the policies of sql/access.sql at this git revision instead of the installed ones")


def run(a):
    started = h.now()
    with h.Cluster(a.dir, keep=a.keep) as uri, h.fresh_database(uri, DBNAME) as conn:
        if a.policies_from:
            apply_policies(conn, a.policies_from)
        build(conn, a.corpora, a.items)
        results = measure(conn, a.runs)
        pg = conn.execute("SHOW server_version").fetchone()[0]
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_corpus'").fetchone()[0]
        conn.execute(f"DROP OWNED BY {READER}")
        conn.execute(f"DROP ROLE {READER}")
    info = (f"Run of {started}: PostgreSQL {pg}, pg_corpus {version} ({h.git_commit()}), "
            f"{a.corpora} corpora over one table of {a.items:,} items, {a.runs} runs"
            + (f"; the policies of sql/access.sql at {a.policies_from}." if a.policies_from else "."))
    write(a.out, results, info, a.command)


SPEC = h.Spec(name="side_table_policy", about=__doc__.split("\n")[0], run=run, params=params,
              outputs={"--out": h.RESULTS / "side_table_policy.md"},
              smoke=["--corpora", "5", "--items", "50", "--runs", "1"])

if __name__ == "__main__":
    h.main(SPEC, doc=__doc__)
