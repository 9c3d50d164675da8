//! The re-embed queue's statements for the worker API (src/queue.rs), with the caller's rights:
//! a worker role holds SELECT, UPDATE and DELETE on `corpus.embedding_queue`. On a Citus
//! coordinator, an item of a distributed table is queued on the node holding its shard; the
//! statements that miss it here ask the other nodes (`corpus._citus_fan_out`, SQL glue).

use pg_corpus_core::CoreError;
use pgrx::datum::DatumWithOid;

use super::write;

/// The first column of the first row (None: no row, or NULL).
fn one_text(sql: &str, args: &[DatumWithOid<'_>]) -> Result<Option<String>, CoreError> {
    write(sql, args, |t| if t.is_empty() { Ok(None) } else { t.first().get_one::<String>() })
}

fn one_i64(sql: &str, args: &[DatumWithOid<'_>]) -> Result<Option<i64>, CoreError> {
    write(sql, args, |t| if t.is_empty() { Ok(None) } else { t.first().get_one::<i64>() })
}

/// One queue row a claim took.
pub struct Claimed {
    pub item_table: i64,
    pub embedding_column: String,
    pub item_id: String,
    pub version: i64,
    pub reason: Option<String>,
    pub attempts: Option<i32>,
}

/// Claim up to `batch_size` of this node's queue rows (oldest first; pending, or claimed with
/// an expired lease) for `lease`.
pub fn claim_rows(
    batch_size: i32,
    lease: pgrx::datum::Interval,
    worker: Option<&str>,
    only_table: Option<i64>,
) -> Result<Vec<Claimed>, CoreError> {
    write(
        "WITH picked AS (
             SELECT q.item_table, q.embedding_column, q.item_id
               FROM corpus.embedding_queue q
              WHERE (q.state = 'pending' OR (q.state = 'claimed' AND q.lease_until < clock_timestamp()))
                AND ($4::oid IS NULL OR q.item_table = $4::oid)
              ORDER BY q.enqueued_at, q.item_id
              LIMIT $1
                FOR UPDATE SKIP LOCKED)
         UPDATE corpus.embedding_queue q
            SET state = 'claimed', claimed_by = COALESCE($3, session_user::text || '@' || pg_backend_pid()),
                claimed_at = clock_timestamp(), lease_until = clock_timestamp() + $2::interval,
                attempts = q.attempts + 1
           FROM picked
          WHERE (q.item_table, q.embedding_column, q.item_id) = (picked.item_table, picked.embedding_column, picked.item_id)
         RETURNING q.item_table::oid::int8, q.embedding_column::text, q.item_id, q.version, q.reason, q.attempts",
        &[
            DatumWithOid::from(batch_size),
            DatumWithOid::from(lease),
            DatumWithOid::from(worker),
            DatumWithOid::from(only_table),
        ],
        |t| {
            let mut out = Vec::new();
            for row in t {
                let (Some(item_table), Some(embedding_column), Some(item_id), Some(version)) =
                    (row.get::<i64>(1)?, row.get::<String>(2)?, row.get::<String>(3)?, row.get::<i64>(4)?)
                else {
                    continue;
                };
                out.push(Claimed {
                    item_table,
                    embedding_column,
                    item_id,
                    version,
                    reason: row.get::<String>(5)?,
                    attempts: row.get::<i32>(6)?,
                });
            }
            Ok(out)
        },
    )
}

/// What the worker needs of a slot: its model and dimension, the attribute numbers of its id
/// and input columns, and whether one of those columns was dropped.
pub struct SlotColumns {
    pub model: Option<String>,
    pub dimensions: Option<i32>,
    pub id_attnum: i16,
    pub embedding_attnum: i16,
    pub input_attnums: Vec<i16>,
    pub dropped: bool,
}

/// The columns of the slot of (item table, embedding column) by its registered name.
pub fn slot_columns(item_table: i64, embedding_column: &str) -> Result<Option<SlotColumns>, CoreError> {
    write(
        "SELECT s.model, s.dimensions, c.id_attnum, c.embedding_attnum, c.input_attnums,
                corpus._slot_column(s.item_table, c.id_attnum) IS NULL
                OR EXISTS (SELECT 1 FROM unnest(c.input_attnums) a WHERE corpus._slot_column(s.item_table, a) IS NULL)
           FROM corpus.embedding_slots s, LATERAL corpus._slot_attnums(s) c
          WHERE s.item_table = $1::oid AND s.embedding_column = $2::name",
        &[DatumWithOid::from(item_table), DatumWithOid::from(embedding_column)],
        |t| {
            let Some(row) = t.into_iter().next() else { return Ok(None) };
            Ok(Some(SlotColumns {
                model: row.get::<String>(1)?,
                dimensions: row.get::<i32>(2)?,
                id_attnum: row.get::<i16>(3)?.unwrap_or(0),
                embedding_attnum: row.get::<i16>(4)?.unwrap_or(0),
                input_attnums: row.get::<Vec<Option<i16>>>(5)?.unwrap_or_default().into_iter().flatten().collect(),
                dropped: row.get::<bool>(6)?.unwrap_or(true),
            }))
        },
    )
}

/// A queue row becomes a dead letter: a column its embedding is computed from was dropped.
pub fn mark_dropped(item_table: i64, embedding_column: &str, item_id: &str) -> Result<(), CoreError> {
    write(
        "UPDATE corpus.embedding_queue q
            SET state = 'dead', claimed_by = NULL, claimed_at = NULL, lease_until = NULL,
                last_error = 'a column the embedding is computed from was dropped'
          WHERE (q.item_table, q.embedding_column, q.item_id) = ($1::oid, $2::name, $3)",
        &[DatumWithOid::from(item_table), DatumWithOid::from(embedding_column), DatumWithOid::from(item_id)],
        |_| Ok(()),
    )
}

/// Remove an item's queue row.
pub fn dequeue(item_table: i64, embedding_column: &str, item_id: &str) -> Result<(), CoreError> {
    write(
        "DELETE FROM corpus.embedding_queue q
          WHERE (q.item_table, q.embedding_column, q.item_id) = ($1::oid, $2::name, $3)",
        &[DatumWithOid::from(item_table), DatumWithOid::from(embedding_column), DatumWithOid::from(item_id)],
        |_| Ok(()),
    )
}

/// The version of an item's queue row, locked for the completion (None: not queued here).
pub fn lock_queued(item_table: i64, embedding_column: &str, item_id: &str) -> Result<Option<i64>, CoreError> {
    one_i64(
        "SELECT e.version FROM corpus.embedding_queue e
          WHERE e.item_table = $1::oid AND e.embedding_column = $2::name AND e.item_id = $3
            FOR UPDATE",
        &[DatumWithOid::from(item_table), DatumWithOid::from(embedding_column), DatumWithOid::from(item_id)],
    )
}

/// The answers of the other Citus nodes to a worker API statement about a distributed table's
/// item (none for any other table or node), built with `format` from `template` and the
/// arguments.
fn fan_out(
    item_table: i64,
    template: &str,
    args: Vec<DatumWithOid<'_>>,
    accept: &str,
) -> Result<Option<String>, CoreError> {
    let n = args.len();
    let placeholders: Vec<String> = (2..n + 2).map(|i| format!("${i}")).collect();
    let sql = format!(
        "SELECT a FROM corpus._citus_fan_out($1::oid::regclass, format({}, {})) a WHERE {accept} LIMIT 1",
        pg_corpus_core::sql::literal(template),
        placeholders.join(", ")
    );
    let mut all = vec![DatumWithOid::from(item_table)];
    all.extend(args);
    one_text(&sql, &all)
}

/// A completion for an item queued on another Citus node (its answer other than `not_queued`).
pub fn complete_elsewhere(
    item_table: i64,
    embedding_column: &str,
    item_id: Option<&str>,
    version: Option<i64>,
    embedding: DatumWithOid<'_>,
    model: Option<&str>,
) -> Result<Option<String>, CoreError> {
    fan_out(
        item_table,
        "SELECT corpus.corpus_embedding_complete(%L::regclass, %L, %L, %L::bigint, %L, %L)",
        vec![
            DatumWithOid::from(regclass_text(item_table)?),
            DatumWithOid::from(embedding_column),
            DatumWithOid::from(item_id),
            DatumWithOid::from(version),
            embedding,
            DatumWithOid::from(model),
        ],
        "a <> 'not_queued'",
    )
}

/// A table's name as text (qualified unless on the pinned search_path).
pub fn regclass_text(item_table: i64) -> Result<String, CoreError> {
    Ok(one_text("SELECT $1::oid::regclass::text", &[DatumWithOid::from(item_table)])?.unwrap_or_default())
}

/// Count a failed attempt of the queued version: pending again, or dead after `max_attempts`;
/// the new state (None: that version is not queued here).
pub fn fail(
    item_table: i64,
    embedding_column: &str,
    item_id: Option<&str>,
    version: Option<i64>,
    error: Option<&str>,
    max_attempts: Option<i32>,
) -> Result<Option<String>, CoreError> {
    let state = one_text(
        "UPDATE corpus.embedding_queue e
            SET state = CASE WHEN e.attempts >= $6 THEN 'dead' ELSE 'pending' END,
                claimed_by = NULL, claimed_at = NULL, lease_until = NULL, last_error = $5
          WHERE e.item_table = $1::oid AND e.embedding_column = $2::name AND e.item_id = $3 AND e.version = $4
         RETURNING e.state",
        &[
            DatumWithOid::from(item_table),
            DatumWithOid::from(embedding_column),
            DatumWithOid::from(item_id),
            DatumWithOid::from(version),
            DatumWithOid::from(error),
            DatumWithOid::from(max_attempts),
        ],
    )?;
    if state.is_some() {
        return Ok(state);
    }
    fan_out(
        item_table,
        "SELECT corpus.corpus_embedding_fail(%L::regclass, %L, %L, %L::bigint, %L, %L::integer)",
        vec![
            DatumWithOid::from(regclass_text(item_table)?),
            DatumWithOid::from(embedding_column),
            DatumWithOid::from(item_id),
            DatumWithOid::from(version),
            DatumWithOid::from(error),
            DatumWithOid::from(max_attempts),
        ],
        "a <> 'not_queued'",
    )
}

/// Give a claimed version back, its attempt not counted; whether it was released (here or on
/// another Citus node).
pub fn release(
    item_table: i64,
    embedding_column: &str,
    item_id: Option<&str>,
    version: Option<i64>,
    worker: Option<&str>,
) -> Result<bool, CoreError> {
    let args = [
        DatumWithOid::from(item_table),
        DatumWithOid::from(embedding_column),
        DatumWithOid::from(item_id),
        DatumWithOid::from(version),
        DatumWithOid::from(worker),
    ];
    let here = write(
        "UPDATE corpus.embedding_queue e
            SET state = 'pending', claimed_by = NULL, claimed_at = NULL, lease_until = NULL,
                attempts = greatest(e.attempts - 1, 0)
          WHERE e.item_table = $1::oid AND e.embedding_column = $2::name AND e.item_id = $3 AND e.version = $4
            AND e.state = 'claimed' AND ($5::text IS NULL OR e.claimed_by = $5)",
        &args,
        |t| Ok(!t.is_empty()),
    )?;
    let released = here
        || fan_out(
            item_table,
            "SELECT corpus.corpus_embedding_release(%L::regclass, %L, %L, %L::bigint, %L)",
            vec![
                DatumWithOid::from(regclass_text(item_table)?),
                DatumWithOid::from(embedding_column),
                DatumWithOid::from(item_id),
                DatumWithOid::from(version),
                DatumWithOid::from(worker),
            ],
            "a = 'released'",
        )?
        .is_some();
    if released {
        notify(item_table)?;
    }
    Ok(released)
}

/// Wake the workers listening for work on a table.
pub fn notify(item_table: i64) -> Result<(), CoreError> {
    write("SELECT pg_notify('pg_corpus_embedding', $1::oid::regclass::text)", &[DatumWithOid::from(item_table)], |_| {
        Ok(())
    })
}

/// Dead letters of one table (or all) pending again, the workers woken per table; how many,
/// with the other Citus nodes' on a coordinator.
pub fn retry_dead(only_table: Option<i64>) -> Result<i64, CoreError> {
    let here = one_i64(
        "WITH retried AS (
             UPDATE corpus.embedding_queue q SET state = 'pending', attempts = 0, enqueued_at = now()
              WHERE q.state = 'dead' AND ($1::oid IS NULL OR q.item_table = $1::oid)
             RETURNING q.item_table),
              per_table AS (SELECT r.item_table, count(*) AS n FROM retried r GROUP BY r.item_table),
              woken AS (SELECT pg_notify('pg_corpus_embedding', p.item_table::text), p.n FROM per_table p)
         SELECT coalesce(sum(w.n), 0)::int8 FROM woken w",
        &[DatumWithOid::from(only_table)],
    )?
    .unwrap_or(0);
    let elsewhere = one_i64(
        "SELECT CASE WHEN corpus._citus_coordinator()
                      AND ($1::oid IS NULL OR corpus._citus_table_kind($1::oid::regclass) = 'distributed')
                     THEN coalesce((SELECT sum(a::bigint) FROM corpus._citus_on_other_nodes(
                              format('SELECT corpus.corpus_embedding_retry_dead(%L::regclass)',
                                     $1::oid::regclass::text)) a), 0)
                     ELSE 0 END::int8",
        &[DatumWithOid::from(only_table)],
    )?
    .unwrap_or(0);
    if elsewhere > 0 {
        write(
            "SELECT pg_notify('pg_corpus_embedding', coalesce($1::oid::regclass::text, ''))",
            &[DatumWithOid::from(only_table)],
            |_| Ok(()),
        )?;
    }
    Ok(here + elsewhere)
}

/// Queue every item of a slot (only_missing: those without an embedding): first on the other
/// Citus nodes (each in its own transaction), then here holding the queue; how many.
pub fn enqueue(item_table: i64, embedding_column: &str, only_missing: bool) -> Result<i64, CoreError> {
    let slot = super::slots::slot_named(item_table, embedding_column)?;
    let remote = one_i64(
        "SELECT coalesce((SELECT sum(a::bigint) FROM corpus._citus_fan_out($1::oid::regclass,
                    format('SELECT corpus.corpus_embedding_enqueue(%L::regclass, %L, %L)',
                           $1::oid::regclass::text, $2, $3)) a), 0)::int8",
        &[
            DatumWithOid::from(item_table),
            DatumWithOid::from(slot.registered.as_str()),
            DatumWithOid::from(only_missing),
        ],
    )?
    .unwrap_or(0);
    slot.columns()?;
    super::slots::lock_queue(&super::slots::local_relations(item_table)?)?;
    let n = super::slots::enqueue_local(&slot, only_missing, true)?;
    if remote > 0 {
        notify(item_table)?;
    }
    Ok(n + remote)
}

/// One claimed item of another Citus node, as its claim answered.
pub struct ClaimedElsewhere {
    pub item_table: i64,
    pub embedding_column: String,
    pub item_id: Option<String>,
    pub version: Option<i64>,
    pub content: Option<String>,
    pub model: Option<String>,
    pub dimensions: Option<i32>,
    pub reason: Option<String>,
    pub attempts: Option<i32>,
}

/// On a Citus coordinator, claims on the other nodes until `wanted` items are claimed
/// (`corpus._citus_claim`, SQL glue).
pub fn claim_elsewhere(
    wanted: i32,
    lease: pgrx::datum::Interval,
    worker: Option<&str>,
    only_table: Option<i64>,
) -> Result<Vec<ClaimedElsewhere>, CoreError> {
    write(
        "SELECT c.item_table::oid::int8, c.embedding_column::text, c.item_id, c.version, c.content, c.model,
                c.dimensions, c.reason, c.attempts
           FROM corpus._citus_claim($1, $2::interval, $3, $4::oid::regclass) c",
        &[
            DatumWithOid::from(wanted),
            DatumWithOid::from(lease),
            DatumWithOid::from(worker),
            DatumWithOid::from(only_table),
        ],
        |t| {
            let mut out = Vec::new();
            for row in t {
                let (Some(item_table), Some(embedding_column)) = (row.get::<i64>(1)?, row.get::<String>(2)?) else {
                    continue;
                };
                out.push(ClaimedElsewhere {
                    item_table,
                    embedding_column,
                    item_id: row.get::<String>(3)?,
                    version: row.get::<i64>(4)?,
                    content: row.get::<String>(5)?,
                    model: row.get::<String>(6)?,
                    dimensions: row.get::<i32>(7)?,
                    reason: row.get::<String>(8)?,
                    attempts: row.get::<i32>(9)?,
                })
            }
            Ok(out)
        },
    )
}
