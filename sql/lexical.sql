-- ==========================================================================================
-- Lexical helpers used by the lexical subplan.
-- ==========================================================================================

-- The query's lexemes ORed together. An AND query (plainto_tsquery, as most hybrid-search
-- recipes use) finds almost nothing for natural-language questions: nDCG@10 0.002 on HeQ val
-- against 0.559 for OR (issue 3's measurements). client_min_messages hides the NOTICE that
-- PostgreSQL prints for a query of stop words only.
CREATE FUNCTION corpus._or_tsquery(config regconfig, query text) RETURNS tsquery
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
AS $$
    SELECT CASE WHEN numnode(q) = 0 THEN q
                ELSE replace(q::text, ' & ', ' | ')::tsquery END
      FROM plainto_tsquery(config, query) AS q
$$;
