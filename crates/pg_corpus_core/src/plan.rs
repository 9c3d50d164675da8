//! The SQL of every subplan a search runs.
//!
//! [`scope_predicate`] is the ONLY place the corpus predicate (isolation + searchable contract)
//! is written; every query this module produces — semantic, lexical, slice estimate and the
//! final fetch — takes its FROM/WHERE from [`from_where`], which always includes it. Values are
//! bind parameters; identifiers are quoted. Each branch is its own single-table-group query with
//! the parent joined on its key (Citus can push that down per shard); fusion happens in Rust.

use crate::lexical::ScopeCheck;
use crate::model::{BoundCond, Branch, ColRef, Condition, Corpus, Op, Source, Strategy};
use crate::sql::{ident, qualified, Param, Params};

#[derive(Debug, Clone)]
pub struct Subplan {
    pub source: usize,
    pub branch: Branch,
    pub strategy: Strategy,
    pub sql: String,
    pub params: Vec<Param>,
    /// At most this many rows (the round's candidate window).
    pub limit: i64,
    /// A lexical subplan whose candidates leave out documents matching only common keys.
    pub pruned: bool,
    /// A lexical subplan to be planned without nested loops, so that its index scan comes
    /// first ([`ScopeCheck::JoinedAfterIndex`]).
    pub index_first: bool,
    /// One plan serves every value of its parameters ([`one_plan_serves`],
    /// [`ranking_plan_serves`]): planned once and kept, not planned again for each search.
    pub generic: bool,
}

/// Whether one plan serves every value of a statement over this source: it reads the item
/// table alone (no parent to join, not distributed), so the plan has no join to choose and no
/// shards to route to. A lookup by ids is then planned once (a ranking through the corpus_bm25
/// index: [`ranking_plan_serves`]). A lookup joined to its parent is planned with its values:
/// a generic plan estimates the parent's isolation value by its average, and may start from
/// the parents holding it, reading a large corpus' items whole on every search.
pub fn one_plan_serves(src: &Source) -> bool {
    src.parent.is_none() && !src.distributed()
}

/// `alias."column"`.
pub(crate) fn col(c: &ColRef) -> String {
    format!("{}.{}", c.side.alias(), ident(&c.column))
}

/// `column = value` with the value cast to the column's built-in base type: comparing never
/// builds a value of a domain (whose CHECK would run) or of a type a table owner defined.
fn bound(c: &BoundCond, params: &mut Params) -> String {
    if c.values.len() == 1 {
        let p = params.push(Param::Text(c.values[0].clone()));
        format!("{} = {p}::text::{}", col(&c.col), c.col.cast_type)
    } else {
        let p = params.push(Param::TextArray(c.values.clone()));
        format!("{} = ANY({p}::text[]::{}[])", col(&c.col), c.col.cast_type)
    }
}

/// The parts of a source's corpus predicate, each a list of SQL conditions (ANDed).
pub struct ScopeParts {
    /// The corpus isolation predicate on the parent (or item) table.
    pub isolation: Vec<String>,
    /// Non-trivial text: `min_length` characters after trim.
    pub text: Vec<String>,
    /// The parent's required metadata is non-empty.
    pub parent_complete: Vec<String>,
    /// The source rule (e.g. review_status = 'approved').
    pub rule: Vec<String>,
}

/// THE corpus predicate of a source, in parts: isolation, then the searchable contract (text
/// length, parent completeness, source rule). Nothing else in the code base writes these
/// conditions; [`scope_predicate`] and the health checks assemble them from here.
pub fn scope_parts(src: &Source, params: &mut Params) -> ScopeParts {
    let isolation = src.isolation.iter().map(|c| bound(c, params)).collect();
    let text = text_contract(src, &col(&src.text));
    let parent_complete = src
        .parent_required
        .iter()
        .map(|c| {
            if c.is_array {
                format!("cardinality({}) > 0", col(c))
            } else if src.content_function {
                format!("corpus._content_length({}::text) > 0", col(c))
            } else {
                format!("NULLIF(btrim({}::text), '') IS NOT NULL", col(c))
            }
        })
        .collect();
    let rule = src.rule.iter().map(|c| bound(c, params)).collect();
    ScopeParts { isolation, text, parent_complete, rule }
}

/// The searchable contract's text condition on `expr` (the source's text column, or that column
/// carried out of a subquery): at least `min_length` characters of content
/// ([`crate::content::content_length`]).
fn text_contract(src: &Source, expr: &str) -> Vec<String> {
    if src.min_length > 0 && src.has_content_function {
        vec![format!("corpus._has_content({expr}, {})", src.min_length)]
    } else if src.min_length > 0 && src.content_function {
        vec![format!("corpus._content_length({expr}) >= {}", src.min_length)]
    } else if src.min_length > 0 {
        vec![format!("char_length(btrim({expr})) >= {}", src.min_length)]
    } else {
        vec![format!("{expr} IS NOT NULL")]
    }
}

/// THE corpus predicate of a source as the searches use it: every part of [`scope_parts`], and
/// an embedding for the semantic branch. Every search query built here carries it.
pub fn scope_predicate(src: &Source, semantic: bool, params: &mut Params) -> Vec<String> {
    scope_conditions(src, semantic, true, params)
}

/// [`scope_predicate`], with the text condition left out when `text` is false (the caller then
/// applies [`text_contract`] itself).
fn scope_conditions(src: &Source, semantic: bool, text: bool, params: &mut Params) -> Vec<String> {
    let parts = scope_parts(src, params);
    let mut preds = parts.isolation;
    if text {
        preds.extend(parts.text);
    }
    preds.extend(parts.parent_complete);
    preds.extend(parts.rule);
    if semantic {
        preds.push(format!("{} IS NOT NULL", col(&src.embedding)));
    }
    preds
}

/// `cond1 AND cond2 ...`, or `true` for none.
pub fn all(conds: &[String]) -> String {
    if conds.is_empty() {
        "true".to_string()
    } else {
        format!("({})", conds.join(" AND "))
    }
}

/// `FROM item i [TABLESAMPLE SYSTEM (pct)] [JOIN parent p ON key]`.
pub(crate) fn from_clause_sampled(src: &Source, sample_percent: Option<f64>) -> String {
    let mut sql = format!("FROM {} AS i", qualified(&src.item.schema, &src.item.name));
    if let Some(pct) = sample_percent {
        sql.push_str(&format!(" TABLESAMPLE SYSTEM ({pct})"));
    }
    if let (Some(parent), Some(key)) = (&src.parent, &src.parent_key) {
        sql.push_str(&format!(
            " JOIN {} AS p ON {} = {}",
            qualified(&parent.schema, &parent.name),
            col(key),
            col(&src.parent_fk)
        ));
    }
    sql
}

fn filter_sql(src: &Source, cond: &Condition, params: &mut Params) -> String {
    let c = &src.filter_columns[&cond.field];
    let ty = cond.field_type.sql();
    match cond.op {
        Op::In => {
            let p = params.push(Param::TextArray(cond.values.clone()));
            format!("{} = ANY({p}::text[]::{ty}[])", col(c))
        }
        op => {
            let p = params.push(Param::Text(cond.values[0].clone()));
            format!("{} {} {p}::text::{ty}", col(c), op.sql())
        }
    }
}

/// `FROM item i [JOIN parent p ON key] WHERE <scope predicate> AND <caller filters> [AND extra]`.
pub fn from_where(src: &Source, conds: &[Condition], semantic: bool, extra: &[String], params: &mut Params) -> String {
    from_where_parts(src, conds, semantic, true, extra, params)
}

/// [`from_where`], with the text condition of the searchable contract left out when `text` is
/// false: the caller must then apply [`text_contract`] itself (the BM25 subplan does, after
/// ranking, so that only the rows it returns detoast their text).
fn from_where_parts(
    src: &Source,
    conds: &[Condition],
    semantic: bool,
    text: bool,
    extra: &[String],
    params: &mut Params,
) -> String {
    let mut sql = from_clause_sampled(src, None);
    let mut preds = scope_conditions(src, semantic, text, params);
    preds.extend(conds.iter().map(|c| filter_sql(src, c, params)));
    preds.extend(extra.iter().cloned());
    sql.push_str("\nWHERE ");
    sql.push_str(&if preds.is_empty() { "true".to_string() } else { preds.join("\n  AND ") });
    sql
}

fn query_vector(corpus: &Corpus, p: &str) -> String {
    format!("CAST({p}::real[] AS {}.vector)", ident(&corpus.vector_schema))
}

fn distance_expr(corpus: &Corpus, src: &Source, vec: &str) -> String {
    format!("{} OPERATOR({}.{}) {vec}", col(&src.embedding), ident(&corpus.vector_schema), src.distance.operator())
}

/// `EXISTS` an entry of the re-embed queue for the item: its embedding is missing or stale.
/// The queue (sql/embedding.sql) is keyed by item table, embedding column and `id::text`.
pub(crate) fn queued(src: &Source, params: &mut Params) -> String {
    queued_in_state(src, params, None)
}

/// [`queued`], restricted to queue entries in `state` (pending, claimed, dead).
pub(crate) fn queued_in_state(src: &Source, params: &mut Params, state: Option<&str>) -> String {
    if src.distributed() {
        // Citus: the entries are on the nodes holding the shards, asked on each shard
        let table = params.push(Param::Text(qualified(&src.item.schema, &src.item.name)));
        let column = params.push(Param::Text(src.embedding.column.clone()));
        let state = match state {
            Some(st) => format!("{}::text", params.push(Param::Text(st.to_string()))),
            None => "NULL::text".to_string(),
        };
        return format!("corpus._item_queued({table}::text, {column}::text, {}::text, {state})", col(&src.id));
    }
    let table = params.push(Param::Int(src.item.oid));
    let column = params.push(Param::Text(src.embedding.column.clone()));
    let state = match state {
        Some(st) => format!(" AND eq.state = {}::text", params.push(Param::Text(st.to_string()))),
        None => String::new(),
    };
    format!(
        "EXISTS (SELECT 1 FROM corpus.embedding_queue AS eq WHERE eq.item_table = {table}::int8::oid \
         AND eq.embedding_column = {column}::name AND eq.item_id = {}::text{state})",
        col(&src.id)
    )
}

/// The semantic subplan: `item_id, parent_id, distance`, nearest first, at most `limit` rows.
/// It reads only the source's own tables (and its parent's): the search drops stale embeddings
/// (queued for re-embedding) from its rows with one [`queued_items`] lookup per round, so that
/// no subplan joins the extension's queue (a local table, which Citus cannot join to
/// distributed ones, and a third relation for the planner of every subplan).
pub fn semantic(
    corpus: &Corpus,
    idx: usize,
    conds: &[Condition],
    query: &[f32],
    limit: i64,
    strategy: Strategy,
) -> Subplan {
    let src = &corpus.sources[idx];
    let mut params = Params::default();
    let v = params.push(Param::Floats(query.to_vec()));
    let lim = params.push(Param::Int(limit));
    let vec = query_vector(corpus, &v);
    let dist = distance_expr(corpus, src, &vec);
    let select = format!(
        "SELECT {}::text AS item_id, {}::text AS parent_id, ({dist})::float8 AS distance",
        col(&src.id),
        col(&src.parent_fk)
    );
    let sql = match strategy {
        // On Citus (a distributed item table) the statement goes to every shard of the slice
        // and the coordinator merges their rows: ORDER BY … LIMIT is pushed down, so each shard
        // returns only its nearest. The item id breaks distance ties, so that every shard and
        // the merge keep the same tied items (a single node's results, ties included).
        Strategy::Approximate if src.distributed() => {
            let fw = from_where(src, conds, true, &[], &mut params);
            format!("{select}\n{fw}\nORDER BY {dist}, {}::text\nLIMIT {lim}", col(&src.id))
        }
        // Exact on Citus: no OFFSET 0 fence (Citus cannot push a fenced subquery down and
        // would pull the whole slice, texts included, to the coordinator); `+ 0` makes the
        // order one the ANN index cannot serve, so no shard answers it approximately.
        _ if src.distributed() => {
            let fw = from_where(src, conds, true, &[], &mut params);
            format!("{select}\n{fw}\nORDER BY ({dist}) + 0, {}::text\nLIMIT {lim}", col(&src.id))
        }
        // ORDER BY the bare operator expression: the shape pgvector's index scan serves.
        Strategy::Approximate => {
            let fw = from_where(src, conds, true, &[], &mut params);
            format!("{select}\n{fw}\nORDER BY {dist}\nLIMIT {lim}")
        }
        // OFFSET 0 fences the slice off, so the ordering cannot be served by the ANN index:
        // the planner reaches the slice through the predicate's B-tree indexes instead. The
        // text condition of the searchable contract is applied outside the fence, to the rows
        // of the slice only: inside it, as a condition of the item table alone, it would be
        // evaluated (detoasting every text) on every row of a table shared with other corpora
        // before the isolation join (a 239-item corpus in a 2,900-row table: 44 ms).
        _ => {
            let fw = from_where_parts(src, conds, true, false, &[], &mut params);
            let text = text_contract(src, "slice.item_text").join(" AND ");
            format!(
                "SELECT item_id, parent_id, distance FROM (\n{select}, {} AS item_text\n{fw}\nOFFSET 0) AS slice\n\
                 WHERE {text}\nORDER BY distance, item_id\nLIMIT {lim}",
                col(&src.text)
            )
        }
    };
    Subplan {
        source: idx,
        branch: Branch::Semantic,
        strategy,
        sql,
        params: params.values,
        limit,
        pruned: false,
        index_first: false,
        generic: false,
    }
}

/// The lexical subplan: `item_id, parent_id, score`, best first. The query's words are ORed
/// (`corpus._or_tsquery`): an AND query finds almost nothing for natural-language questions.
pub fn lexical(corpus: &Corpus, idx: usize, conds: &[Condition], text: &str, limit: i64) -> Subplan {
    let src = &corpus.sources[idx];
    let mut params = Params::default();
    let t = params.push(Param::Text(text.to_string()));
    let lim = params.push(Param::Int(limit));
    let cfg = params.push(Param::Int(src.ts_config));
    let tsv = col(&src.tsv);
    let fw = from_where(src, conds, false, &[format!("{tsv} @@ q.query")], &mut params);
    let fw = fw.replacen(
        "\nWHERE ",
        &format!("\nCROSS JOIN (SELECT corpus._or_tsquery({cfg}::int8::oid::regconfig, {t}) AS query) AS q\nWHERE "),
        1,
    );
    lexical_subplan(src, idx, &format!("ts_rank_cd({tsv}, q.query)::float8"), &fw, &lim, limit, params)
}

/// A lexical subplan's statement around its score expression and FROM/WHERE: best first, item
/// id breaking ties, at most `lim` rows.
fn lexical_subplan(src: &Source, idx: usize, score: &str, fw: &str, lim: &str, limit: i64, params: Params) -> Subplan {
    let sql = format!(
        "SELECT {id}::text AS item_id, {}::text AS parent_id,\n       {score} AS score\n{fw}\nORDER BY score DESC, {id}\nLIMIT {lim}",
        col(&src.parent_fk),
        id = col(&src.id),
    );
    text_match(idx, sql, limit, params)
}

fn text_match(idx: usize, sql: String, limit: i64, params: Params) -> Subplan {
    Subplan {
        source: idx,
        branch: Branch::Lexical,
        strategy: Strategy::TextMatch,
        sql,
        params: params.values,
        limit,
        pruned: false,
        index_first: false,
        generic: false,
    }
}

/// The BM25 lexical subplan: candidates through the tsvector's GIN index (`@@` the candidate
/// plan's tsquery of rare keys) or, for a query of common keys only, the items preselected from
/// their champion lists' heads (looked up by item id), scored by `corpus._bm25_score` with the
/// corpus' statistics.
///
/// Where the corpus predicate is checked depends on `scope`; either way every returned row
/// satisfies all of it (from [`from_where`]), and the text condition of the searchable contract
/// is checked after ranking, in rank order, until the limit is reached: it detoasts the text,
/// the costliest step per candidate (16 of 20 ms over 1,903 candidates:
/// bench/lexical_diagnostics.py), while scoring reads only the tsvector.
#[allow(clippy::too_many_arguments)]
pub fn lexical_bm25(
    corpus: &Corpus,
    idx: usize,
    conds: &[Condition],
    plan: &crate::lexical::CandidatePlan,
    avg_doc_len: f64,
    bm25: crate::bm25::Bm25Params,
    limit: i64,
    scope: ScopeCheck,
) -> Subplan {
    let src = &corpus.sources[idx];
    let mut params = Params::default();
    let keys = params.push(Param::TextArray(plan.scored.iter().map(|k| k.key.clone()).collect()));
    let weights = params.push(Param::Floats(plan.scored.iter().map(|k| k.weight_idf as f32).collect()));
    let avg = params.push(Param::Float(avg_doc_len));
    let k1 = params.push(Param::Float(bm25.k1));
    let b = params.push(Param::Float(bm25.b));
    let lim = params.push(Param::Int(limit));
    let tsv = col(&src.tsv);
    let mut finders = Vec::new();
    if let Some(q) = &plan.tsquery {
        finders.push(format!("{tsv} @@ {}::tsquery", params.push(Param::Text(q.clone()))));
    }
    if !plan.champion_items.is_empty() {
        let ids = params.push(Param::TextArray(plan.champion_items.clone()));
        finders.push(format!("{} = ANY({ids}::text[]::{}[])", col(&src.id), src.id.cast_type));
    }
    if finders.is_empty() {
        // champion lists hold nothing the caller may read (or nothing at all): no candidates
        finders.push("false".to_string());
    }
    let find = if finders.len() == 1 { finders.remove(0) } else { format!("({})", finders.join(" OR ")) };
    let score = format!(
        "corpus._bm25_score({tsv}, {keys}::text[], {weights}::real[]::float8[], {avg}::float8, {k1}::float8, {b}::float8)"
    );
    let id = col(&src.id);
    if src.distributed() {
        // On Citus: one statement Citus pushes down whole, so that each shard scores its own
        // candidates and returns its best `limit` (only ids and scores travel to the
        // coordinator, which merges them); the whole predicate, text condition included, is
        // checked on the shards (a fenced subquery would be pulled to the coordinator).
        let fw = from_where(src, conds, false, &[find], &mut params);
        return lexical_subplan(src, idx, &score, &fw, &lim, limit, params);
    }
    let sql = match scope {
        ScopeCheck::Joined | ScopeCheck::JoinedAfterIndex => {
            let fw = from_where_parts(src, conds, false, false, &[find], &mut params);
            format!(
                "SELECT ranked.item_id, ranked.parent_id, ranked.score FROM (
SELECT {id}::text AS item_id, {}::text AS parent_id,
       {score} AS score, {id} AS sort_id, {} AS doc_text
{fw}
ORDER BY score DESC, {id}
OFFSET 0) AS ranked
WHERE {}
ORDER BY ranked.score DESC, ranked.sort_id
LIMIT {lim}",
                col(&src.parent_fk),
                col(&src.text),
                text_contract(src, "ranked.doc_text").join(" AND "),
            )
        }
        ScopeCheck::AfterRanking => {
            // The whole predicate, looked up by id for each ranked row until the limit is
            // reached; OFFSET 0 keeps the EXISTS a per-row subplan instead of a semi-join
            // that would read every item of the corpus.
            let fw = from_where(src, conds, false, &[format!("{id} = ranked.sort_id")], &mut params);
            format!(
                "SELECT ranked.item_id, ranked.parent_id, ranked.score FROM (
SELECT {id}::text AS item_id, {}::text AS parent_id,
       {score} AS score, {id} AS sort_id
FROM {} AS i
WHERE {find}
ORDER BY score DESC, {id}
OFFSET 0) AS ranked
WHERE EXISTS (SELECT 1
{fw}
OFFSET 0)
ORDER BY ranked.score DESC, ranked.sort_id
LIMIT {lim}",
                col(&src.parent_fk),
                qualified(&src.item.schema, &src.item.name),
            )
        }
    };
    let mut p = text_match(idx, sql, limit, params);
    p.index_first = scope == ScopeCheck::JoinedAfterIndex;
    p
}

/// The BM25 lexical subplan through the source's `corpus_bm25` index: the table's rows holding
/// a query key (`tsv OPERATOR(corpus.|||) scoring`) in ranking order (`ORDER BY tsv
/// OPERATOR(corpus.<@>) scoring`, the distance being minus the score), the whole corpus predicate and the caller's filters checked on each row the index
/// returns, until `limit` rows pass; the rows tied with the last one are fetched too
/// (`WITH TIES`: an index ordered by an operator serves an ORDER BY of that operator alone),
/// so that the item id breaks ties as in every other subplan. On Citus the statement goes to
/// every shard, each ranking through its own index, and the coordinator merges their best.
#[allow(clippy::too_many_arguments)]
pub fn lexical_bm25_index(
    corpus: &Corpus,
    idx: usize,
    conds: &[Condition],
    scored: &[crate::lexical::ScoredKey],
    avg_doc_len: f64,
    bm25: crate::bm25::Bm25Params,
    limit: i64,
    page: i32,
) -> Subplan {
    let src = &corpus.sources[idx];
    let mut params = Params::default();
    let keys = params.push(Param::TextArray(scored.iter().map(|k| k.key.clone()).collect()));
    let weights = params.push(Param::Floats(scored.iter().map(|k| k.weight_idf as f32).collect()));
    let avg = params.push(Param::Float(avg_doc_len));
    let k1 = params.push(Param::Float(bm25.k1));
    let b = params.push(Param::Float(bm25.b));
    let page = params.push(Param::Int(i64::from(page)));
    let lim = params.push(Param::Int(limit));
    let scoring = format!(
        "ROW({keys}::text[], {weights}::real[]::float8[], {avg}::float8, {k1}::float8, {b}::float8, {page}::int4)::corpus.bm25_scoring"
    );
    // (the index serves the ordering only with the condition that the row holds a key; a row
    // holding only keys of weight 0 has distance 0, and the outer condition drops it)
    let holds_a_key = format!("{} OPERATOR(corpus.|||) {scoring}", col(&src.tsv));
    let fw = from_where(src, conds, false, &[holds_a_key], &mut params);
    let sql = format!(
        "SELECT ranked.item_id, ranked.parent_id, -ranked.dist AS score FROM (
SELECT {id}::text AS item_id, {fk}::text AS parent_id, {id} AS sort_id,
       {tsv} OPERATOR(corpus.<@>) {scoring} AS dist
{fw}
ORDER BY dist
FETCH FIRST {lim} ROWS WITH TIES) AS ranked
WHERE ranked.dist < 0
ORDER BY ranked.dist, ranked.sort_id
LIMIT {lim}",
        id = col(&src.id),
        fk = col(&src.parent_fk),
        tsv = col(&src.tsv),
    );
    Subplan {
        source: idx,
        branch: Branch::Lexical,
        strategy: Strategy::Bm25Index,
        sql,
        params: params.values,
        limit,
        pruned: false,
        index_first: false,
        generic: ranking_plan_serves(src),
    }
}

/// Whether one plan serves every value of a ranking through the corpus_bm25 index: sorting is
/// off, so the index's order is the statement's only order, and a join to the parent keeps it
/// only as a nested loop driven by the index scan, whatever the slice's size. A distributed
/// source's plan routes to shards by its values.
pub fn ranking_plan_serves(src: &Source) -> bool {
    !src.distributed()
}

/// The documents of one source the one-pass statistics and champion lists are built from, as
/// [`lexical_stats_sql`] and [`lexical_champions_sql`] read them: (id as text, or NULL without
/// `ids`, BM25 column) of its searchable items.
pub fn lexical_docs_sql(corpus: &Corpus, idx: usize, ids: bool) -> (String, Vec<Param>) {
    let src = &corpus.sources[idx];
    let mut params = Params::default();
    let fw = from_where(src, &[], false, &[], &mut params);
    let id = if ids { format!("{}::text", col(&src.id)) } else { "NULL::text".to_string() };
    (format!("SELECT {id} AS id, {} AS tsv {fw}", col(&src.tsv)), params.values)
}

/// [`lexical_stats_sql`]'s rows counted by the library in one pass over every source's
/// [`lexical_docs_sql`] rows (`corpus._lexical_counts`, `statistics::Counts`).
pub fn lexical_counts_call(corpus: &Corpus) -> (String, Vec<Param>) {
    (
        "SELECT c.term, c.df, c.total_len FROM corpus._lexical_counts($1::text) AS c".to_string(),
        vec![Param::Text(corpus.name.clone())],
    )
}

/// [`lexical_champions_sql`]'s lists built by the library in one pass over
/// [`lexical_docs_sql`]'s rows (`corpus._champion_lists`): the same lists without a
/// sort of every posting.
pub fn lexical_champions_call(
    corpus: &Corpus,
    idx: usize,
    min_df: u64,
    len: u64,
    bm25: crate::bm25::Bm25Params,
) -> (String, Vec<Param>) {
    (
        "SELECT c.term, c.items, c.impacts FROM corpus._champion_lists($1::text, $2::text, $3::int8, $4::int8, \
         $5::float8, $6::float8) AS c"
            .to_string(),
        vec![
            Param::Text(corpus.name.clone()),
            Param::Text(corpus.sources[idx].name.clone()),
            Param::Int(min_df as i64),
            Param::Int(len as i64),
            Param::Float(bm25.k1),
            Param::Float(bm25.b),
        ],
    )
}

/// The champion lists of one source (`term`, `items`, `impacts`): for every key in more than `min_df` of
/// the corpus' documents (by the statistics just written to corpus.lexical_stats), the source's
/// searchable items of highest BM25 term weight `tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl))`,
/// best first (item id breaking ties), at most `len`, with those weights. The weight is the key's whole
/// contribution to a document's score up to its idf, a constant per key.
pub fn lexical_champions_sql(
    corpus: &Corpus,
    idx: usize,
    min_df: u64,
    len: u64,
    bm25: crate::bm25::Bm25Params,
) -> (String, Vec<Param>) {
    let src = &corpus.sources[idx];
    let mut params = Params::default();
    let fw = from_where(src, &[], false, &[], &mut params);
    let c = params.push(Param::Text(corpus.name.clone()));
    let min = params.push(Param::Int(min_df as i64));
    let n = params.push(Param::Int(len as i64));
    let k1 = params.push(Param::Float(bm25.k1));
    let b = params.push(Param::Float(bm25.b));
    let sql = format!(
        "WITH docs AS MATERIALIZED (
SELECT {id}::text AS id, {tsv} AS tsv, corpus._bm25_length({tsv})::float8 AS dl {fw}
),
avg AS (SELECT greatest(t.total_length::float8 / greatest(t.documents, 1), 1) AS dl
          FROM corpus.lexical_totals AS t WHERE t.corpus = {c}::text),
common AS (SELECT s.term FROM corpus.lexical_stats AS s WHERE s.corpus = {c}::text AND s.df > {min}::int8),
weighted AS (
SELECT t.lexeme AS term, d.id,
       coalesce(cardinality(t.positions), 0)::float8 AS tf, d.dl / avg.dl AS rel
  FROM docs AS d CROSS JOIN LATERAL unnest(d.tsv) AS t
  JOIN common ON common.term = t.lexeme
 CROSS JOIN avg
),
ranked AS (
SELECT term, id, w, row_number() OVER (PARTITION BY term ORDER BY w DESC, id) AS rn
  FROM (SELECT term, id,
               tf * ({k1}::float8 + 1) / (tf + {k1}::float8 * (1 - {b}::float8 + {b}::float8 * rel)) AS w
          FROM weighted) AS x
)
SELECT term, array_agg(id ORDER BY rn) AS items, array_agg(w ORDER BY rn) AS impacts
  FROM ranked WHERE rn <= {n}::int8 GROUP BY term",
        id = col(&src.id),
        tsv = col(&src.tsv),
    );
    (sql, params.values)
}

/// Per-corpus lexical statistics over every source's searchable items (the corpus predicate
/// included: statistics never count another corpus' documents): one row per term with its
/// document frequency, and a last row with term NULL carrying the number of documents and
/// the sum of their lengths.
pub fn lexical_stats_sql(corpus: &Corpus) -> (String, Vec<Param>) {
    let mut params = Params::default();
    let docs: Vec<String> = corpus
        .sources
        .iter()
        .map(|src| format!("SELECT {} AS tsv {}", col(&src.tsv), from_where(src, &[], false, &[], &mut params)))
        .collect();
    let sql = format!(
        "WITH docs AS MATERIALIZED (\n{}\n)
SELECT t.lexeme AS term, count(*)::int8 AS df, NULL::int8 AS total_len
  FROM docs CROSS JOIN LATERAL unnest(docs.tsv) AS t
 GROUP BY t.lexeme
UNION ALL
SELECT NULL, count(*)::int8, coalesce(sum(corpus._bm25_length(docs.tsv)), 0)::int8 FROM docs",
        docs.join("\nUNION ALL\n")
    );
    (sql, params.values)
}

/// A query whose planner row estimate is the size of the corpus slice the semantic branch sees
/// (`embedded`: items with an embedding), or every branch of a search without a vector.
///
/// Only the conditions the planner has statistics for enter the estimate: the isolation
/// predicate, the caller's filters and (`embedded`) the embedding's null fraction. The searchable contract's
/// expressions (`char_length(btrim(text)) >= n`, …) have none, and PostgreSQL's default
/// selectivity for them (1/3) made the estimate a third of the real slice (docs/filtered-ann.md).
pub fn slice_estimate(corpus: &Corpus, idx: usize, conds: &[Condition], embedded: bool) -> (String, Vec<Param>) {
    let src = &corpus.sources[idx];
    let mut params = Params::default();
    // The isolation part of scope_parts, bound alone (the rule's values would be unused params),
    // one copy per column: an item table's denormalised copy duplicates the parent's condition,
    // and the planner, multiplying both selectivities, would estimate 5% of a table as 0.25%.
    let item_copy = |c: &BoundCond| {
        c.col.side == crate::model::Side::Parent
            && src.isolation.iter().any(|o| o.col.side == crate::model::Side::Item && o.col.column == c.col.column)
    };
    let mut preds: Vec<String> =
        src.isolation.iter().filter(|c| !item_copy(c)).map(|c| bound(c, &mut params)).collect();
    preds.extend(conds.iter().map(|c| filter_sql(src, c, &mut params)));
    if embedded {
        preds.push(format!("{} IS NOT NULL", col(&src.embedding)));
    }
    let preds = if preds.is_empty() { "true".to_string() } else { preds.join("\n  AND ") };
    (format!("SELECT 1 {}\nWHERE {preds}", from_clause_sampled(src, None)), params.values)
}

/// Whether a source has any searchable item in the corpus slice (with the caller's filters):
/// `SELECT 1 FROM ... WHERE <scope predicate> AND <filters> LIMIT 1` returns a row. Asked when the
/// planner estimates the slice at a row or less, so that an empty corpus (a new tenant, filters
/// that match nothing) runs one cheap query instead of planning its subplans. (A plain `LIMIT 1`
/// rather than `SELECT EXISTS (...)`: the sublink's planning was a quarter of an empty search.)
pub fn slice_probe(corpus: &Corpus, idx: usize, conds: &[Condition]) -> (String, Vec<Param>) {
    let src = &corpus.sources[idx];
    let mut params = Params::default();
    let fw = from_where(src, conds, false, &[], &mut params);
    (format!("SELECT 1\n{fw}\nLIMIT 1"), params.values)
}

/// A source's parents in the corpus: `FROM parent AS p WHERE <the isolation conditions on the
/// parent>`, with its parameters and whether there is such a condition (None without a parent
/// table).
fn parent_slice(corpus: &Corpus, idx: usize) -> Option<(String, Vec<Param>, bool)> {
    let src = &corpus.sources[idx];
    let parent = src.parent.as_ref()?;
    let mut params = Params::default();
    let preds: Vec<String> = src
        .isolation
        .iter()
        .filter(|c| c.col.side == crate::model::Side::Parent)
        .map(|c| bound(c, &mut params))
        .collect();
    let conditioned = !preds.is_empty();
    Some((
        format!("FROM {} AS p\nWHERE {}", qualified(&parent.schema, &parent.name), all(&preds)),
        params.values,
        conditioned,
    ))
}

/// The planner's view of a source's parents in the corpus: `SELECT 1 FROM parent p WHERE <the
/// isolation conditions on the parent>` (None without a parent table). The lexical branch
/// estimates from it what joining the corpus' parents costs.
pub fn parent_slice_estimate(corpus: &Corpus, idx: usize) -> Option<(String, Vec<Param>)> {
    parent_slice(corpus, idx).map(|(from_where, params, _)| (format!("SELECT 1 {from_where}"), params))
}

/// Whether any parent is in the corpus: the parent slice with `LIMIT 1`. Every item of the
/// source's slice needs such a parent (the scope predicate joins it under the same conditions),
/// so none means an empty slice, for every source of the corpus that shares the parent
/// table and its conditions: one probe for all of them. None without a parent-side condition.
pub fn parent_slice_probe(corpus: &Corpus, idx: usize) -> Option<(String, Vec<Param>)> {
    parent_slice(corpus, idx)
        .filter(|(_, _, conditioned)| *conditioned)
        .map(|(from_where, params, _)| (format!("SELECT 1 {from_where}\nLIMIT 1"), params))
}

fn json_object(pairs: &[(String, ColRef)], params: &mut Params) -> String {
    if pairs.is_empty() {
        return "'{}'::jsonb".to_string();
    }
    // jsonb_build_object takes at most 100 arguments; nest when more are declared.
    let parts: Vec<String> = pairs
        .chunks(50)
        .map(|chunk| {
            let args: Vec<String> = chunk
                .iter()
                .map(|(k, c)| format!("{}::text, {}", params.push(Param::Text(k.clone())), col(c)))
                .collect();
            format!("jsonb_build_object({})", args.join(", "))
        })
        .collect();
    parts.join(" || ")
}

/// `id = ANY(ids)`, and on a Citus table distributed by the parent key `parent_fk =
/// ANY(parents)` as well (`parents`: the items' parent ids, or empty when unknown), so that the lookup goes only to the shards holding those parents.
fn by_ids(src: &Source, ids: Vec<String>, parents: Vec<String>, params: &mut Params) -> Vec<String> {
    let p = params.push(Param::TextArray(ids));
    let mut out = vec![format!("{} = ANY({p}::text[]::{}[])", col(&src.id), src.id.cast_type)];
    // (no parents known: every shard is asked)
    if src.routed_by_parent() && !parents.is_empty() {
        let q = params.push(Param::TextArray(parents));
        out.push(format!("{} = ANY({q}::text[]::{}[])", col(&src.parent_fk), src.parent_fk.cast_type));
    }
    out
}

/// Fetch the final rows of one source by item id (and parent id: the Citus routing key),
/// under the same predicate and filters.
pub fn fetch(
    corpus: &Corpus,
    idx: usize,
    conds: &[Condition],
    ids: Vec<String>,
    parents: Vec<String>,
) -> (String, Vec<Param>) {
    let src = &corpus.sources[idx];
    let mut params = Params::default();
    let extra = by_ids(src, ids, parents, &mut params);
    let locator = json_object(&src.locator, &mut params);
    let metadata = json_object(&src.metadata, &mut params);
    let fw = from_where(src, conds, false, &extra, &mut params);
    let sql = format!(
        "SELECT {}::text AS item_id, {}::text AS content, {locator} AS locator, {metadata} AS metadata\n{fw}",
        col(&src.id),
        col(&src.text),
    );
    (sql, params.values)
}

/// One statement of a [`queued_items`] lookup: `source`, `item_id` rows.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueLookup {
    pub sql: String,
    pub params: Vec<Param>,
    /// It reads the item table (a Citus distributed source: run with the caller's rights),
    /// not the extension's queue only (run with the side tables' owner's rights, for ids the
    /// caller's own subplans returned).
    pub through_items: bool,
    /// The (source index, item id) pairs it asks about.
    pub asked: Vec<(usize, String)>,
}

/// Which of these items (id, parent id) of these sources are queued for re-embedding (their
/// embedding is missing or stale): `source` (the index into `corpus.sources`), `item_id`. The
/// queue (sql/embedding.sql) is keyed by item table, embedding column and `id::text`. Items of
/// a node's own tables are looked up in its queue, in one statement. On Citus the queue
/// entries of a distributed table's items are on the nodes holding their shards (the re-embed
/// trigger runs there): those items are looked up through the item table, routed by their
/// parents' keys, with `corpus._item_queued` evaluated on the shards, one statement per source.
pub fn queued_items(corpus: &Corpus, items: &[(usize, Vec<(String, String)>)]) -> Vec<QueueLookup> {
    let (mut sources, mut tables, mut columns, mut ids) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut asked = Vec::new();
    let mut out = Vec::new();
    for (idx, list) in items {
        let src = &corpus.sources[*idx];
        if src.distributed() {
            let mut params = Params::default();
            let (ids, parents): (Vec<String>, Vec<String>) = list.iter().cloned().unzip();
            let mut conds = by_ids(src, ids, parents, &mut params);
            // (a distributed source's queue condition: corpus._item_queued, asked on the shards)
            conds.push(queued(src, &mut params));
            out.push(QueueLookup {
                sql: format!(
                    "SELECT {idx}::int4 AS source, {}::text AS item_id\n  FROM {} AS i\n WHERE {}",
                    col(&src.id),
                    qualified(&src.item.schema, &src.item.name),
                    conds.join("\n   AND ")
                ),
                params: params.values,
                through_items: true,
                asked: list.iter().map(|(id, _)| (*idx, id.clone())).collect(),
            });
            continue;
        }
        for (id, _) in list {
            sources.push(idx.to_string());
            tables.push(src.item.oid.to_string());
            columns.push(src.embedding.column.clone());
            ids.push(id.clone());
            asked.push((*idx, id.clone()));
        }
    }
    if !ids.is_empty() {
        out.insert(
            0,
            QueueLookup {
                sql: "SELECT x.source::int4 AS source, x.item_id
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS x(source, item_table, embedding_column, item_id)
 WHERE EXISTS (SELECT 1 FROM corpus.embedding_queue AS eq
                WHERE eq.item_table = x.item_table::int8::oid
                  AND eq.embedding_column = x.embedding_column::name
                  AND eq.item_id = x.item_id)"
                    .to_string(),
                params: vec![
                    Param::TextArray(sources),
                    Param::TextArray(tables),
                    Param::TextArray(columns),
                    Param::TextArray(ids),
                ],
                through_items: false,
                asked,
            },
        );
    }
    out
}

/// A query counting a Citus distributed source's slice (the corpus predicate, the caller's
/// filters, an embedding), up to `cap` rows: the planner's estimate of a distributed table is
/// a constant of Citus', so the semantic branch chooses its strategy by this count instead.
/// Each shard stops at `cap` rows.
pub fn slice_count(corpus: &Corpus, idx: usize, conds: &[Condition], cap: i64) -> (String, Vec<Param>) {
    let src = &corpus.sources[idx];
    let mut params = Params::default();
    let fw = from_where(src, conds, true, &[], &mut params);
    let cap = params.push(Param::Int(cap));
    (format!("SELECT count(*)::float8 FROM (SELECT 1\n{fw}\nLIMIT {cap}) AS slice"), params.values)
}

/// What feedback learns from the first fusion's best items of one source, under the same
/// predicate and filters: `item_id`, `embedding` (real[], NULL when missing) and `tf` (the
/// item's index terms → positions, from its tsvector).
pub fn feedback_fetch(corpus: &Corpus, idx: usize, conds: &[Condition], ids: Vec<String>) -> (String, Vec<Param>) {
    let src = &corpus.sources[idx];
    let mut params = Params::default();
    let p = params.push(Param::TextArray(ids));
    let extra = [format!("{} = ANY({p}::text[]::{}[])", col(&src.id), src.id.cast_type)];
    let fw = from_where(src, conds, false, &extra, &mut params);
    let sql = format!(
        "SELECT {}::text AS item_id, {}::real[] AS embedding,
       (SELECT jsonb_object_agg(t.lexeme, coalesce(cardinality(t.positions), 0)) FROM unnest({}) AS t) AS tf\n{fw}",
        col(&src.id),
        col(&src.embedding),
        col(&src.tsv),
    );
    (sql, params.values)
}

/// Which of `keys` each of these items' index terms holds (the evidence filter's rare-words
/// rule), under the whole corpus predicate and the search's filters: `item_id`, `keys`
/// (text[]).
pub fn item_keys(
    corpus: &Corpus,
    idx: usize,
    conds: &[Condition],
    ids: Vec<String>,
    keys: Vec<String>,
) -> (String, Vec<Param>) {
    let src = &corpus.sources[idx];
    let mut params = Params::default();
    let p = params.push(Param::TextArray(ids));
    let k = params.push(Param::TextArray(keys));
    let extra = [format!("{} = ANY({p}::text[]::{}[])", col(&src.id), src.id.cast_type)];
    let fw = from_where(src, conds, false, &extra, &mut params);
    let sql = format!(
        "SELECT {}::text AS item_id,
       ARRAY(SELECT t.lexeme FROM unnest({}) AS t WHERE t.lexeme = ANY({k}::text[])) AS keys\n{fw}",
        col(&src.id),
        col(&src.tsv),
    );
    (sql, params.values)
}

/// The forward neighbours of some seeds through edge set `e` (graph expansion): for
/// each seed (an id of the edge set's `from_source`), at most `per_seed` items of its
/// `to_source` that a row of the edge table says it cites, under the whole corpus predicate, the
/// searchable contract and the search's filters, leaving out `exclude` (the search's hits):
/// `seed`, `item_id`, `parent_id`. Only the edge's direction is followed.
pub fn graph_neighbours(
    corpus: &Corpus,
    e: usize,
    conds: &[Condition],
    seeds: Vec<String>,
    exclude: Vec<String>,
    per_seed: i64,
) -> (String, Vec<Param>) {
    let edges = &corpus.edges[e];
    let src = &corpus.sources[edges.to_source];
    let mut params = Params::default();
    let s = params.push(Param::TextArray(seeds));
    let x = params.push(Param::TextArray(exclude));
    let l = params.push(Param::Int(per_seed));
    let extra = [
        format!(
            "{} IN (SELECT g.{} FROM {} AS g WHERE g.{} = s.seed)",
            col(&src.id),
            ident(&edges.to_column),
            crate::sql::qualified(&edges.schema, &edges.table),
            ident(&edges.from_column),
        ),
        format!("NOT ({} = ANY({x}::text[]::{}[]))", col(&src.id), src.id.cast_type),
    ];
    let fw = from_where(src, conds, false, &extra, &mut params);
    let sql = format!(
        "SELECT s.seed::text AS seed, n.item_id, n.parent_id
  FROM unnest({s}::text[]::{}[]) WITH ORDINALITY AS s(seed, ord)
 CROSS JOIN LATERAL (SELECT {}::text AS item_id, {}::text AS parent_id
{fw}
 ORDER BY {} LIMIT {l}) AS n
 ORDER BY s.ord",
        edges.from_type,
        col(&src.id),
        col(&src.parent_fk),
        col(&src.id),
    );
    (sql, params.values)
}

/// The item a find-similar search starts from, looked up under the whole corpus predicate,
/// the searchable contract and the search's filters (so an item outside the caller's scope is
/// no starting point): `item_id` (its stored id as text), `parent_id`, `embedding` (real[],
/// NULL when it has none), `content`. No row means the item is not in the corpus, or not in
/// the filtered scope, whether or not it exists elsewhere.
pub fn similar_seed(corpus: &Corpus, idx: usize, conds: &[Condition], item_id: &str) -> (String, Vec<Param>) {
    let src = &corpus.sources[idx];
    let mut params = Params::default();
    let p = params.push(Param::Text(item_id.to_string()));
    let extra = [format!("{} = {p}::text::{}", col(&src.id), src.id.cast_type)];
    let fw = from_where(src, conds, false, &extra, &mut params);
    let sql = format!(
        "SELECT {}::text AS item_id, {}::text AS parent_id, {}::real[] AS embedding, {}::text AS content\n{fw}\nLIMIT 1",
        col(&src.id),
        col(&src.parent_fk),
        col(&src.embedding),
        col(&src.text),
    );
    (sql, params.values)
}

/// The parts of the corpus predicate an item is probed against, one at a time, to say which
/// keeps it out of a search ([`item_probe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemProbe {
    /// The item exists and is in the corpus (the isolation predicate).
    InCorpus,
    /// ... and satisfies the search's filters.
    Filters,
    /// ... and has its text (at least `min_length` characters).
    Text,
    /// ... and its parent's required metadata.
    Parent,
    /// ... and satisfies the source rule.
    Rule,
    /// ... and has an embedding.
    Embedding,
}

/// `SELECT 1` of item `item_id` of source `idx` when it satisfies the isolation predicate and the
/// part `probe` of the search's predicate (the filters `conds`, or one part of the searchable
/// contract): the same conditions a search writes, from [`scope_parts`].
pub fn item_probe(
    corpus: &Corpus,
    idx: usize,
    conds: &[Condition],
    item_id: &str,
    probe: ItemProbe,
) -> (String, Vec<Param>) {
    let src = &corpus.sources[idx];
    let mut params = Params::default();
    let p = params.push(Param::Text(item_id.to_string()));
    let parts = scope_parts(src, &mut params);
    let mut preds = vec![format!("{} = {p}::text::{}", col(&src.id), src.id.cast_type)];
    preds.extend(parts.isolation);
    match probe {
        ItemProbe::InCorpus => {}
        ItemProbe::Filters => preds.extend(conds.iter().map(|c| filter_sql(src, c, &mut params))),
        ItemProbe::Text => preds.extend(parts.text),
        ItemProbe::Parent => preds.extend(parts.parent_complete),
        ItemProbe::Rule => preds.extend(parts.rule),
        ItemProbe::Embedding => preds.push(format!("{} IS NOT NULL", col(&src.embedding))),
    }
    let sql = format!("SELECT 1 {}\nWHERE {}\nLIMIT 1", from_clause_sampled(src, None), preds.join("\n  AND "));
    (sql, params.values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters;
    use crate::testing::legal;
    use serde_json::json;

    fn all_plans() -> Vec<(String, Vec<Param>)> {
        let c = legal();
        let conds = filters::parse(&c, &json!({"court": "עליון"})).unwrap();
        let mut out = Vec::new();
        for idx in 0..c.sources.len() {
            for s in [Strategy::Exact, Strategy::Approximate] {
                let p = semantic(&c, idx, &conds, &[0.5; 384], 40, s);
                out.push((p.sql, p.params));
            }
            let p = lexical(&c, idx, &conds, "חוזה שכירות", 40);
            out.push((p.sql, p.params));
            for plan in bm25_plans() {
                for scope in [ScopeCheck::Joined, ScopeCheck::JoinedAfterIndex, ScopeCheck::AfterRanking] {
                    let p = lexical_bm25(&c, idx, &conds, &plan, 50.0, crate::bm25::Bm25Params::default(), 40, scope);
                    out.push((p.sql, p.params));
                }
            }
            out.push(slice_estimate(&c, idx, &conds, true));
            out.push(slice_estimate(&c, idx, &conds, false));
            out.push(slice_probe(&c, idx, &conds));
            out.push(feedback_fetch(&c, idx, &conds, vec!["1".into()]));
            out.push(item_keys(&c, idx, &conds, vec!["1".into()], vec!["חוזה".into()]));
            out.push(fetch(&c, idx, &conds, vec!["1".into()], vec!["3".into()]));
        }
        out
    }

    #[test]
    fn a_ranking_through_the_index_is_planned_once_unless_distributed() {
        let scored: Vec<crate::lexical::ScoredKey> = ["חוזה", "שכירות"]
            .iter()
            .map(|k| crate::lexical::ScoredKey { key: k.to_string(), weight_idf: 1.5 })
            .collect();
        let ranking =
            |c: &Corpus| lexical_bm25_index(c, 0, &[], &scored, 50.0, crate::bm25::Bm25Params::default(), 40, 16);
        // a source isolated through its parent: a lookup's join is the planner's to choose
        // per slice, a ranking's is the nested loop under the index's order
        let joined = legal();
        assert!(!one_plan_serves(&joined.sources[0]));
        let p = ranking(&joined);
        assert!(p.sql.contains(" JOIN ") && p.generic, "{}", p.sql);
        // the same source with the isolation column on the item table itself
        let mut def = crate::testing::legal_def();
        let chunks = &mut def["sources"][0];
        for c in ["source_kind", "court"] {
            chunks["item"]["columns"][c] = crate::testing::col("text", "text", "S", -1);
        }
        let o = chunks.as_object_mut().unwrap();
        for k in ["parent", "parent_oid"] {
            o.remove(k);
        }
        o.insert("parent_fk".into(), json!("id"));
        o.insert("parent_key".into(), json!("id"));
        o.insert("parent_required".into(), json!([]));
        o.insert("metadata".into(), json!({"page": "page_number"}));
        o.insert("locator".into(), json!({"page": "page_number"}));
        let alone = crate::definition::resolve(&serde_json::from_value(def).unwrap()).unwrap();
        assert!(one_plan_serves(&alone.sources[0]));
        let p = ranking(&alone);
        assert!(!p.sql.contains(" JOIN ") && p.generic, "{}", p.sql);
        // distributed: the plan routes to shards by its values
        let mut distributed = alone.clone();
        distributed.sources[0].item.distribution = Some("id".to_string());
        assert!(!one_plan_serves(&distributed.sources[0]) && !ranking(&distributed).generic);
    }

    /// A mixed plan (rare keys through the index), an all-common one with champion lists only,
    /// and one with both.
    fn bm25_plans() -> Vec<crate::lexical::CandidatePlan> {
        let keys: Vec<crate::lexical::QueryKey> = ["חוזה", "שכירות", "של"]
            .iter()
            .map(|k| crate::lexical::QueryKey { key: k.to_string(), weight: 1.0 })
            .collect();
        let df = |k: &str| match k {
            "חוזה" => 5,
            "שכירות" => 1500,
            _ => 90_000,
        };
        let plans: Vec<_> = [(2000, 100_000), (4, 100_000)]
            .iter()
            .map(|&(budget, n)| crate::lexical::candidate_plan(&keys, df, n, budget, 10).unwrap())
            .chain(crate::lexical::candidate_plan(&keys[2..], df, 100_000, 2000, 10))
            .collect();
        assert!(plans[0].champions.is_empty() && plans[0].tsquery.is_some());
        assert!(!plans[1].champions.is_empty() && plans[1].tsquery.is_some());
        assert!(!plans[2].champions.is_empty() && plans[2].tsquery.is_none());
        plans
            .into_iter()
            .map(|mut p| {
                if !p.champions.is_empty() {
                    p.champion_items = vec!["1".into(), "2".into()];
                }
                p
            })
            .collect()
    }

    #[test]
    fn champion_lists_are_computed_under_the_corpus_predicate() {
        let c = legal();
        for idx in 0..c.sources.len() {
            let (sql, params) = lexical_champions_sql(&c, idx, 1000, 1000, crate::bm25::Bm25Params::default());
            assert!(sql.contains("p.\"source_kind\" = $") && sql.contains("char_length(btrim("), "{sql}");
            assert!(params.contains(&Param::Text("external_upload".into())));
            assert_placeholders_match(&sql, &params);
        }
    }

    #[test]
    fn champion_candidates_are_looked_up_by_id_under_the_corpus_predicate() {
        let c = legal();
        let mut plan = crate::lexical::candidate_plan(
            &[crate::lexical::QueryKey { key: "של".into(), weight: 1.0 }],
            |_| 90_000,
            100_000,
            2000,
            10,
        )
        .unwrap();
        let scope = crate::lexical::scope_check(&plan, 0.01, 1000, true);
        assert_eq!(scope, ScopeCheck::AfterRanking, "champion items are the corpus' own");
        let p = lexical_bm25(&c, 0, &[], &plan, 50.0, crate::bm25::Bm25Params::default(), 40, scope);
        assert!(p.sql.contains("\nWHERE false\n"), "nothing preselected, no candidates: {}", p.sql);
        plan.champion_items = vec!["7".into(), "9".into()];
        let p = lexical_bm25(&c, 0, &[], &plan, 50.0, crate::bm25::Bm25Params::default(), 40, scope);
        assert!(!p.sql.contains("@@"), "{}", p.sql);
        assert!(p.sql.contains("i.\"id\" = ANY($7::text[]::bigint[])"), "{}", p.sql);
        assert!(p.params.contains(&Param::TextArray(vec!["7".into(), "9".into()])));
        // the whole corpus predicate, for each ranked row, by id
        let exists = &p.sql[p.sql.find("WHERE EXISTS (SELECT 1").expect("checked after ranking")..];
        assert!(exists.contains("p.\"source_kind\" = $"), "the corpus predicate still applies: {}", p.sql);
        assert!(exists.contains("char_length(btrim(i.\"content\"))"), "{}", p.sql);
        assert!(exists.contains("i.\"id\" = ranked.sort_id\nOFFSET 0)"), "{}", p.sql);
    }

    #[test]
    fn an_index_first_subplan_is_the_joined_one_planned_without_nested_loops() {
        let c = legal();
        let plan = &bm25_plans()[0];
        let bm25 = crate::bm25::Bm25Params::default();
        let joined = lexical_bm25(&c, 0, &[], plan, 50.0, bm25, 40, ScopeCheck::Joined);
        let first = lexical_bm25(&c, 0, &[], plan, 50.0, bm25, 40, ScopeCheck::JoinedAfterIndex);
        assert_eq!((joined.sql, joined.params, joined.index_first), (first.sql, first.params, false));
        assert!(first.index_first);
    }

    #[test]
    fn every_query_carries_the_isolation_predicate_as_a_parameter() {
        for (sql, params) in all_plans() {
            assert!(sql.contains("p.\"source_kind\" = $"), "{sql}");
            assert!(params.contains(&Param::Text("external_upload".into())));
            assert!(!sql.contains("external_upload"), "values never inlined: {sql}");
            // the slice estimate keeps only what the planner has statistics for
            if !sql.starts_with("SELECT 1 ") {
                assert!(sql.contains("char_length(btrim("), "{sql}");
                assert!(sql.contains("NULLIF(btrim(p.\"case_number\"::text), '') IS NOT NULL"));
            }
            assert!(sql.contains("p.\"court\" = $"), "caller filter ANDed: {sql}");
        }
    }

    #[test]
    fn halachot_carry_the_review_rule_on_every_path() {
        let c = legal();
        for s in [Strategy::Exact, Strategy::Approximate] {
            let p = semantic(&c, 1, &[], &[0.0; 384], 10, s);
            assert!(p.sql.contains("i.\"review_status\" = $"));
            assert!(p.params.contains(&Param::Text("approved".into())));
        }
        let p = lexical(&c, 1, &[], "x", 10);
        assert!(p.sql.contains("i.\"review_status\" = $"));
    }

    #[test]
    fn placeholders_match_params() {
        for (sql, params) in all_plans() {
            assert_placeholders_match(&sql, &params);
        }
    }

    /// Every parameter is used, and no placeholder beyond them.
    fn assert_placeholders_match(sql: &str, params: &[Param]) {
        for n in 1..=params.len() {
            assert!(sql.contains(&format!("${n}")), "${n} unused in {sql}");
        }
        assert!(!sql.contains(&format!("${}", params.len() + 1)));
    }

    #[test]
    fn approximate_orders_by_the_bare_operator() {
        let c = legal();
        let p = semantic(&c, 0, &[], &[0.0; 384], 10, Strategy::Approximate);
        assert!(!p.sql.contains("embedding_queue"), "no subplan joins the queue");
        assert!(p.sql.contains(
            "ORDER BY i.\"embedding\" OPERATOR(\"public\".<=>) CAST($1::real[] AS \"public\".vector)\nLIMIT $2"
        ));
        let p = semantic(&c, 0, &[], &[0.0; 384], 10, Strategy::Exact);
        assert!(p.sql.contains("OFFSET 0) AS slice"));
        assert!(!p.sql.contains("embedding_queue"));
        let (sql, _) = fetch(&c, 0, &[], vec!["1".into()], vec![]);
        assert!(!sql.contains("embedding_queue"), "nor the final fetch");
    }

    #[test]
    fn the_parent_estimate_carries_the_parent_side_isolation() {
        let c = legal();
        let (sql, params) = parent_slice_estimate(&c, 1).unwrap();
        assert_placeholders_match(&sql, &params);
        assert!(sql.starts_with("SELECT 1 FROM \"public\".\"case_law\" AS p\nWHERE (p.\"source_kind\" = $1"), "{sql}");
        assert_eq!(params, vec![Param::Text("external_upload".into())]);
    }

    #[test]
    fn the_queue_lookup_names_each_items_table_and_column() {
        let c = legal();
        let pair = |i: &str| (i.to_string(), "3".to_string());
        let lookups = queued_items(&c, &[(0, vec![pair("1"), pair("2")]), (1, vec![pair("7")])]);
        assert_eq!(lookups.len(), 1, "one statement over the queue");
        let (sql, params) = (&lookups[0].sql, &lookups[0].params);
        assert!(!lookups[0].through_items);
        assert_placeholders_match(sql, params);
        assert_eq!(params[0], Param::TextArray(vec!["0".into(), "0".into(), "1".into()]));
        assert_eq!(params[1], Param::TextArray(vec!["101".into(), "101".into(), "102".into()]));
        assert_eq!(params[2], Param::TextArray(vec!["embedding".into(); 3]));
        assert_eq!(params[3], Param::TextArray(vec!["1".into(), "2".into(), "7".into()]));
    }

    #[test]
    fn a_distributed_source_routes_its_lookups_by_parent_and_keeps_each_branch_one_pushdown() {
        let mut c = legal();
        for s in &mut c.sources {
            s.item.distribution = Some(s.parent_fk.column.clone());
        }
        let conds = filters::parse(&c, &json!({"court": "עליון"})).unwrap();
        let (sql, params) = fetch(&c, 0, &conds, vec!["1".into(), "2".into()], vec!["7".into()]);
        assert_placeholders_match(&sql, &params);
        assert!(sql.contains("i.\"case_law_id\" = ANY($2::text[]::bigint[])"), "{sql}");
        assert!(sql.contains("p.\"source_kind\" = $"), "the corpus predicate on every path: {sql}");
        let pair = |i: &str, p: &str| (i.to_string(), p.to_string());
        let lookups = queued_items(&c, &[(0, vec![pair("1", "7")]), (1, vec![pair("9", "8")])]);
        assert_eq!(lookups.len(), 2, "one statement per distributed source");
        for l in &lookups {
            assert_placeholders_match(&l.sql, &l.params);
            assert!(l.through_items && l.sql.contains("corpus._item_queued("), "{}", l.sql);
            assert!(!l.sql.contains("corpus.embedding_queue"), "no local table in a distributed statement: {}", l.sql);
        }
        assert!(lookups[0].params.contains(&Param::Text("\"public\".\"precedent_chunks\"".into())));
        for strategy in [Strategy::Exact, Strategy::Approximate] {
            let p = semantic(&c, 1, &conds, &[0.5; 384], 40, strategy);
            assert_placeholders_match(&p.sql, &p.params);
            assert!(!p.sql.contains("OFFSET 0") && p.sql.contains("\"review_status\" = $"), "{}", p.sql);
        }
        let (sql, params) = slice_count(&c, 0, &conds, 1001);
        assert_placeholders_match(&sql, &params);
        assert!(sql.starts_with("SELECT count(*)") && sql.contains("p.\"source_kind\" = $"), "{sql}");
    }
}
