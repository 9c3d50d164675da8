#!/usr/bin/env python3
"""The evidence filter on the labelled sets (docs/evidence.md): how often it says "not in the
knowledge base" for questions the corpus cannot answer, how often it wrongly empties an
answerable one, and what it costs in nDCG@10 and latency.

    .venv/bin/python bench/evidence.py          # writes docs/evidence.md

Per set (HeQ val, Cranfield), with the shipped e5 vectors and the analyser's BM25:

1. the gold queries are split by a hash of their id into a calibration half and a test half;
   `corpus_calibrate_evidence(<calibration half>, quantile => q, apply => true)` sets the vector
   thresholds, for q = 0.95 (the default), 0.8 and 0.5 (steps 2 and 3 run for each);
2. answerable: the test half on the full corpus, `corpus_evaluate` in hybrid mode without and
   with `evidence => true`, compared by `corpus_compare_runs` (nDCG@10, paired randomisation
   test); "wrongly emptied" is the share of test queries the filtered search returns no row for;
3. unanswerable (the issue's construction): 30% of the test queries are drawn (seeded), and a
   copy of the corpus is loaded without every document judged relevant to any of them — those
   queries have no answer in the copy; the copy gets the same evidence settings, and the share
   of them the filtered search returns no row for is the filter's "says nothing" rate (without
   the filter it is 0: a search always returns its nearest items);
4. latency: p50 of `corpus_hybrid_search` with and without the filter over the test queries,
   interleaved in one session.

Everything runs through the extension (its loader scripts/load_beir.py, corpus_calibrate_evidence,
corpus_evaluate, corpus_compare_runs); nothing of the filter is re-implemented here.
"""
import hashlib
import random
import statistics
import sys
from pathlib import Path

import numpy as np
from psycopg.types.json import Jsonb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))
import load_beir  # noqa: E402
import harness as h  # noqa: E402
import quality_report as qr  # noqa: E402

DBNAME = "evidence_bench"
K = 10
UNANSWERABLE_SHARE = 0.3
SEED = 2026
# calibration quantiles: the default (0.95) and two stricter operating points
QUANTILES = (0.95, 0.8, 0.5)
SEARCH = ("SELECT count(*) FROM corpus.corpus_hybrid_search(%s, %s::vector, %s, k => %s, "
          "max_per_parent => 1, evidence => %s)")


def half(query_id):
    return "cal" if hashlib.sha1(query_id.encode()).digest()[0] % 2 == 0 else "test"


def copy_gold(conn, src, dst, corpus, query_ids, judgments=True):
    conn.execute("DELETE FROM corpus.gold_sets WHERE name = %s", [dst])
    conn.execute("INSERT INTO corpus.gold_sets (name, corpus, level) SELECT %s, %s, level FROM corpus.gold_sets "
                 "WHERE name = %s", [dst, corpus, src])
    conn.execute("""INSERT INTO corpus.gold_queries (gold_set, query_id, query_text, query_vec, filters)
                    SELECT %s, query_id, query_text, query_vec, filters FROM corpus.gold_queries
                     WHERE gold_set = %s AND query_id = ANY(%s)""", [dst, src, query_ids])
    if judgments:
        conn.execute("""INSERT INTO corpus.gold_judgments (gold_set, query_id, target, grade)
                        SELECT %s, query_id, target, grade FROM corpus.gold_judgments
                         WHERE gold_set = %s AND query_id = ANY(%s)""", [dst, src, query_ids])


def evaluate(conn, gold, evidence):
    row = conn.execute("""SELECT run_id, queries, ndcg_at_k FROM corpus.corpus_evaluate(%s, modes => '{hybrid}',
                              k => %s, evidence => %s)""", (gold, K, evidence)).fetchone()
    empty = conn.execute("SELECT count(*) FILTER (WHERE cardinality(ranking) = 0), count(*) "
                         "FROM corpus.eval_query_results WHERE run_id = %s", [row[0]]).fetchone()
    return dict(run_id=row[0], queries=row[1], ndcg=row[2], empty=empty[0] / max(1, empty[1]))


def latency(conn, corpus, queries, rounds=2):
    times = h.interleave_queries(
        lambda q: {ev: (lambda ev=ev: conn.execute(SEARCH, (corpus, q[1], q[0], K, ev)).fetchone())
                   for ev in (False, True)}, queries, rounds, np.random.default_rng(0))
    return {ev: statistics.median(t) for ev, t in times.items()}


def measure(conn, folder, corpus, gold, language, latency_queries):
    load_beir.load_beir(conn, folder, corpus=corpus, gold_set=gold, create_schema=True, log=qr.log, language=language)
    qids = [r[0] for r in conn.execute("SELECT query_id FROM corpus.gold_queries WHERE gold_set = %s ORDER BY query_id",
                                       [gold]).fetchall()]
    cal = [q for q in qids if half(q) == "cal"]
    test = [q for q in qids if half(q) == "test"]
    copy_gold(conn, gold, f"{gold}.cal", corpus, cal)
    copy_gold(conn, gold, f"{gold}.test", corpus, test)
    plain = evaluate(conn, f"{gold}.test", False)
    # unanswerable: a copy of the corpus without the relevant documents of 30% of the test queries
    rng = random.Random(SEED)
    unanswerable = sorted(rng.sample(test, round(UNANSWERABLE_SHARE * len(test))))
    holdout, hold_gold = f"{corpus}_holdout", f"{gold}.holdout"
    load_beir.load_beir(conn, folder, corpus=holdout, gold_set=f"{gold}.holdout_all", log=qr.log, language=language)
    removed = conn.execute("""
        WITH relevant AS (SELECT DISTINCT c.case_number FROM corpus.gold_judgments j
                            JOIN case_law c ON c.id::text = j.target
                           WHERE j.gold_set = %s AND j.query_id = ANY(%s) AND j.grade > 0),
             gone AS (SELECT h.id FROM case_law h JOIN relevant r USING (case_number)
                       WHERE h.source_kind = %s),
             chunks AS (DELETE FROM precedent_chunks p USING gone WHERE p.case_law_id = gone.id RETURNING 1)
        SELECT count(*) FROM chunks""", [gold, unanswerable, f"beir_{holdout}"]).fetchone()[0]
    conn.execute("SELECT corpus.corpus_refresh_lexical_stats(%s)", [holdout])
    copy_gold(conn, gold, hold_gold, holdout, unanswerable, judgments=False)
    points = []
    for q in QUANTILES:
        c = conn.execute("SELECT max_distance, max_gap, answerable, kept FROM corpus.corpus_calibrate_evidence(%s, "
                         "quantile => %s, apply => true)", [f"{gold}.cal", q]).fetchone()
        calib = dict(quantile=q, max_distance=c[0], max_gap=c[1], answerable=c[2], kept=c[3])
        filtered = evaluate(conn, f"{gold}.test", True)
        cmp = conn.execute("SELECT delta, wins, losses, ties, p_value FROM corpus.corpus_compare_runs(%s, %s) "
                           "WHERE metric = 'ndcg'", (plain["run_id"], filtered["run_id"])).fetchone()
        evidence = conn.execute("SELECT evidence FROM corpus.corpora WHERE name = %s", [corpus]).fetchone()[0]
        conn.execute("SELECT corpus.corpus_alter(%s, evidence => %s)", [holdout, Jsonb(evidence)])
        says_nothing = evaluate(conn, hold_gold, True)["empty"]
        qr.log(f"{gold} q={q}: {calib}; says nothing for {says_nothing:.3f} of {len(unanswerable)}")
        points.append(dict(calib=calib, filtered=filtered, says_nothing=says_nothing,
                           cmp=dict(zip(("delta", "wins", "losses", "ties", "p"), cmp))))
    # latency at the default quantile's thresholds
    conn.execute("SELECT * FROM corpus.corpus_calibrate_evidence(%s, apply => true)", [f"{gold}.cal"])
    queries = conn.execute("SELECT query_text, query_vec::text FROM corpus.gold_queries WHERE gold_set = %s "
                           "ORDER BY query_id LIMIT %s", [f"{gold}.test", latency_queries]).fetchall()
    ms = latency(conn, corpus, queries)
    return dict(cal=len(cal), test=len(test), plain=plain, points=points, unanswerable=len(unanswerable),
                removed=removed, ms=ms)


def write(path, results, command, started, seconds, info):
    lines = ["# The evidence filter on the labelled sets", "",
             "`evidence => true` (docs/sql-reference.md) returns a hit only with evidence — a near vector or rare "
             "query words covering more than half of the query — so that no rows means \"not in the knowledge "
             "base\". Method (bench/evidence.py's docstring): vector thresholds calibrated on one half of each "
             "set's queries (`corpus_calibrate_evidence`, quantile 0.95), measured on the other half; unanswerable "
             "questions made by removing, from a copy of the corpus, every document judged relevant to 30% of the "
             "test queries (drawn with a fixed seed).", "",
             "```sh", command, "```", "",
             f"Run of {started:%Y-%m-%d %H:%M} UTC, {seconds / 60:.1f} min; {info}.", "",
             "| set | quantile | max_distance | max_gap | kept (calibration) | nDCG@10 plain | nDCG@10 filtered "
             "| Δ | p | answerable wrongly emptied | says nothing (unanswerable) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in results.items():
        for pt in r["points"]:
            c = pt["calib"]
            lines.append(
                f"| {name} | {c['quantile']} | {c['max_distance']:.4f} | {c['max_gap']:.4f} | {c['kept']:.3f} | "
                f"{r['plain']['ndcg']:.4f} | {pt['filtered']['ndcg']:.4f} | {pt['cmp']['delta']:+.4f} | "
                f"{pt['cmp']['p']:.3f} | {pt['filtered']['empty']:.3f} | {pt['says_nothing']:.3f} |")
    lines += ["", "| set | calibration / test queries | unanswerable queries (documents removed) | p50 ms plain "
              "| p50 ms filtered (quantile 0.95) | × |", "|---|---|---|---:|---:|---:|"]
    for name, r in results.items():
        ms = r["ms"]
        lines.append(f"| {name} | {r['cal']} / {r['test']} | {r['unanswerable']} ({r['removed']}) | {ms[False]:.1f} | "
                     f"{ms[True]:.1f} | {ms[True] / ms[False]:.2f} |")
    lines += ["", "Reading: \"says nothing\" is the share of unanswerable questions for which the filtered search "
              "returns no row — what lets a caller answer \"not in the knowledge base\" without calling a model; "
              "\"wrongly emptied\" the share of answerable test questions it returns no row for. The nDCG@10 "
              "difference is the cost on answerable questions (the filter only removes hits, so it can only lower "
              "nDCG by emptying a query or dropping a relevant hit). Each quantile is one operating point of the "
              "same trade-off: the stricter the vector thresholds, the more unanswerable questions get no row, and "
              "the more answerable ones lose hits or are emptied. The rare-words rule admits what shares the "
              "question's rare words whatever the thresholds, so on a collection whose documents share their "
              "technical vocabulary (Cranfield) the filter seldom says nothing; on one whose questions name "
              "specific entities (HeQ) a strict calibration says nothing for most unanswerable questions. The "
              "filter is off by default (`evidence.enabled`); its thresholds are per corpus and model, and a "
              "deployment chooses its operating point on its own questions (a gold set with unanswerable "
              "questions shows both sides: `corpus_calibrate_evidence` reports `rejected` for them).", ""]
    path.write_text("\n".join(lines))


def info(a, version, pg):
    return (f"PostgreSQL {pg}, pg_corpus {version}, k = {K}, hybrid mode, latency over the first "
            f"{a.latency_queries} test queries per set")


SPEC = qr.labelled_spec("evidence", DBNAME, __doc__, "evidence.md", write=write, info=info,
                        measure=lambda conn, folder, corpus, gold, lang, a: measure(
                            conn, folder, corpus, gold, lang, a.latency_queries),
                        options={"--latency-queries": (100, 5)})

if __name__ == "__main__":
    h.main(SPEC, doc=__doc__)
