//! Re-embed slots: one per (item table, embedding column), shared by every source that names
//! that column. What registration checks, the statements that put the library's re-embed
//! trigger on a table, and the rule that trigger applies to each written row.
//!
//! An item is stale while it has an entry in `corpus.embedding_queue`. The trigger fires after
//! every INSERT, DELETE, TRUNCATE and UPDATE of the slot's id, embedding or input columns, in
//! the writer's transaction, and changes the queue by [`row_steps`].

use crate::error::{CoreError, Result, SqlState};
use crate::sql::{ident, literal};

/// The name of a slot's row trigger; its TRUNCATE trigger adds [`TRUNCATE_SUFFIX`]. Numbered by
/// the embedding column's attribute number, so two slots of one table never share a name.
pub fn trigger_name(embedding_attnum: i16) -> String {
    format!("pg_corpus_embedding_{embedding_attnum}")
}

pub const TRUNCATE_SUFFIX: &str = "_truncate";

/// The library's trigger function every slot's triggers call, with the slot's registered
/// embedding column as their one argument.
pub const TRIGGER_FUNCTION: &str = "_embedding_trigger";

/// The statements that (re)create a slot's two triggers on `table` (its SQL name): the row
/// trigger fires on changes of `columns` (id, embedding and inputs; duplicates removed), the
/// statement trigger on TRUNCATE. Existing triggers of those names are replaced, so registering
/// again repairs a trigger dropped or disabled by hand.
pub fn trigger_statements(table: &str, trigger: &str, columns: &[&str], registered_embedding: &str) -> Vec<String> {
    let mut cols: Vec<&str> = columns.to_vec();
    cols.sort_unstable();
    cols.dedup();
    let cols = cols.iter().map(|c| ident(c)).collect::<Vec<_>>().join(", ");
    let truncate = format!("{trigger}{TRUNCATE_SUFFIX}");
    let call = format!("corpus.{TRIGGER_FUNCTION}({})", literal(registered_embedding));
    vec![
        format!("DROP TRIGGER IF EXISTS {} ON {table}", ident(trigger)),
        format!("DROP TRIGGER IF EXISTS {} ON {table}", ident(&truncate)),
        format!(
            "CREATE TRIGGER {} AFTER INSERT OR DELETE OR UPDATE OF {cols} ON {table} FOR EACH ROW EXECUTE FUNCTION {call}",
            ident(trigger)
        ),
        format!("CREATE TRIGGER {} AFTER TRUNCATE ON {table} FOR EACH STATEMENT EXECUTE FUNCTION {call}", ident(&truncate)),
    ]
}

/// The statements that remove a slot's triggers from `table`.
pub fn drop_trigger_statements(table: &str, trigger: &str) -> Vec<String> {
    vec![
        format!("DROP TRIGGER IF EXISTS {} ON {table}", ident(trigger)),
        format!("DROP TRIGGER IF EXISTS {} ON {table}", ident(&format!("{trigger}{TRUNCATE_SUFFIX}"))),
    ]
}

/// What a written row is, for its queue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowWrite {
    Insert,
    Update,
    Delete,
}

/// What the trigger compares of a written row (binary, after detoasting: no operator a table
/// owner wrote is called). Fields that do not apply to the write (the old row of an INSERT, the
/// new row of a DELETE) are false.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowFacts {
    pub write: RowWrite,
    pub id_changed: bool,
    pub old_embedding_null: bool,
    pub new_embedding_null: bool,
    pub embedding_changed: bool,
    pub inputs_changed: bool,
}

/// Why an item is queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// no embedding
    Missing,
    /// the text changed after it was embedded
    TextChanged,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::Missing => "missing",
            Reason::TextChanged => "text_changed",
        }
    }
}

/// One change of the queue a written row makes, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueStep {
    /// remove the entry of the row's old id
    ForgetOld,
    /// remove the entry of the row's new id (a new embedding came in)
    ForgetNew,
    /// queue the row's new id (a new version, pending again, when already queued)
    Enqueue(Reason),
}

/// The queue changes of one written row: a deleted item (or the old id of a changed one)
/// leaves the queue; a row without an embedding is queued as `missing` when it is new, lost
/// its embedding or changed its text; a row whose embedding changed is fresh; a row whose text
/// changed under an unchanged embedding is queued as `text_changed`.
pub fn row_steps(f: &RowFacts) -> Vec<QueueStep> {
    let mut steps = Vec::new();
    if f.write == RowWrite::Delete {
        return vec![QueueStep::ForgetOld];
    }
    if f.write == RowWrite::Update && f.id_changed {
        steps.push(QueueStep::ForgetOld);
    }
    if f.new_embedding_null {
        if f.write == RowWrite::Insert || !f.old_embedding_null || f.inputs_changed {
            steps.push(QueueStep::Enqueue(Reason::Missing));
        }
    } else if f.write == RowWrite::Update {
        if f.embedding_changed {
            steps.push(QueueStep::ForgetNew);
        } else if f.inputs_changed {
            steps.push(QueueStep::Enqueue(Reason::TextChanged));
        }
    }
    steps
}

/// A slot registered again by another source must name the same id column and inputs
/// (`registered_*`: the slot's, by their current names).
pub fn check_shared_slot(
    table: &str,
    embedding_column: &str,
    same_columns: bool,
    registered_id: &str,
    registered_inputs: &[String],
    model: Option<&str>,
    registered_model: Option<&str>,
) -> Result<()> {
    if !same_columns {
        return Err(CoreError::new(
            SqlState::InvalidParameterValue,
            format!(
                "embedding column \"{embedding_column}\" of {table} is already registered with id column \"{registered_id}\" and inputs {{{}}}",
                registered_inputs.join(",")
            ),
            "Sources sharing an embedding column must agree on the id column and the text it is computed from.",
        ));
    }
    if let Some(model) = model {
        if registered_model != Some(model) {
            return Err(CoreError::new(
                SqlState::InvalidParameterValue,
                format!(
                    "embedding column \"{embedding_column}\" of {table} holds embeddings of model \"{}\", not \"{model}\"",
                    registered_model.unwrap_or("")
                ),
                "Change the model with CALL corpus.corpus_set_embedding_model(...), which re-embeds every item.",
            ));
        }
    }
    Ok(())
}

/// 42804: the id column's type is not a built-in base type. The trigger and the DBA's queue
/// functions turn ids into text with another role's rights: only casts no table owner wrote.
pub fn id_type_refused(table: &str, id_column: &str, type_name: &str) -> CoreError {
    CoreError::new(
        SqlState::DatatypeMismatch,
        format!("id column \"{id_column}\" of {table} must have a built-in type"),
        "Use an id of a built-in type such as bigint, integer, text or uuid.",
    )
    .with_detail(format!("It is of type {type_name}."))
}

/// 0A000: the items are in a Citus reference table, whose trigger would fire on every node.
pub fn reference_table_refused(table: &str) -> CoreError {
    CoreError::new(
        SqlState::FeatureNotSupported,
        format!("{table} is a Citus reference table: pg_corpus cannot keep its embeddings fresh"),
        "Keep items in a distributed table (create_distributed_table) or in a table of the coordinator.",
    )
    .with_detail("The re-embed trigger would fire on every node's copy of the table.")
}

/// The assignments that make a queue entry pending again under a new version.
const RENEW: &str = "version = nextval('corpus.embedding_queue_version_seq'), reason = EXCLUDED.reason, \
enqueued_at = now(), state = 'pending', claimed_by = NULL, claimed_at = NULL, lease_until = NULL, attempts = 0, \
last_error = NULL";

/// The statement that queues a slot's items of one relation (`relation`: the table or one of
/// its Citus shards, its SQL name): those without an embedding (`missing`), or every item when
/// not `only_missing` (`requested` for those with one); entries already queued are renewed when
/// `renew`, else left as they are. `table_oid` and `registered` name the slot.
pub fn enqueue_statement(
    table_oid: i64,
    registered: &str,
    id: &str,
    embedding: &str,
    relation: &str,
    only_missing: bool,
    renew: bool,
) -> String {
    let (id, embedding) = (ident(id), ident(embedding));
    let filter = if only_missing { format!("t.{embedding} IS NULL") } else { "true".to_string() };
    let conflict = if renew {
        format!("(item_table, embedding_column, item_id) DO UPDATE SET {RENEW}")
    } else {
        "DO NOTHING".to_string()
    };
    format!(
        "INSERT INTO corpus.embedding_queue AS q (item_table, embedding_column, item_id, reason) \
         SELECT {table_oid}::oid, {}, t.{id}::text, CASE WHEN t.{embedding} IS NULL THEN 'missing' ELSE 'requested' END \
         FROM {relation} t WHERE {filter} ON CONFLICT {conflict}",
        literal(registered)
    )
}

/// The statement of one batch of a model change over `relation`: the next `$2` ids after `$1`
/// (text, NULL to begin) in the id's own order (`id_type`, its SQL type: an index range scan)
/// queued as `model_changed`, renewed when queued already; answers the batch's size and last id.
pub fn model_batch_statement(table_oid: i64, registered: &str, id: &str, id_type: &str, relation: &str) -> String {
    let id = ident(id);
    format!(
        "WITH batch AS (SELECT t.{id} AS id FROM {relation} t WHERE $1::text IS NULL OR t.{id} > $1::text::{id_type} \
                         ORDER BY t.{id} LIMIT $2), \
              q AS (INSERT INTO corpus.embedding_queue AS q (item_table, embedding_column, item_id, reason) \
                    SELECT {table_oid}::oid, {}, id::text, 'model_changed' FROM batch \
                    ON CONFLICT (item_table, embedding_column, item_id) DO UPDATE SET {RENEW}) \
         SELECT count(*)::int8, max(id)::text FROM batch",
        literal(registered)
    )
}

/// Where a model change on one node stands between its batches: the index (from 1) among the
/// node's relations of the table and the last id queued there.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelStep {
    pub relation: usize,
    pub after: Option<String>,
}

impl ModelStep {
    /// From the state a previous step answered (`{}` to begin).
    pub fn parse(state: &serde_json::Value) -> ModelStep {
        ModelStep {
            relation: state.get("relation").and_then(serde_json::Value::as_u64).map_or(1, |n| n.max(1) as usize),
            after: state.get("after").and_then(serde_json::Value::as_str).map(str::to_string),
        }
    }

    /// The answer after a batch of `n` items ending at `last`.
    pub fn batch(relation: usize, last: Option<&str>, n: i64) -> serde_json::Value {
        serde_json::json!({"relation": relation, "after": last, "n": n})
    }

    /// The answer once every relation of the node is done.
    pub fn done() -> serde_json::Value {
        serde_json::json!({"done": true})
    }
}

/// 42704: no slot of that table has that embedding column.
/// 42710: a new embedding column that already has a slot (it is searched, or already being built).
pub fn already_registered(table: &str, column: &str) -> CoreError {
    CoreError::new(
        SqlState::DuplicateObject,
        format!("embedding column \"{column}\" of {table} is already registered"),
        "Build into a new, empty vector column: ALTER TABLE ... ADD COLUMN ... vector(n); see corpus.embedding_slots.",
    )
}

/// 55000: a column sources rank by is no build to cancel.
pub fn not_a_build(table: &str, column: &str) -> CoreError {
    CoreError::new(
        SqlState::ObjectNotInPrerequisiteState,
        format!("searches rank by \"{column}\" of {table}: it is no build to cancel"),
        "Drop or alter the sources that use it (corpus.corpus_drop_source, corpus_alter_source) instead.",
    )
}

/// 55000: a switch to embeddings that are not all built yet.
pub fn build_incomplete(table: &str, column: &str, waiting: i64) -> CoreError {
    CoreError::new(
        SqlState::ObjectNotInPrerequisiteState,
        format!("the embeddings of \"{column}\" of {table} are not built yet: {waiting} items wait"),
        "Keep the re-embed worker running until corpus.corpus_health_check() says the build is complete, or pass \
         force => true to switch now (the items still waiting are then ranked without embeddings until stored).",
    )
    .with_kind("build_incomplete", None)
}

/// The automatic switch of a finished build failed (it is tried again by the worker's next call).
pub fn auto_switch_failed(table: &str, built: &str, from: &str, cause: &str) -> CoreError {
    CoreError::new(
        SqlState::ObjectNotInPrerequisiteState,
        format!("the embeddings of \"{built}\" of {table} are built, but switching searches to them failed: {cause}"),
        format!(
            "The re-embed worker tries again on its next call. Run SELECT corpus.corpus_embedding_switch({}, {}, {}) \
             to see the error, or corpus_embedding_build_cancel to abandon the build.",
            crate::sql::literal(table),
            crate::sql::literal(from),
            crate::sql::literal(built)
        ),
    )
}

pub fn no_slot(table: &str, embedding_column: &str) -> CoreError {
    CoreError::new(
        SqlState::UndefinedObject,
        format!("no registered embedding column \"{embedding_column}\" on {table}"),
        "See corpus.embedding_slots for the columns pg_corpus keeps fresh.",
    )
}

/// 42804: a DBA's queue function reads a slot's ids with its caller's rights, never from a
/// column of another type put in place of its id or embedding column.
pub fn columns_unusable(table: &str, embedding_column: &str, registered_id: &str) -> CoreError {
    CoreError::new(
        SqlState::DatatypeMismatch,
        format!(
            "{table} has no id column of a built-in type and pgvector embedding column for embedding column {}",
            ident(embedding_column)
        ),
        "Restore the columns' types, or drop the source and register it again.",
    )
    .with_detail(format!(
        "It was registered with id column {}; a column of another type is never read in their place.",
        ident(registered_id)
    ))
}

/// 22023: a model change names no model.
pub fn check_model(model: Option<&str>) -> Result<&str> {
    match model {
        Some(m) if !m.trim().is_empty() => Ok(m),
        _ => Err(CoreError::new(
            SqlState::InvalidParameterValue,
            "model must be a non-empty name",
            "Name the model the way workers report it, e.g. 'multilingual-e5-small'.",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(write: RowWrite) -> RowFacts {
        RowFacts {
            write,
            id_changed: false,
            old_embedding_null: false,
            new_embedding_null: false,
            embedding_changed: false,
            inputs_changed: false,
        }
    }

    #[test]
    fn a_new_row_is_queued_only_without_an_embedding() {
        let with = facts(RowWrite::Insert);
        assert_eq!(row_steps(&with), vec![]);
        let without = RowFacts { new_embedding_null: true, ..with };
        assert_eq!(row_steps(&without), vec![QueueStep::Enqueue(Reason::Missing)]);
    }

    #[test]
    fn a_deleted_row_leaves_the_queue_whatever_it_held() {
        for null in [false, true] {
            let f = RowFacts { old_embedding_null: null, ..facts(RowWrite::Delete) };
            assert_eq!(row_steps(&f), vec![QueueStep::ForgetOld]);
        }
    }

    #[test]
    fn a_text_change_under_an_old_embedding_is_queued_and_a_new_embedding_makes_it_fresh() {
        let text = RowFacts { inputs_changed: true, ..facts(RowWrite::Update) };
        assert_eq!(row_steps(&text), vec![QueueStep::Enqueue(Reason::TextChanged)]);
        // text and embedding in one statement: the worker's result or the writer's own
        let both = RowFacts { embedding_changed: true, ..text };
        assert_eq!(row_steps(&both), vec![QueueStep::ForgetNew]);
        let other = facts(RowWrite::Update);
        assert_eq!(row_steps(&other), vec![]);
    }

    #[test]
    fn a_cleared_embedding_is_missing_and_a_row_still_without_one_is_queued_only_on_change() {
        let cleared = RowFacts { new_embedding_null: true, embedding_changed: true, ..facts(RowWrite::Update) };
        assert_eq!(row_steps(&cleared), vec![QueueStep::Enqueue(Reason::Missing)]);
        let still = RowFacts { old_embedding_null: true, new_embedding_null: true, ..facts(RowWrite::Update) };
        assert_eq!(row_steps(&still), vec![]);
        let still_changed = RowFacts { inputs_changed: true, ..still };
        assert_eq!(row_steps(&still_changed), vec![QueueStep::Enqueue(Reason::Missing)]);
    }

    #[test]
    fn a_changed_id_forgets_the_old_entry_first() {
        let moved = RowFacts { id_changed: true, inputs_changed: true, ..facts(RowWrite::Update) };
        assert_eq!(row_steps(&moved), vec![QueueStep::ForgetOld, QueueStep::Enqueue(Reason::TextChanged)]);
        let moved_fresh = RowFacts { id_changed: true, ..facts(RowWrite::Update) };
        assert_eq!(row_steps(&moved_fresh), vec![QueueStep::ForgetOld]);
    }

    #[test]
    fn triggers_are_replaced_and_name_every_column_once_quoted() {
        let s =
            trigger_statements("\"public\".\"t\"", "pg_corpus_embedding_5", &["body", "id", "Emb\"x", "body"], "Emb'x");
        assert_eq!(s[0], "DROP TRIGGER IF EXISTS \"pg_corpus_embedding_5\" ON \"public\".\"t\"");
        assert_eq!(s[1], "DROP TRIGGER IF EXISTS \"pg_corpus_embedding_5_truncate\" ON \"public\".\"t\"");
        assert_eq!(
            s[2],
            "CREATE TRIGGER \"pg_corpus_embedding_5\" AFTER INSERT OR DELETE OR UPDATE OF \"Emb\"\"x\", \"body\", \"id\" ON \"public\".\"t\" FOR EACH ROW EXECUTE FUNCTION corpus._embedding_trigger('Emb''x')"
        );
        assert!(s[3].starts_with("CREATE TRIGGER \"pg_corpus_embedding_5_truncate\" AFTER TRUNCATE ON"), "{}", s[3]);
        assert_eq!(
            drop_trigger_statements("t", "g"),
            vec!["DROP TRIGGER IF EXISTS \"g\" ON t", "DROP TRIGGER IF EXISTS \"g_truncate\" ON t"]
        );
        assert_eq!(trigger_name(7), "pg_corpus_embedding_7");
    }

    #[test]
    fn a_shared_slot_must_agree_on_columns_and_model() {
        assert!(check_shared_slot("t", "e", true, "id", &[], None, Some("m")).is_ok());
        assert!(check_shared_slot("t", "e", true, "id", &[], Some("m"), Some("m")).is_ok());
        let e = check_shared_slot("t", "e", false, "id", &["a".into(), "b".into()], None, None).unwrap_err();
        assert_eq!(e.state, SqlState::InvalidParameterValue);
        assert_eq!(
            e.message,
            "embedding column \"e\" of t is already registered with id column \"id\" and inputs {a,b}"
        );
        let e = check_shared_slot("t", "e", true, "id", &[], Some("new"), Some("old")).unwrap_err();
        assert!(e.message.ends_with("holds embeddings of model \"old\", not \"new\""), "{}", e.message);
        assert!(e.hint.contains("corpus_set_embedding_model"));
    }

    #[test]
    fn refusals_carry_their_sqlstate_and_detail() {
        let e = id_type_refused("t", "id", "kind");
        assert_eq!((e.state, e.detail.as_deref()), (SqlState::DatatypeMismatch, Some("It is of type kind.")));
        let e = reference_table_refused("t");
        assert_eq!(e.state, SqlState::FeatureNotSupported);
        assert!(e.detail.is_some_and(|d| d.contains("every node")));
    }

    #[test]
    fn enqueue_statements_quote_columns_and_choose_rows_and_conflicts() {
        let s = enqueue_statement(42, "Em'b", "Id\"x", "emb", "\"public\".\"t_102\"", true, false);
        assert!(s.contains("SELECT 42::oid, 'Em''b', t.\"Id\"\"x\"::text"), "{s}");
        assert!(s.contains("FROM \"public\".\"t_102\" t WHERE t.\"emb\" IS NULL ON CONFLICT DO NOTHING"), "{s}");
        let s = enqueue_statement(42, "e", "id", "emb", "t", false, true);
        assert!(
            s.contains(
                "WHERE true ON CONFLICT (item_table, embedding_column, item_id) DO UPDATE SET version = nextval"
            ),
            "{s}"
        );
        assert!(s.contains("state = 'pending'") && s.contains("attempts = 0"), "{s}");
    }

    #[test]
    fn a_model_batch_pages_by_the_ids_own_type() {
        let s = model_batch_statement(7, "emb", "Id", "character varying(20)", "t");
        assert!(s.contains("t.\"Id\" > $1::text::character varying(20)"), "{s}");
        assert!(s.contains("ORDER BY t.\"Id\" LIMIT $2"), "{s}");
        assert!(s.contains("SELECT 7::oid, 'emb', id::text, 'model_changed' FROM batch"), "{s}");
    }

    #[test]
    fn a_model_step_resumes_where_the_last_batch_ended() {
        assert_eq!(ModelStep::parse(&serde_json::json!({})), ModelStep { relation: 1, after: None });
        let answer = ModelStep::batch(2, Some("17"), 5);
        assert_eq!(ModelStep::parse(&answer), ModelStep { relation: 2, after: Some("17".into()) });
        assert_eq!(answer["n"], 5);
        assert_eq!(ModelStep::done(), serde_json::json!({"done": true}));
    }

    #[test]
    fn a_model_change_names_a_model() {
        assert_eq!(check_model(Some("e5")), Ok("e5"));
        for bad in [None, Some(""), Some("  ")] {
            assert_eq!(check_model(bad).unwrap_err().state, SqlState::InvalidParameterValue);
        }
        let e = columns_unusable("t", "Emb", "id");
        assert_eq!(e.state, SqlState::DatatypeMismatch);
        assert!(e.message.ends_with("embedding column \"Emb\""), "{}", e.message);
        assert_eq!(no_slot("t", "e").message, "no registered embedding column \"e\" on t");
    }
}
