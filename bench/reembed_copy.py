#!/usr/bin/env python3
"""What does the re-embed trigger cost a bulk load? (docs/reembed.md)

    .venv/bin/python bench/reembed_copy.py                         # the committed run: 100k rows, vector(384)
    .venv/bin/python bench/reembed_copy.py --dim 1024               # the same at 1024 dimensions
    .venv/bin/python bench/reembed_copy.py --rows 20000 --reps 3    # a quick one

What it does:
 1. starts a private cluster (bench/harness.py; .pgdata/bench-reembed_copy by default) and
    creates a database with `CREATE EXTENSION vector; CREATE EXTENSION pg_corpus`, the legal schema
    (tests/fixtures/legal_schema.sql: precedent_chunks with its primary key, case_law_id index,
    foreign key, generated tsvector column and GIN index; the embedding column is retyped to
    vector(DIM)), 1,000 case_law parents, and `precedent_chunks_plain`, an identical table (LIKE ...
    INCLUDING ALL, the same foreign key) that no corpus registers;
 2. registers precedent_chunks as a source (the external_precedents chunks source of
    tests/fixtures/legal_corpora.sql), which attaches the re-embed trigger;
 3. builds ROWS rows once, in memory, as binary COPY data (seeded pseudo-text of 20-60 words,
    random unit vectors), and then, REPS times, runs every case below once, in a new random order
    each repetition (so that machine noise hits all cases alike), each after TRUNCATE of both
    tables and the queue and a CHECKPOINT (not timed):
      emb_plain        COPY of rows WITH embeddings into the unregistered table
      emb_trigger      the same into the registered table: the trigger only checks
      null_plain       COPY of rows WITHOUT embeddings into the unregistered table
      null_trigger     the same into the registered table: every row is queued (+ NOTIFY)
      null_deferred    the same with SET pg_corpus.defer_embedding_queue = on, then one
                       corpus.corpus_embedding_enqueue(...) (timed separately and in total)
    Each run records the client's wall clock of one COPY statement (autocommit, so it includes
    the commit) and the CPU time (user + system, /proc/PID/stat) of the server backend that ran
    it — and of the enqueue call for null_deferred. The trigger's work all happens in that
    backend, and its CPU time hardly moves when other work shares the machine, so the CPU ratio
    is the robust one on a busy machine; autovacuum is off on the loaded tables;
 4. checks the outcome of every run (queue empty / ROWS rows) and writes its summary to
    bench/results/reembed_copy_<DIM>[_<VARIANT>].md, its raw numbers to bench/out/raw/ (not
    committed) and the results section of docs/reembed.md (between the `results:begin/end`
    markers: every bench/results/reembed_copy_*.md).

There is no HNSW index on the tables while loading (build it after a bulk load: it would dominate
both sides). The cluster is stopped at the end unless --keep.
"""
import json
import os
import statistics
import struct
import sys
import time
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402
from harness import log  # noqa: E402

ROOT = h.ROOT
FIXTURES = ROOT / "tests" / "fixtures"
DOC = ROOT / "docs" / "reembed.md"
DBNAME = "reembed_copy"
N_CASES = 1000
CASES = {
    "emb_plain": "rows with embeddings, unregistered table",
    "emb_trigger": "rows with embeddings, registered table (trigger checks only)",
    "null_plain": "rows without embeddings, unregistered table",
    "null_trigger": "rows without embeddings, registered table (each row queued)",
    "null_deferred": "rows without embeddings, registered, defer_embedding_queue = on, then corpus_embedding_enqueue",
}
COLUMNS = "id, case_law_id, chunk_index, page_number, content, embedding"
VARIANTS = {
    "stock": "the extension's trigger (AFTER INSERT OR DELETE OR UPDATE OF ... FOR EACH ROW)",
    "when": "experiment: the INSERT event split off into its own row trigger with "
            "WHEN (NEW.embedding IS NULL), so rows that bring an embedding never call the function",
    "statement": "experiment: the INSERT event split off into a statement trigger with a transition "
                 "table (REFERENCING NEW TABLE), queueing all rows of a statement in one INSERT ... SELECT",
}


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------

def make_copy_data(rows, dim, seed):
    """Two binary COPY payloads of the same rows: with embeddings and with NULL embeddings."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("bdfgklmnprstvaeiou"))
    vocab = ["".join(rng.choice(letters, size=int(rng.integers(3, 9)))) for _ in range(5000)]
    p = 1.0 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    head = struct.Struct(">hiqiqiiii")
    vec_head = struct.pack(">ihh", 4 + 4 * dim, dim, 0)
    null = struct.pack(">i", -1)
    with_emb, without = [b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)], None
    without = [with_emb[0]]
    for lo in range(0, rows, 5000):
        hi = min(lo + 5000, rows)
        vecs = rng.standard_normal((hi - lo, dim)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        be = vecs.astype(">f4")
        lens = rng.integers(20, 61, size=hi - lo)
        words = rng.choice(len(vocab), size=int(lens.sum()), p=p)
        a, b = [], []
        pos = 0
        for j, i in enumerate(range(lo, hi)):
            text = " ".join(vocab[w] for w in words[pos:pos + lens[j]]).encode()
            pos += lens[j]
            parent = i % N_CASES + 1
            row = head.pack(6, 8, i + 1, 8, parent, 4, i // N_CASES, 4, i // N_CASES // 2 + 1) + \
                struct.pack(">i", len(text)) + text
            a.append(row + vec_head + be[j].tobytes())
            b.append(row + null)
        with_emb.append(b"".join(a))
        without.append(b"".join(b))
    with_emb.append(struct.pack(">h", -1))
    without.append(struct.pack(">h", -1))
    return with_emb, without


# --------------------------------------------------------------------------------------------
# database
# --------------------------------------------------------------------------------------------

def apply_variant(conn, variant):
    """Reshape the re-embed trigger of precedent_chunks (bench database only). The UPDATE/DELETE
    path keeps the library's trigger function."""
    if variant == "stock":
        return
    tname, fname, column = conn.execute(
        "SELECT trigger_name, trigger_function, quote_literal(embedding_column) FROM corpus.embedding_slots "
        "WHERE item_table = 'precedent_chunks'::regclass").fetchone()
    conn.execute(f'DROP TRIGGER "{tname}" ON precedent_chunks')
    conn.execute(f'CREATE TRIGGER "{tname}" AFTER DELETE OR UPDATE OF content, embedding, id ON precedent_chunks '
                 f'FOR EACH ROW EXECUTE FUNCTION corpus."{fname}"({column})')
    if variant == "when":
        conn.execute(f'CREATE TRIGGER "{tname}_ins" AFTER INSERT ON precedent_chunks FOR EACH ROW '
                     f'WHEN (NEW.embedding IS NULL) EXECUTE FUNCTION corpus."{fname}"({column})')
    elif variant == "statement":
        conn.execute("""
            CREATE FUNCTION corpus.bench_queue_inserted() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
            SET search_path = pg_catalog, pg_temp AS $$
            BEGIN
                IF current_setting('pg_corpus.defer_embedding_queue', true) = 'on' THEN
                    RETURN NULL;
                END IF;
                INSERT INTO corpus.embedding_queue AS q (item_table, embedding_column, item_id, reason)
                SELECT 'public.precedent_chunks'::regclass, 'embedding', n.id::text, 'missing'
                  FROM new_rows n WHERE n.embedding IS NULL
                ON CONFLICT (item_table, embedding_column, item_id) DO UPDATE
                   SET reason = 'missing', version = q.version + 1, enqueued_at = now(), state = 'pending',
                       claimed_by = NULL, claimed_at = NULL, lease_until = NULL, attempts = 0, last_error = NULL;
                IF FOUND THEN
                    PERFORM pg_notify('pg_corpus_embedding', 'public.precedent_chunks');
                END IF;
                RETURN NULL;
            END $$""")
        conn.execute(f'CREATE TRIGGER "{tname}_ins" AFTER INSERT ON precedent_chunks REFERENCING NEW TABLE AS '
                     f'new_rows FOR EACH STATEMENT EXECUTE FUNCTION corpus.bench_queue_inserted()')
    else:
        raise ValueError(variant)


def prepare(uri, dim, variant="stock"):
    dsn = h.dsn(uri, DBNAME)
    with h.fresh_database(uri, DBNAME) as conn:
        conn.execute((FIXTURES / "legal_schema.sql").read_text())
        if dim != 384:
            conn.execute(f"ALTER TABLE precedent_chunks ALTER COLUMN embedding TYPE vector({dim})")
        conn.execute("CREATE TABLE precedent_chunks_plain (LIKE precedent_chunks INCLUDING ALL)")
        conn.execute("ALTER TABLE precedent_chunks_plain ADD FOREIGN KEY (case_law_id) "
                     "REFERENCES case_law (id) ON DELETE CASCADE")
        conn.execute("INSERT INTO case_law (id, case_number, case_name, court, source_kind, practice_area) "
                     "SELECT g, 'c' || g, 'case ' || g, 'court', 'external_upload', 'planning' "
                     "FROM generate_series(1, %s) g", (N_CASES,))
        conn.execute("""SELECT corpus.corpus_create('external_precedents',
            isolation => '{"source_kind": "external_upload"}', filter_fields => '{"court": "text"}')""")
        conn.execute("""SELECT corpus.corpus_add_source('external_precedents', 'chunks', 'precedent_chunks',
            text_column => 'content', tsv_column => 'content_tsv', embedding_column => 'embedding',
            parent_table => 'case_law', parent_fk => 'case_law_id', parent_required => '{case_number,case_name}',
            locator => '{"case_number": "parent.case_number", "page": "page_number", "chunk_id": "id"}')""")
        apply_variant(conn, variant)
        for t in ("precedent_chunks", "precedent_chunks_plain", "corpus.embedding_queue"):
            # no autovacuum/autoanalyze of a freshly loaded table during the next timed run
            conn.execute(f"ALTER TABLE {t} SET (autovacuum_enabled = off)")
        conn.execute("ANALYZE")
        triggers = [r[0] for r in conn.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'precedent_chunks'::regclass AND NOT tgisinternal")]
        plain = [r[0] for r in conn.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'precedent_chunks_plain'::regclass AND NOT tgisinternal")]
        assert triggers and not plain, (triggers, plain)
    return dsn, triggers


def reset(conn):
    conn.execute("TRUNCATE corpus.embedding_queue")
    conn.execute("TRUNCATE precedent_chunks, precedent_chunks_plain")
    conn.execute("CHECKPOINT")


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """user + system CPU time of a server process (/proc/PID/stat fields 14 and 15): unlike the
    wall clock it hardly moves when other work shares the machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def timed(conn, fn):
    pid = conn.info.backend_pid
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, cpu_seconds(pid) - c0, result


def copy(conn, table, payload):
    def run():
        with conn.cursor() as cur, cur.copy(f"COPY {table} ({COLUMNS}) FROM STDIN (FORMAT binary)") as cp:
            for part in payload:
                cp.write(part)
    wall, cpu, _ = timed(conn, run)
    return wall, cpu


def queued(conn):
    return conn.execute("SELECT count(*) FROM corpus.embedding_queue").fetchone()[0]


def run_case(dsn, case, data, rows):
    """One timed run; returns {"seconds": ..., ...}. A fresh session per run."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        reset(conn)
        if case == "emb_plain":
            wall, cpu = copy(conn, "precedent_chunks_plain", data["emb"])
        elif case == "emb_trigger":
            wall, cpu = copy(conn, "precedent_chunks", data["emb"])
            assert queued(conn) == 0
        elif case == "null_plain":
            wall, cpu = copy(conn, "precedent_chunks_plain", data["null"])
        elif case == "null_trigger":
            conn.execute("LISTEN pg_corpus_embedding")
            wall, cpu = copy(conn, "precedent_chunks", data["null"])
            assert queued(conn) == rows
            notes = list(conn.notifies(timeout=2.0))
            assert [n.payload for n in notes] == ["public.precedent_chunks"], notes
        elif case == "null_deferred":
            conn.execute("SET pg_corpus.defer_embedding_queue = on")
            wall_copy, cpu_copy = copy(conn, "precedent_chunks", data["null"])
            assert queued(conn) == 0
            conn.execute("RESET pg_corpus.defer_embedding_queue")
            wall_enq, cpu_enq, n = timed(conn, lambda: conn.execute(
                "SELECT corpus.corpus_embedding_enqueue('precedent_chunks', 'embedding')").fetchone()[0])
            assert n == rows and queued(conn) == rows
            wall, cpu = wall_copy + wall_enq, cpu_copy + cpu_enq
            return {"seconds": wall, "cpu_seconds": cpu, "copy_seconds": wall_copy, "enqueue_seconds": wall_enq,
                    "copy_cpu_seconds": cpu_copy, "enqueue_cpu_seconds": cpu_enq}
        else:
            raise ValueError(case)
        out = {"seconds": wall, "cpu_seconds": cpu}
        return out


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------

def summarise(runs, rows):
    pairs = {"emb_trigger": "emb_plain", "null_trigger": "null_plain", "null_deferred": "null_plain"}
    s = {}
    for metric, key in (("wall", "seconds"), ("cpu", "cpu_seconds")):
        med = {c: statistics.median(r[key] for r in runs[c]) for c in runs}
        s[metric] = {
            "median_seconds": med,
            "min_seconds": {c: min(r[key] for r in runs[c]) for c in runs},
            "rows_per_second": {c: rows / med[c] for c in runs},
            "ratio_of_medians": {c: med[c] / med[base] for c, base in pairs.items()},
            # the two runs of a pair ran in the same repetition: the median of their ratios
            "median_paired_ratio": {c: statistics.median(a[key] / b[key] for a, b in zip(runs[c], runs[base]))
                                    for c, base in pairs.items()},
            "overhead_us_per_row": {c: (med[c] - med[base]) / rows * 1e6 for c, base in pairs.items()},
        }
    d = runs["null_deferred"]
    s["null_deferred_parts"] = {k + "_median_seconds": statistics.median(r[k + "_seconds"] for r in d)
                                for k in ("copy", "enqueue", "copy_cpu", "enqueue_cpu")}
    return s


SETTINGS = ("shared_buffers", "fsync", "synchronous_commit", "wal_level", "max_wal_size", "checkpoint_timeout")


def machine_info(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        info = h.machine(conn, SETTINGS)
    info["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return info


def run_name(dim, variant):
    return f"reembed_copy_{dim}" + ("" if variant == "stock" else f"_{variant}")


def run_markdown(out, name):
    """One run's summary: its parameters, the table of its cases and the deferred path's split."""
    prm, s, m = out["params"], out["summary"], out["machine"]
    variant = prm.get("variant", "stock")
    label = "" if variant == "stock" else f" — trigger variant `{variant}` ({VARIANTS[variant]})"
    w, c_ = s["wall"], s["cpu"]
    rows = []
    for c in CASES:
        rw, rc = w["ratio_of_medians"].get(c), c_["ratio_of_medians"].get(c)
        over = c_["overhead_us_per_row"].get(c)
        rows.append((f"`{c}` {CASES[c]}", f"{w['median_seconds'][c]:.2f}", f"{c_['median_seconds'][c]:.2f}",
                     f"{w['rows_per_second'][c]:,.0f}", "%.3f" % rw if rw else "—", "%.3f" % rc if rc else "—",
                     "%+.1f" % over if over is not None else "—"))
    d = s["null_deferred_parts"]
    return "\n".join([
        f"**{prm['rows']:,} rows, vector({prm['dim']}), {prm['reps']} interleaved repetitions{label}** "
        f"(`{out['command']}`; {m['date']}, {m['cpus']} cores, PostgreSQL {m['postgres']}, "
        f"pgvector {m['extensions'].get('vector')}, load average at the end "
        f"{m.get('loadavg_at_end', ['?'])[0]}; summary: `bench/results/{name}.md`)", "",
        h.table(["case", "wall s (median)", "backend CPU s (median)", "rows/s (wall)", "ratio, wall",
                 "ratio, CPU", "CPU µs/row over unregistered"], rows), "",
        f"Deferred path split (medians): COPY {d['copy_median_seconds']:.2f} s wall / "
        f"{d['copy_cpu_median_seconds']:.2f} s CPU, then `corpus_embedding_enqueue` "
        f"{d['enqueue_median_seconds']:.2f} s wall / {d['enqueue_cpu_median_seconds']:.2f} s CPU.", ""])


def results_markdown(results):
    """Every committed run summary (bench/results/reembed_copy_*.md): the stock trigger first,
    then the experiments, by dimension within each."""
    def key(path):
        parts = path.stem.split("_")
        variant = parts[3] if len(parts) > 3 else "stock"
        return (list(VARIANTS).index(variant) if variant in VARIANTS else len(VARIANTS), int(parts[2]))
    files = sorted(Path(results).glob("reembed_copy_*.md"), key=key)
    return "\n\n".join(f.read_text().rstrip() for f in files)


def params(p):
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--variant", choices=list(VARIANTS), default="stock",
                   help="stock: the extension's trigger; when/statement: experiments (see VARIANTS)")
    p.add_argument("--no-write", action="store_true", help="print the summary only (no files, no doc update)")


def run(a):
    with h.Cluster(a.dir, keep=a.keep) as uri:
        log(f"cluster {uri}")
        dsn, triggers = prepare(uri, a.dim, a.variant)
        log(f"building {a.rows:,} rows of vector({a.dim})")
        emb, null = make_copy_data(a.rows, a.dim, a.seed)
        data = {"emb": emb, "null": null}
        log(f"payload: {sum(map(len, emb)) / 1e6:.0f} MB with embeddings, {sum(map(len, null)) / 1e6:.0f} MB without")
        run_case(dsn, "emb_plain", data, a.rows)        # warm-up (not recorded)
        run_case(dsn, "emb_trigger", data, a.rows)
        rng = np.random.default_rng(a.seed)
        runs = {c: [] for c in CASES}
        order_log = []
        for rep in range(a.reps):
            order = [list(CASES)[i] for i in rng.permutation(len(CASES))]
            order_log.append(order)
            for case in order:
                r = run_case(dsn, case, data, a.rows)
                runs[case].append(r)
                log(f"rep {rep + 1}/{a.reps} {case:14s} {r['seconds']:.2f}s wall, {r['cpu_seconds']:.2f}s CPU")
        summary = summarise(runs, a.rows)
        for c in summary["wall"]["ratio_of_medians"]:
            w, cp = summary["wall"], summary["cpu"]
            log(f"{c}: wall ratio {w['ratio_of_medians'][c]:.3f} (paired {w['median_paired_ratio'][c]:.3f}), "
                f"CPU ratio {cp['ratio_of_medians'][c]:.3f} (paired {cp['median_paired_ratio'][c]:.3f}), "
                f"CPU {cp['overhead_us_per_row'][c]:+.1f} µs/row")
        machine = machine_info(dsn)
        machine["date"] = h.now()[:10]
        out = {"command": a.command,
               "params": {"rows": a.rows, "dim": a.dim, "reps": a.reps, "seed": a.seed, "triggers": triggers,
                          "variant": a.variant, "variant_description": VARIANTS[a.variant],
                          "hnsw_index_while_loading": False},
               "cases": CASES, "order": order_log, "runs": runs, "summary": summary, "machine": machine}
        if a.no_write:
            print(json.dumps(summary, indent=2))
        else:
            name = run_name(a.dim, a.variant)
            h.write_raw(Path(a.raw) / f"{name}.json", out)
            Path(a.results).mkdir(parents=True, exist_ok=True)
            Path(a.results, f"{name}.md").write_text(run_markdown(out, name))
            h.write_results_section(a.markdown, "", results_markdown(a.results), "Re-embedding")
            log(f"wrote {a.results}/{name}.md, its raw numbers in {a.raw} and the results section of {a.markdown}")
        with psycopg.connect(uri, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {DBNAME} WITH (FORCE)")


SPEC = h.Spec(name="reembed_copy", about=__doc__.split("\n\n")[0], run=run, params=params,
              outputs={"--raw": h.OUT / "raw", "--results": h.RESULTS,
                       "--markdown": DOC},
              smoke=["--rows", "2000", "--reps", "1"])

if __name__ == "__main__":
    h.main(SPEC, doc=__doc__)
