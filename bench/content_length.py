"""The searchable contract's text test per row: corpus._content_length(text) >= n against the
btrim test it replaced, over 200,000 Hebrew texts of 600-1,100 characters, interleaved.

    .venv/bin/python bench/content_length.py [--rows 200000] [--rounds 5]

Starts a private cluster in .pgdata/content-length; writes bench/results/content_length.md.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import quality_report as qr  # noqa: E402

DBNAME = "pg_corpus_content_length"
TESTS = {"char_length(btrim(x)) >= 50": "SELECT count(*) FROM t WHERE char_length(btrim(x)) >= 50",
         "corpus._content_length(x) >= 50": "SELECT count(*) FROM t WHERE corpus._content_length(x) >= 50"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=ROOT / ".pgdata" / "content-length")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "content_length.md")
    a = ap.parse_args(argv)
    uri = qr.pgcluster("start", a.dir)
    times = {k: [] for k in TESTS}
    try:
        with qr.fresh_database(uri, DBNAME) as conn:
            conn.execute("CREATE TABLE t AS SELECT repeat('שלום עולם ', 60 + g %% 50) AS x "
                         "FROM generate_series(1, %s) g", [a.rows])
            conn.execute("VACUUM ANALYZE t")
            for _ in range(a.rounds):
                for name, sql in TESTS.items():
                    t = time.perf_counter()
                    conn.execute(sql).fetchall()
                    times[name].append(time.perf_counter() - t)
    finally:
        qr.pgcluster("stop", a.dir)
    lines = ["# The searchable contract's text test per row", "",
             f"`.venv/bin/python bench/content_length.py --rows {a.rows} --rounds {a.rounds}`: "
             f"{a.rows:,} Hebrew texts of 600-1,100 characters, the two tests interleaved, median of "
             f"{a.rounds} full scans.", "", "| test | median scan | per row |", "|---|---:|---:|"]
    for name, ts in times.items():
        m = statistics.median(ts)
        lines.append(f"| `{name}` | {m * 1000:.0f} ms | {m / a.rows * 1e6:.2f} µs |")
    a.out.write_text("\n".join(lines) + "\n")
    qr.log(f"wrote {a.out}")


if __name__ == "__main__":
    main()
