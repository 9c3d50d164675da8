"""The searchable contract's text test per row: corpus._content_length(text) >= n against the
btrim test it replaced, over 200,000 Hebrew texts of 600-1,100 characters, interleaved.

    .venv/bin/python bench/content_length.py [--rows 200000] [--rounds 5]

Writes bench/results/content_length.md.
"""
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402

DBNAME = "pg_corpus_content_length"
TESTS = {"char_length(btrim(x)) >= 50": "SELECT count(*) FROM t WHERE char_length(btrim(x)) >= 50",
         "corpus._content_length(x) >= 50": "SELECT count(*) FROM t WHERE corpus._content_length(x) >= 50"}


def params(p):
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=5)


def run(a):
    with h.Cluster(a.dir, keep=a.keep) as uri, h.fresh_database(uri, DBNAME) as conn:
        conn.execute("CREATE TABLE t AS SELECT repeat('שלום עולם ', 60 + g %% 50) AS x "
                     "FROM generate_series(1, %s) g", [a.rows])
        conn.execute("VACUUM ANALYZE t")
        calls = {name: (lambda q=q: conn.execute(q).fetchall()) for name, q in TESTS.items()}
        times, _ = h.interleave(calls, a.rounds, np.random.default_rng(0))
    rows = []
    for name, ts in times.items():
        m = statistics.median(ts)
        rows.append((f"`{name}`", f"{m:.0f} ms", f"{m / a.rows * 1e3:.2f} µs"))
    text = "\n".join([
        "# The searchable contract's text test per row", "",
        f"`{a.command}`: {a.rows:,} Hebrew texts of 600-1,100 characters, the two tests interleaved, "
        f"median of {a.rounds} full scans.", "",
        h.table(["test", "median scan", "per row"], rows)]) + "\n"
    Path(a.out).write_text(text)
    h.log(f"wrote {a.out}")


SPEC = h.Spec(name="content_length", about=__doc__.split("\n")[0], run=run, params=params,
              outputs={"--out": h.RESULTS / "content_length.md"}, smoke=["--rows", "2000", "--rounds", "2"])

if __name__ == "__main__":
    h.main(SPEC, doc=__doc__)
