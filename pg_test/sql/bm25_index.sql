-- corpus_bm25: rows by descending BM25 score, equal to scoring every row; kept exact through
-- inserts, updates, deletes and VACUUM; bad scorings refused with their SQLSTATE.
\set SHOW_CONTEXT never
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION pg_corpus;
CREATE TABLE bm25_docs (id int PRIMARY KEY, kind text NOT NULL, body text NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (corpus.bm25_document(body, 'english')) STORED);
INSERT INTO bm25_docs
SELECT g, CASE WHEN g % 10 = 3 THEN 'rare' ELSE 'common' END,
       (SELECT string_agg((ARRAY['refund','invoice','billing','plan','annual','month','dispute','team',
                                 'lead','reply'])[1 + (g * 7 + w * w * 3 + w * g) % 10], ' ')
          FROM generate_series(1, 3 + g % 9) AS w)
  FROM generate_series(1, 3000) AS g;
CREATE INDEX bm25_docs_idx ON bm25_docs USING corpus_bm25 (tsv);
CREATE FUNCTION bm25_scoring(page int DEFAULT 5) RETURNS corpus.bm25_scoring LANGUAGE sql IMMUTABLE
AS $$ SELECT ROW('{refund,disput,lead}'::text[], '{1.0,2.0,0.5}'::float8[], 6.0, 1.2, 0.75, page)::corpus.bm25_scoring $$;
-- the plan orders by the index, for the rows holding a key
EXPLAIN (COSTS OFF)
SELECT id FROM bm25_docs WHERE tsv OPERATOR(corpus.|||) bm25_scoring()
 ORDER BY tsv OPERATOR(corpus.<@>) bm25_scoring() LIMIT 5;
-- without that condition every row is wanted, which the index does not hold: no index scan
EXPLAIN (COSTS OFF)
SELECT id FROM bm25_docs ORDER BY tsv OPERATOR(corpus.<@>) bm25_scoring() LIMIT 5;
-- the same ranking as scoring every row (ties broken by position, then compared by id)
CREATE FUNCTION by_index(k int, only_kind text DEFAULT NULL) RETURNS TABLE (id int, d float8) LANGUAGE sql AS $$
  SELECT id, d FROM (SELECT id, tsv OPERATOR(corpus.<@>) bm25_scoring() AS d FROM bm25_docs
                      WHERE (only_kind IS NULL OR kind = only_kind)
                        AND tsv OPERATOR(corpus.|||) bm25_scoring()
                      ORDER BY d FETCH FIRST k ROWS WITH TIES) s
   WHERE d < 0 ORDER BY d, id LIMIT k $$;
CREATE FUNCTION by_scan(k int, only_kind text DEFAULT NULL) RETURNS TABLE (id int, d float8) LANGUAGE sql AS $$
  SELECT id, d FROM (SELECT id, tsv OPERATOR(corpus.<@>) bm25_scoring() AS d FROM bm25_docs
                      WHERE only_kind IS NULL OR kind = only_kind OFFSET 0) s
   WHERE d < 0 ORDER BY d, id LIMIT k $$;
CREATE FUNCTION same(k int, only_kind text DEFAULT NULL) RETURNS boolean LANGUAGE sql AS $$
  SELECT (SELECT array_agg(id ORDER BY d, id) FROM by_index(k, only_kind))
       = (SELECT array_agg(id ORDER BY d, id) FROM by_scan(k, only_kind)) $$;
SELECT same(10) AS top10, same(500) AS top500, same(100000) AS every_match,
       same(10, 'rare') AS top10_of_a_tenth, (SELECT count(*) FROM by_index(10, 'rare')) AS rows_of_a_tenth;
-- rows written after the build: the pending list, then segments merged
INSERT INTO bm25_docs SELECT g, 'common', 'refund dispute ' || repeat('lead ', g % 5) FROM generate_series(3001, 6000) AS g;
UPDATE bm25_docs SET body = body || ' dispute dispute' WHERE id % 7 = 0;
DELETE FROM bm25_docs WHERE id % 5 = 0;
SELECT same(10) AS top10, same(500) AS top500, same(100000) AS every_match, same(10, 'rare') AS top10_of_a_tenth;
VACUUM bm25_docs;
SELECT same(10) AS top10, same(100000) AS every_match;
-- the index read whole agrees with itself and with the table
SELECT segments >= 1 AS has_segments, documents = heap_rows AS every_row_indexed,
       documents = (SELECT count(*) FROM bm25_docs) AS as_many_as_rows
  FROM corpus.bm25_index_check('bm25_docs_idx');
SELECT heap_rows IS NULL AS structure_only FROM corpus.bm25_index_check('bm25_docs_idx', heapallindexed => false);
SELECT * FROM corpus.bm25_index_check('bm25_docs_pkey');
-- a first page of one row: the scan goes on with larger pages through the whole ranking
SELECT array_agg(id ORDER BY d, id) = (SELECT array_agg(id ORDER BY d, id) FROM by_scan(100000)) AS whole_ranking
  FROM (SELECT id, tsv OPERATOR(corpus.<@>) bm25_scoring(1) AS d FROM bm25_docs
         WHERE tsv OPERATOR(corpus.|||) bm25_scoring(1) ORDER BY d LIMIT 100000) s
 WHERE d < 0;
-- bad scorings are refused
SELECT id FROM bm25_docs WHERE tsv OPERATOR(corpus.|||) ROW('{refund}', '{-1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring
 ORDER BY tsv OPERATOR(corpus.<@>) ROW('{refund}', '{-1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring LIMIT 1;
SELECT id FROM bm25_docs WHERE tsv OPERATOR(corpus.|||) ROW('{refund}', '{1}', 6, 1.2, 7, 5)::corpus.bm25_scoring
 ORDER BY tsv OPERATOR(corpus.<@>) ROW('{refund}', '{1}', 6, 1.2, 7, 5)::corpus.bm25_scoring LIMIT 1;
SELECT id FROM bm25_docs WHERE tsv OPERATOR(corpus.|||) ROW('{refund,lead}', '{1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring
 ORDER BY tsv OPERATOR(corpus.<@>) ROW('{refund,lead}', '{1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring LIMIT 1;
SELECT id FROM bm25_docs WHERE tsv OPERATOR(corpus.|||) ROW('{refund}', NULL, 6, 1.2, 0.75, 5)::corpus.bm25_scoring
 ORDER BY tsv OPERATOR(corpus.<@>) ROW('{refund}', NULL, 6, 1.2, 0.75, 5)::corpus.bm25_scoring LIMIT 1;
SELECT id FROM bm25_docs WHERE tsv OPERATOR(corpus.|||) ROW('{refund,lead}', '{1,NULL}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring
 ORDER BY tsv OPERATOR(corpus.<@>) ROW('{refund,lead}', '{1,NULL}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring LIMIT 1;
SELECT id FROM bm25_docs WHERE tsv OPERATOR(corpus.|||) ROW('{NULL,lead}', '{1,1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring
 ORDER BY tsv OPERATOR(corpus.<@>) ROW('{NULL,lead}', '{1,1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring LIMIT 1;
-- an index scan returns exactly the rows its condition holds for, as a scan of the table
-- does: whichever keys the condition and the ordering name, with a NULL scoring, and with two
-- conditions
CREATE FUNCTION both_ways(q text, OUT index_scan boolean, OUT via_index bigint, OUT via_table bigint,
                          OUT same_rows boolean, OUT in_order boolean) LANGUAGE plpgsql AS $$
DECLARE a text[]; b text[]; plan text; ds float8[];
BEGIN
  SET LOCAL enable_seqscan = off;
  EXECUTE 'EXPLAIN (COSTS OFF) ' || q INTO plan;
  index_scan := plan LIKE 'Index Scan using bm25_docs_idx%';
  EXECUTE format('SELECT array_agg(id || '':'' || coalesce(d::text, ''NULL'') ORDER BY d, id) FROM (%s) s', q) INTO a;
  -- the distances in the order the scan returned them
  EXECUTE format('SELECT array_agg(d) FROM (%s) s', q) INTO ds;
  in_order := coalesce(ds, '{}') = ARRAY(SELECT x FROM unnest(ds) AS x ORDER BY x);
  SET LOCAL enable_seqscan = on;
  SET LOCAL enable_indexscan = off;
  EXECUTE format('SELECT array_agg(id || '':'' || coalesce(d::text, ''NULL'') ORDER BY d, id) FROM (%s) s', q) INTO b;
  via_index := coalesce(cardinality(a), 0);
  via_table := coalesce(cardinality(b), 0);
  same_rows := a IS NOT DISTINCT FROM b;
END $$;
-- (rows in the pending list as well as in segments)
INSERT INTO bm25_docs SELECT g, 'common', 'plan lead annual ' || repeat('month ', g % 3) FROM generate_series(8001, 8020) AS g;
SELECT pending_rows > 0 AS pending FROM corpus.bm25_index_check('bm25_docs_idx', heapallindexed => false);
SELECT * FROM both_ways($$SELECT id, tsv OPERATOR(corpus.<@>) bm25_scoring() AS d FROM bm25_docs
  WHERE tsv OPERATOR(corpus.|||) bm25_scoring() ORDER BY d$$);
SELECT * FROM both_ways($$SELECT id, tsv OPERATOR(corpus.<@>) bm25_scoring() AS d FROM bm25_docs
  WHERE tsv OPERATOR(corpus.|||) ROW('{plan,lead,nothing}', '{0,1,1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring
  ORDER BY d$$);
SELECT * FROM both_ways($$SELECT id, tsv OPERATOR(corpus.<@>) bm25_scoring() AS d FROM bm25_docs
  WHERE tsv OPERATOR(corpus.|||) ROW('{annual}', '{1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring
    AND tsv OPERATOR(corpus.|||) ROW('{month,team}', '{1,1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring
  ORDER BY d$$);
SELECT * FROM both_ways($$SELECT id, NULL::float8 AS d FROM bm25_docs
  WHERE tsv OPERATOR(corpus.|||) NULL::corpus.bm25_scoring$$);
-- the condition alone, without an ordering
SELECT * FROM both_ways($$SELECT id, NULL::float8 AS d FROM bm25_docs
  WHERE tsv OPERATOR(corpus.|||) ROW('{annual,team}', '{1,1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring$$);
-- a second ordering: the index ranks by the first, the executor orders its ties by the second
SET enable_seqscan = off;
EXPLAIN (COSTS OFF)
SELECT id FROM bm25_docs WHERE tsv OPERATOR(corpus.|||) ROW('{plan}', '{1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring
 ORDER BY tsv OPERATOR(corpus.<@>) ROW('{plan}', '{1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring,
          tsv OPERATOR(corpus.<@>) ROW('{lead}', '{1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring;
SELECT count(*) AS rows, bool_and(ok IS NOT FALSE) AS in_order FROM (
  SELECT (d1, d2) >= lag((d1, d2)) OVER () AS ok FROM (
    SELECT tsv OPERATOR(corpus.<@>) ROW('{plan}', '{1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring AS d1,
           tsv OPERATOR(corpus.<@>) ROW('{lead}', '{1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring AS d2
      FROM bm25_docs WHERE tsv OPERATOR(corpus.|||) ROW('{plan}', '{1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring
     ORDER BY d1, d2) s) t;
-- one scan rescanned with another scoring for each outer row: the same sums as sorting the table
CREATE TEMP TABLE scorings AS
SELECT n, ROW(ARRAY[w], '{1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring AS s
  FROM unnest('{plan,lead,annual,reply}'::text[]) WITH ORDINALITY AS u(w, n);
CREATE TEMP TABLE via_index AS
SELECT n, (SELECT sum(d) FROM (SELECT tsv OPERATOR(corpus.<@>) q.s AS d FROM bm25_docs
                                WHERE tsv OPERATOR(corpus.|||) q.s ORDER BY d LIMIT 7) x) AS top7
  FROM (SELECT n, ROW(ARRAY[w], '{1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring AS s
          FROM unnest('{plan,lead,annual,reply}'::text[]) WITH ORDINALITY AS u(w, n)) q;
EXPLAIN (COSTS OFF)
SELECT n, (SELECT sum(d) FROM (SELECT tsv OPERATOR(corpus.<@>) q.s AS d FROM bm25_docs
                                WHERE tsv OPERATOR(corpus.|||) q.s ORDER BY d LIMIT 7) x) AS top7
  FROM (SELECT n, ROW(ARRAY[w], '{1}', 6, 1.2, 0.75, 5)::corpus.bm25_scoring AS s
          FROM unnest('{plan,lead,annual,reply}'::text[]) WITH ORDINALITY AS u(w, n)) q;
RESET enable_seqscan;
SET enable_indexscan = off;
SELECT bool_and(i.top7 = (SELECT sum(d) FROM (SELECT tsv OPERATOR(corpus.<@>) q.s AS d FROM bm25_docs
                                                WHERE tsv OPERATOR(corpus.|||) q.s ORDER BY d LIMIT 7) x)) AS rescans_agree,
       count(*) AS scorings
  FROM via_index i JOIN scorings q USING (n);
RESET enable_indexscan;
-- under row-level security the condition is still the index's (its function is leakproof)
CREATE ROLE bm25_reader;
GRANT USAGE ON SCHEMA corpus TO bm25_reader;
GRANT SELECT ON bm25_docs TO bm25_reader;
ALTER TABLE bm25_docs ENABLE ROW LEVEL SECURITY;
CREATE POLICY common_only ON bm25_docs FOR SELECT TO bm25_reader USING (kind = 'common');
SET ROLE bm25_reader;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF)
SELECT id FROM bm25_docs WHERE tsv OPERATOR(corpus.|||) bm25_scoring()
 ORDER BY tsv OPERATOR(corpus.<@>) bm25_scoring() LIMIT 5;
SELECT count(*) FILTER (WHERE kind <> 'common') AS other_kinds, count(*) > 0 AS some_rows
  FROM (SELECT kind FROM bm25_docs WHERE tsv OPERATOR(corpus.|||) bm25_scoring()
         ORDER BY tsv OPERATOR(corpus.<@>) bm25_scoring() LIMIT 50) s;
RESET enable_seqscan;
RESET ROLE;
DROP POLICY common_only ON bm25_docs;
ALTER TABLE bm25_docs DISABLE ROW LEVEL SECURITY;
REVOKE ALL ON bm25_docs FROM bm25_reader;
REVOKE ALL ON SCHEMA corpus FROM bm25_reader;
DROP ROLE bm25_reader;
-- the operator's name is the extension's own: a tsquery match still resolves with corpus first
SET search_path = corpus, public;
SELECT to_tsvector('simple', 'refund lead') @@ 'lead' AS tsquery_match;
RESET search_path;
CREATE INDEX ON bm25_docs USING corpus_bm25 (tsv) WITH (fillfactor = 50);
CREATE INDEX ON bm25_docs USING corpus_bm25 (body);
REINDEX INDEX bm25_docs_idx;
SELECT same(10) AS after_reindex;
REINDEX INDEX CONCURRENTLY bm25_docs_idx;
INSERT INTO bm25_docs SELECT g, 'rare', 'lead lead refund' FROM generate_series(7001, 7100) AS g;
SELECT same(10) AS after_reindex_concurrently, same(10, 'rare') AS rare_after_reindex_concurrently;
DROP TABLE bm25_docs;
DROP FUNCTION by_index, by_scan, same, both_ways, bm25_scoring;
DROP TABLE scorings, via_index;
DROP EXTENSION pg_corpus;
DROP EXTENSION vector;
