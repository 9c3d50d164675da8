#!/usr/bin/env python3
r"""The long soak: tests/integration/soak.py's searchers, writer, embedding worker and
DBAs (statistics refreshes, corpus_alter) on the legal test database, for longer and with more
clients than the CI test. It reuses the test's soak and data generator; what it checks is said
there. Writes docs/soak.md's results section and bench/out/raw/soak.json (not committed).

    .venv/bin/python bench/soak.py                           # 10 min, 8 searchers
    .venv/bin/python bench/soak.py --seconds 60 --searchers 4 --no-write   # a quick look
    .venv/bin/python bench/soak.py --smoke                   # 5 s, outputs in bench/out/smoke/
"""
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
# (after bench/, so that `soak` is the test's module, not this script)
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import conftest  # noqa: E402  (the legal data generator and loader)
import harness as h  # noqa: E402
import soak  # noqa: E402


def params(p):
    p.add_argument("--seconds", type=float, default=600)
    p.add_argument("--searchers", type=int, default=8)
    p.add_argument("--writers", type=int, default=1)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--dbas", type=int, default=2)
    p.add_argument("--cases", type=int, default=200)
    p.add_argument("--seed", type=int, default=77)
    p.add_argument("--no-write", action="store_true")


def run(a):
    cluster = h.Cluster(a.dir, keep=a.keep)
    uri = cluster.start()
    with h.fresh_database(uri, "soak") as conn:
        conftest.load_legal(conn, conftest.generate_legal_data(a.seed, n_cases=a.cases, n_documents=10))
        conn.execute("SELECT * FROM corpus.corpus_refresh_lexical_stats()")
        items = conn.execute("SELECT (SELECT count(*) FROM precedent_chunks) + (SELECT count(*) FROM halachot)"
                             ).fetchone()[0]
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_corpus'").fetchone()[0]
        server = conn.execute("SHOW server_version").fetchone()[0]
    dsn = h.dsn(uri, "soak")
    t0 = time.time()
    stats, problems = soak.run(dsn, a.seconds, searchers=a.searchers, writers=a.writers, workers=a.workers,
                               dbas=a.dbas, seed=a.seed)
    elapsed = time.time() - t0
    if not a.keep:
        cluster.stop()
    lat = sorted(stats.latencies_ms)
    out = {
        "command": a.command.removeprefix(".venv/bin/python "),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.processor() or platform.machine()}, PostgreSQL {server}, pg_corpus {version}",
        "seconds": a.seconds, "elapsed_with_drain_s": round(elapsed, 1), "items_at_start": items,
        "clients": {"searchers": a.searchers, "writers": a.writers, "workers": a.workers, "dbas": a.dbas},
        "searches": stats.searches, "hits_checked": stats.hits_checked, "writes": stats.writes,
        "embeddings_stored": stats.stored, "results_refused_as_requeued": stats.requeued,
        "refreshes": stats.refreshes, "alters": stats.alters,
        "search_ms_p50": round(statistics.median(lat), 1) if lat else None,
        "search_ms_p95": round(lat[int(0.95 * (len(lat) - 1))], 1) if lat else None,
        "errors": stats.errors[:20], "leaks": [list(x) for x in stats.leaks[:20]],
        "stale_served": [list(x) for x in stats.stale_served[:20]], "problems_at_end": problems[:20],
    }
    print(json.dumps(out, indent=2, ensure_ascii=False))
    if not a.no_write:
        h.write_raw(a.raw, out)
        table = "\n".join(f"| {k} | {v} |" for k, v in out.items() if k not in ("command",))
        section = (f"Run of {out['date']}:\n\n```sh\n.venv/bin/python {out['command']}\n```\n\n"
                   f"| figure | value |\n|---|---|\n{table}\n")
        h.write_results_section(a.markdown, "", section.rstrip("\n"), "Soak")
    ok = not (stats.errors or stats.leaks or stats.stale_served or problems)
    return 0 if ok else 1


SPEC = h.Spec(name="soak", about=__doc__.split("\n\n")[0], run=run, params=params,
              outputs=h.page_outputs("soak", "soak", plot=False),
              smoke=["--seconds", "5", "--searchers", "2", "--dbas", "1", "--cases", "20"])

if __name__ == "__main__":
    sys.exit(h.main(SPEC, doc=__doc__))
