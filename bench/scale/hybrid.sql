-- pgbench script of bench/scale.py: one hybrid search of the main corpus per
-- transaction, with a random query (vector and text) of the bench_queries table that
-- bench/scale.py stores in each size's database. Run by bench/scale.py as
--   pgbench -n -f bench/scale/hybrid.sql -D nq=<queries> -c N -j N -T <seconds> scale
\set qid random(1, :nq)
SELECT h.* FROM bench_queries q,
       LATERAL corpus.corpus_hybrid_search('external_precedents', q.qvec, q.qtext, k => 10) h
 WHERE q.qid = :qid;
