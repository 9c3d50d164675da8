//! Re-embed slots: registering and releasing them (with the caller's rights: the registering
//! role creates the triggers on its table) and the re-embed trigger's statements (with the
//! trigger function's owner's rights, through saved plans: the trigger fires once per row).

use pg_corpus_core::slots::{self, QueueStep};
use pg_corpus_core::CoreError;
use pgrx::datum::DatumWithOid;
use pgrx::pg_sys;
use pgrx::spi::Spi;

use super::{select_saved, spi_failure, with_settings, write, write_saved};

/// What the re-embed trigger needs of its slot, read once per statement.
pub struct TriggerSlot {
    /// the slot's table (for a partition or a Citus shard, the table it belongs to)
    pub slot_table: u32,
    /// its SQL name: the payload of the workers' notification
    pub table_text: String,
    /// whether this write may NOTIFY (not on a Citus shard: a NOTIFY would make Citus' two-phase
    /// commit of the write fail; workers poll those nodes)
    pub announce: bool,
    /// the slot's id, embedding and input columns by their current names
    pub id: String,
    pub embedding: String,
    pub inputs: Vec<String>,
}

/// The slot a trigger named `trigger` on relation `relid` serves for the registered embedding
/// column `registered`; None when there is none (the extension was created again, or the slot
/// row was deleted) or one of its columns has no live column of a fitting type. The slot's
/// table is the trigger's own, or for a partition's clone of a partitioned table's trigger the
/// table of the trigger it was cloned from (at any depth: a partition registered itself serves
/// its own slot), or for a Citus shard (Citus copies the trigger to every shard, and it fires
/// on the node holding the shard) the distributed table it is a shard of: named by the table's
/// identity on this node, so the same trigger serves a table, a partition, a shard on any node,
/// and a table after dump and restore.
pub fn trigger_slot(relid: u32, trigger: &str, registered: &str) -> Result<Option<TriggerSlot>, CoreError> {
    let args =
        [DatumWithOid::from(pg_sys::Oid::from(relid)), DatumWithOid::from(trigger), DatumWithOid::from(registered)];
    select_saved(
        "SELECT t.rel::int8, t.rel::regclass::text,
                t.rel = $1 OR NOT corpus._citus_present() OR corpus._citus_shard_table($1) IS NULL,
                corpus._slot_column(s.item_table, a.id_attnum)::text,
                corpus._slot_column(s.item_table, a.embedding_attnum)::text,
                ARRAY(SELECT corpus._slot_column(s.item_table, u.attnum)::text
                        FROM unnest(a.input_attnums) WITH ORDINALITY AS u(attnum, n) ORDER BY u.n)
           FROM (SELECT CASE WHEN corpus._citus_present()
                                  AND NOT EXISTS (SELECT 1 FROM corpus.embedding_slots x WHERE x.item_table = u.rel)
                             THEN coalesce(corpus._citus_shard_table(u.rel), u.rel) ELSE u.rel END AS rel
                   FROM (WITH RECURSIVE up(tgrelid, tgparentid) AS (
                             SELECT g.tgrelid, g.tgparentid FROM pg_trigger g WHERE g.tgrelid = $1 AND g.tgname = $2::name
                             UNION ALL
                             SELECT p.tgrelid, p.tgparentid FROM pg_trigger p JOIN up ON p.oid = up.tgparentid)
                         SELECT coalesce((SELECT up.tgrelid FROM up WHERE up.tgparentid = 0), $1) AS rel) AS u) AS t
           JOIN corpus.embedding_slots AS s ON s.item_table = t.rel AND s.embedding_column = $3::name
          CROSS JOIN LATERAL corpus._slot_attnums(s) AS a",
        &args,
        |t| {
            if t.is_empty() {
                return Ok(None);
            }
            let row = t.first();
            let (Some(slot_table), Some(table_text), Some(announce)) =
                (row.get::<i64>(1)?, row.get::<String>(2)?, row.get::<bool>(3)?)
            else {
                return Ok(None);
            };
            let (Some(id), Some(embedding), Some(inputs)) =
                (row.get::<String>(4)?, row.get::<String>(5)?, row.get::<Vec<Option<String>>>(6)?)
            else {
                return Ok(None);
            };
            let Some(inputs) = inputs.into_iter().collect::<Option<Vec<String>>>() else {
                return Ok(None);
            };
            Ok(Some(TriggerSlot { slot_table: slot_table as u32, table_text, announce, id, embedding, inputs }))
        },
    )
}

/// Remove every queue entry of a slot (the table was truncated).
pub fn forget_all(slot_table: u32, registered: &str) -> Result<(), CoreError> {
    write_saved(
        "DELETE FROM corpus.embedding_queue WHERE item_table = $1::regclass AND embedding_column = $2::name",
        &[DatumWithOid::from(pg_sys::Oid::from(slot_table)), DatumWithOid::from(registered)],
    )
    .map(drop)
}

/// Apply one step of [`slots::row_steps`] to the entry of `id` (a datum of type `id_type`,
/// turned into text by its built-in cast, as every reader of the queue does); true when an
/// item was queued.
pub fn apply(
    step: QueueStep,
    slot_table: u32,
    registered: &str,
    id: pg_sys::Datum,
    id_type: pg_sys::Oid,
) -> Result<bool, CoreError> {
    // SAFETY: `id` is a live datum of type `id_type` read from the trigger's tuple.
    let id = unsafe { DatumWithOid::new(id, id_type) };
    let table = DatumWithOid::from(pg_sys::Oid::from(slot_table));
    match step {
        QueueStep::ForgetOld | QueueStep::ForgetNew => write_saved(
            "DELETE FROM corpus.embedding_queue
              WHERE item_table = $1::regclass AND embedding_column = $2::name AND item_id = $3::text",
            &[table, DatumWithOid::from(registered), id],
        )
        .map(|_| false),
        QueueStep::Enqueue(reason) => write_saved(
            "INSERT INTO corpus.embedding_queue AS q (item_table, embedding_column, item_id, reason)
             SELECT $1::regclass, $2::name, $3::text, $4
              WHERE EXISTS (SELECT 1 FROM corpus.embedding_slots s
                             WHERE s.item_table = $1::regclass AND s.embedding_column = $2::name)
             ON CONFLICT (item_table, embedding_column, item_id) DO UPDATE
                SET reason = EXCLUDED.reason, version = nextval('corpus.embedding_queue_version_seq'),
                    enqueued_at = now(), state = 'pending', claimed_by = NULL, claimed_at = NULL,
                    lease_until = NULL, attempts = 0, last_error = NULL",
            &[table, DatumWithOid::from(registered), id, DatumWithOid::from(reason.name())],
        )
        .map(|n| n > 0),
    }
}

/// Wake the embedding workers listening on `pg_corpus_embedding` (the payload names the table).
pub fn announce(table_text: &str) -> Result<(), CoreError> {
    write_saved("SELECT pg_catalog.pg_notify('pg_corpus_embedding', $1)", &[DatumWithOid::from(table_text)]).map(drop)
}

/// What registration reads of the item table's columns.
struct Columns {
    table_text: String,
    embedding_attnum: Option<i16>,
    id_attnum: Option<i16>,
    input_attnums: Option<Vec<i16>>,
    id_type: Option<String>,
    id_type_ok: bool,
    citus_kind: Option<String>,
    coordinator: bool,
}

fn columns(item_table: i64, embedding: &str, id: &str, inputs: &[String]) -> Result<Columns, CoreError> {
    Spi::connect(|client| {
        let t = client.select(
            "SELECT $1::oid::regclass::text,
                    (SELECT a.attnum FROM pg_attribute a
                      WHERE a.attrelid = $1::oid AND a.attname = $2::name AND NOT a.attisdropped),
                    i.attnum,
                    (SELECT array_agg(a.attnum ORDER BY c.n)
                       FROM unnest($4::text[]::name[]) WITH ORDINALITY AS c(name, n)
                       JOIN pg_attribute a ON a.attrelid = $1::oid AND a.attname = c.name AND NOT a.attisdropped),
                    (SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
                      WHERE a.attrelid = $1::oid AND a.attnum = i.attnum),
                    corpus._slot_type_ok($1::oid::regclass, i.attnum, 'id'),
                    corpus._citus_table_kind($1::oid::regclass),
                    coalesce(corpus._citus_coordinator(), false)
               FROM (SELECT (SELECT a.attnum FROM pg_attribute a
                              WHERE a.attrelid = $1::oid AND a.attname = $3::name AND NOT a.attisdropped) AS attnum) AS i",
            Some(1),
            &[
                DatumWithOid::from(item_table),
                DatumWithOid::from(embedding),
                DatumWithOid::from(id),
                DatumWithOid::from(inputs.to_vec()),
            ],
        )?;
        let row = t.first();
        Ok(Columns {
            table_text: row.get::<String>(1)?.unwrap_or_default(),
            embedding_attnum: row.get::<i16>(2)?,
            id_attnum: row.get::<i16>(3)?,
            input_attnums: row.get::<Vec<i16>>(4)?,
            id_type: row.get::<String>(5)?,
            id_type_ok: row.get::<bool>(6)?.unwrap_or(false),
            citus_kind: row.get::<String>(7)?,
            coordinator: row.get::<bool>(8)?.unwrap_or(false),
        })
    })
    .map_err(spi_failure)
}

/// A slot already registered for the column: its columns by number and current name, its model.
struct Existing {
    id_attnum: Option<i16>,
    input_attnums: Option<Vec<i16>>,
    id_name: String,
    input_names: Vec<String>,
    model: Option<String>,
}

fn existing(item_table: i64, embedding_attnum: Option<i16>) -> Result<Option<Existing>, CoreError> {
    Spi::connect(|client| {
        let t = client.select(
            "SELECT s.id_attnum, s.input_attnums, corpus._slot_column(s.item_table, s.id_attnum)::text,
                    ARRAY(SELECT coalesce(corpus._slot_column(s.item_table, a)::text, '')
                            FROM unnest(s.input_attnums) AS a), s.model
               FROM corpus.embedding_slots s
              WHERE s.item_table = $1::oid::regclass AND s.embedding_attnum = $2",
            Some(1),
            &[DatumWithOid::from(item_table), DatumWithOid::from(embedding_attnum)],
        )?;
        if t.is_empty() {
            return Ok(None);
        }
        let row = t.first();
        Ok(Some(Existing {
            id_attnum: row.get::<i16>(1)?,
            input_attnums: row.get::<Vec<i16>>(2)?,
            id_name: row.get::<String>(3)?.unwrap_or_default(),
            input_names: row.get::<Vec<String>>(4)?.unwrap_or_default(),
            model: row.get::<String>(5)?,
        }))
    })
    .map_err(spi_failure)
}

/// Keep a source's embeddings honest: its table's slot for `embedding` (shared with the other
/// sources of that column, which must agree on id column, inputs and model), the library's
/// triggers on the table, and the first backlog (items without an embedding) queued.
pub fn attach(
    item_table: i64,
    embedding: &str,
    id: &str,
    inputs: &[String],
    model: Option<&str>,
    dimensions: Option<i32>,
) -> Result<(), CoreError> {
    let c = columns(item_table, embedding, id, inputs)?;
    if let Some(slot) = existing(item_table, c.embedding_attnum)? {
        let same = slot.id_attnum == c.id_attnum && slot.input_attnums == c.input_attnums;
        return slots::check_shared_slot(
            &c.table_text,
            embedding,
            same,
            &slot.id_name,
            &slot.input_names,
            model,
            slot.model.as_deref(),
        );
    }
    if !c.id_type_ok {
        return Err(slots::id_type_refused(&c.table_text, id, c.id_type.as_deref().unwrap_or("")));
    }
    let distributed = c.citus_kind.as_deref() == Some("distributed");
    if c.citus_kind.as_deref() == Some("reference") {
        return Err(slots::reference_table_refused(&c.table_text));
    }
    let (Some(embedding_attnum), Some(id_attnum)) = (c.embedding_attnum, c.id_attnum) else {
        // (the source's definition was checked against the table before: only a column
        // dropped since, in this transaction, gets here)
        let missing = if c.id_attnum.is_none() { id } else { embedding };
        return Err(CoreError::new(
            pg_corpus_core::SqlState::UndefinedColumn,
            format!("column \"{missing}\" of {} does not exist", c.table_text),
            "Register the source with columns the table has.",
        ));
    };
    let trigger = slots::trigger_name(embedding_attnum);
    let replica = write(
        "INSERT INTO corpus.embedding_slots AS s (item_table, embedding_column, id_column, id_type, input_columns,
                                                  model, dimensions, trigger_name, trigger_function, id_attnum,
                                                  embedding_attnum, input_attnums)
         VALUES ($1::oid::regclass, $2::name, $3::name, $4, $5::text[]::name[], $6, $7, $8::name, $9, $10, $11, $12)
         RETURNING to_jsonb(s)::text",
        &[
            DatumWithOid::from(item_table),
            DatumWithOid::from(embedding),
            DatumWithOid::from(id),
            DatumWithOid::from(c.id_type.as_deref().unwrap_or("")),
            DatumWithOid::from(inputs.to_vec()),
            DatumWithOid::from(model),
            DatumWithOid::from(dimensions),
            DatumWithOid::from(trigger.as_str()),
            DatumWithOid::from(slots::TRIGGER_FUNCTION),
            DatumWithOid::from(id_attnum),
            DatumWithOid::from(embedding_attnum),
            DatumWithOid::from(c.input_attnums.clone().unwrap_or_default()),
        ],
        |t| t.first().get_one::<String>(),
    )?
    .unwrap_or_default();
    let mut columns: Vec<&str> = inputs.iter().map(String::as_str).collect();
    columns.extend([id, embedding]);
    create_triggers(&c.table_text, &trigger, &columns, embedding, distributed)?;
    // items already without an embedding are the first backlog
    enqueue_local(&slot_named(item_table, embedding)?, true, false)?;
    // On a Citus coordinator every other node keeps a copy of the slot and the queue of the
    // shards it holds (the trigger writes there); each commits its copy on its own, and
    // registering again replaces it. The workers listen here: announce those backlogs.
    if distributed && c.coordinator {
        let queued = write(
            "SELECT coalesce(sum(a::bigint), 0)::int8 FROM corpus._citus_on_other_nodes(
                 format('SELECT corpus._embedding_slot_replica(%L::jsonb)', $1)) AS a",
            &[DatumWithOid::from(replica.as_str())],
            |t| t.first().get_one::<i64>(),
        )?;
        if queued.unwrap_or(0) > 0 {
            announce(&c.table_text)?;
        }
    }
    Ok(())
}

/// Run DDL pg_corpus built (identifiers and literals quoted by the core), for a Citus
/// distributed table with the settings Citus asks for a trigger that only writes the node's own
/// queue (the trigger fires on the node holding the shard), sequential so that Citus applies
/// them shard by shard.
fn run_ddl(statements: &[String], distributed: bool) -> Result<(), CoreError> {
    let mut settings = vec![("client_min_messages", "warning".to_string())];
    if distributed {
        settings.push(("citus.enable_unsafe_triggers", "on".to_string()));
        settings.push(("citus.multi_shard_modify_mode", "sequential".to_string()));
    }
    with_settings(&settings, || {
        Spi::connect_mut(|client| {
            for sql in statements {
                client.update(sql.as_str(), None, &[])?;
            }
            Ok(())
        })
        .map_err(spi_failure)
    })
}

fn create_triggers(
    table: &str,
    trigger: &str,
    columns: &[&str],
    registered: &str,
    distributed: bool,
) -> Result<(), CoreError> {
    run_ddl(&slots::trigger_statements(table, trigger, columns, registered), distributed)
}

/// Release the slot of `embedding` (by its registered or current name) once no source uses it:
/// its row, its queue (by cascade), its triggers, and the other Citus nodes' copies.
pub fn detach(item_table: i64, embedding: &str) -> Result<(), CoreError> {
    let found = write(
        "DELETE FROM corpus.embedding_slots d
          USING (SELECT s.item_table, s.embedding_column FROM corpus.embedding_slots s
                  WHERE s.item_table = $1::oid::regclass
                    AND (s.embedding_column = $2::name
                         OR s.embedding_attnum = (SELECT a.attnum FROM pg_attribute a
                                                   WHERE a.attrelid = $1::oid AND a.attname = $2::name
                                                     AND NOT a.attisdropped))
                    AND NOT EXISTS (SELECT 1 FROM corpus.sources u
                                     WHERE u.item_table = s.item_table
                                       AND (u.embedding_column = s.embedding_column
                                            OR u.embedding_column = corpus._slot_column(s.item_table, s.embedding_attnum)))
                  LIMIT 1) AS s
          WHERE d.item_table = s.item_table AND d.embedding_column = s.embedding_column
         RETURNING d.embedding_column::text, d.trigger_name::text, d.item_table::text,
                   EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = $1::oid),
                   corpus._citus_table_kind($1::oid::regclass)",
        &[DatumWithOid::from(item_table), DatumWithOid::from(embedding)],
        |t| {
            if t.is_empty() {
                return Ok(None);
            }
            let row = t.first();
            Ok(Some((
                row.get::<String>(1)?.unwrap_or_default(),
                row.get::<String>(2)?.unwrap_or_default(),
                row.get::<String>(3)?.unwrap_or_default(),
                row.get::<bool>(4)?.unwrap_or(false),
                row.get::<String>(5)?,
            )))
        },
    )?;
    let Some((registered, trigger, table, exists, kind)) = found else { return Ok(()) };
    if exists {
        run_ddl(&slots::drop_trigger_statements(&table, &trigger), kind.as_deref() == Some("distributed"))?;
    }
    write(
        "SELECT count(*) FROM corpus._citus_fan_out($1::oid::regclass,
             format('SELECT corpus._embedding_slot_forget(%L, %L)', $2, $3))",
        &[DatumWithOid::from(item_table), DatumWithOid::from(table.as_str()), DatumWithOid::from(registered.as_str())],
        |_| Ok(()),
    )
}

/// Put every slot's triggers of this node back on its table (the library's function, its
/// registered column as argument) and drop the trigger functions an older release generated
/// per slot. Returns how many slots were renewed.
pub fn renew_triggers() -> Result<i64, CoreError> {
    let rows = Spi::connect(|client| {
        let t = client.select(
            "SELECT s.item_table::text, s.trigger_name::text, s.embedding_column::text,
                    ARRAY(SELECT corpus._slot_column(s.item_table, a)::text
                            FROM unnest(s.input_attnums || s.id_attnum || s.embedding_attnum) AS a),
                    coalesce(corpus._citus_table_kind(s.item_table) = 'distributed', false),
                    (SELECT p.oid::regprocedure::text FROM pg_proc p
                      WHERE p.pronamespace = 'corpus'::regnamespace AND p.proname = s.trigger_function
                        AND s.trigger_function ~ '^_embedding_trigger_[0-9]+_[0-9]+$' AND p.pronargs = 0)
               FROM corpus.embedding_slots s
              WHERE EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = s.item_table)",
            None,
            &[],
        )?;
        let mut out = Vec::new();
        for row in t {
            out.push((
                row.get::<String>(1)?.unwrap_or_default(),
                row.get::<String>(2)?.unwrap_or_default(),
                row.get::<String>(3)?.unwrap_or_default(),
                row.get::<Vec<Option<String>>>(4)?.unwrap_or_default(),
                row.get::<bool>(5)?.unwrap_or(false),
                row.get::<String>(6)?,
            ));
        }
        Ok(out)
    })
    .map_err(spi_failure)?;
    let mut renewed = 0;
    for (table, trigger, registered, columns, distributed, generated) in rows {
        // a slot whose column was dropped keeps its triggers until its source is dropped
        let Some(columns) = columns.into_iter().collect::<Option<Vec<String>>>() else { continue };
        let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
        let mut ddl = slots::trigger_statements(&table, &trigger, &columns, &registered);
        if let Some(function) = generated {
            ddl.push(format!("DROP FUNCTION IF EXISTS {function}"));
        }
        run_ddl(&ddl, distributed)?;
        renewed += 1;
    }
    write(
        "UPDATE corpus.embedding_slots SET trigger_function = $1 WHERE trigger_function <> $1",
        &[DatumWithOid::from(slots::TRIGGER_FUNCTION)],
        |_| Ok(()),
    )?;
    Ok(renewed)
}

/// A slot as the DBA's queue functions find it: by its registered name or its column's current
/// name (the registered name first).
pub struct Slot {
    pub item_table: i64,
    pub table_text: String,
    pub registered: String,
    /// the id and embedding columns' current names (None: no live column of a fitting type)
    pub id: Option<String>,
    pub embedding: Option<String>,
    /// the id column's SQL type
    pub id_type: Option<String>,
    pub registered_id: String,
}

impl Slot {
    /// Its id and embedding columns, or 42804 when one has no fitting live column.
    pub fn columns(&self) -> Result<(&str, &str), CoreError> {
        match (self.id.as_deref(), self.embedding.as_deref()) {
            (Some(id), Some(embedding)) => Ok((id, embedding)),
            _ => Err(slots::columns_unusable(&self.table_text, &self.registered, &self.registered_id)),
        }
    }
}

/// The slot of `column` on `item_table`, or 42704 naming them.
pub fn slot_named(item_table: i64, column: &str) -> Result<Slot, CoreError> {
    let found = write(
        "SELECT s.item_table::oid::int8, s.item_table::text, s.embedding_column::text,
                corpus._slot_column(s.item_table, a.id_attnum)::text,
                corpus._slot_column(s.item_table, a.embedding_attnum)::text,
                (SELECT format_type(t.atttypid, t.atttypmod) FROM pg_attribute t
                  WHERE t.attrelid = s.item_table AND t.attnum = a.id_attnum),
                s.id_column::text
           FROM corpus.embedding_slots s CROSS JOIN LATERAL corpus._slot_attnums(s) AS a
          WHERE s.item_table = $1::oid::regclass
            AND (s.embedding_column = $2::name
                 OR s.embedding_attnum = (SELECT t.attnum FROM pg_attribute t
                                           WHERE t.attrelid = $1::oid AND t.attname = $2::name AND NOT t.attisdropped))
          ORDER BY s.embedding_column = $2::name DESC
          LIMIT 1",
        &[DatumWithOid::from(item_table), DatumWithOid::from(column)],
        |t| {
            if t.is_empty() {
                return Ok(None);
            }
            let row = t.first();
            Ok(Some(Slot {
                item_table: row.get::<i64>(1)?.unwrap_or(item_table),
                table_text: row.get::<String>(2)?.unwrap_or_default(),
                registered: row.get::<String>(3)?.unwrap_or_default(),
                id: row.get::<String>(4)?,
                embedding: row.get::<String>(5)?,
                id_type: row.get::<String>(6)?,
                registered_id: row.get::<String>(7)?.unwrap_or_default(),
            }))
        },
    )?;
    match found {
        Some(slot) => Ok(slot),
        None => Err(slots::no_slot(&table_text(item_table)?, column)),
    }
}

pub fn table_text(item_table: i64) -> Result<String, CoreError> {
    if item_table == 0 {
        return Ok(String::new());
    }
    write("SELECT $1::oid::regclass::text", &[DatumWithOid::from(item_table)], |t| t.first().get_one::<String>())
        .map(Option::unwrap_or_default)
}

/// The relations of this node that hold a table's rows: the table, or the shards of a Citus
/// distributed table placed here (OID and SQL name).
pub fn local_relations(item_table: i64) -> Result<Vec<(u32, String)>, CoreError> {
    write(
        "SELECT r::oid::int8, r::text FROM corpus._local_relations($1::oid::regclass) AS r",
        &[DatumWithOid::from(item_table)],
        |t| {
            let mut out = Vec::new();
            for row in t {
                if let (Some(oid), Some(name)) = (row.get::<i64>(1)?, row.get::<String>(2)?) {
                    out.push((oid as u32, name));
                }
            }
            Ok(out)
        },
    )
}

/// What a DBA operation that writes many queue entries (an enqueue, a model change's batch)
/// takes first in its transaction: the queue's EXCLUSIVE lock, then ACCESS SHARE on the item
/// relations it reads. Every other writer of the queue takes ROW EXCLUSIVE (or ROW SHARE) on it
/// before its first entry: a user's write in the re-embed trigger, after its item's row lock; a
/// worker's claim and completion. So each either holds the queue already, and the operation
/// waits for it holding nothing that writer could need, or waits for the operation, which once
/// it holds the queue waits for no entry and no item: no user's transaction is ever in a cycle
/// with it, and none is aborted. The item relations are taken without waiting: a transaction
/// holding one exclusively (DDL, TRUNCATE) may write the queue next, so the operation then
/// gives everything back, waits for that relation holding nothing, and starts again. The
/// caller needs the privileges LOCK TABLE asks for (42501 otherwise).
pub fn lock_queue(relations: &[(u32, String)]) -> Result<(), CoreError> {
    let queue = write("SELECT 'corpus.embedding_queue'::regclass::oid::int8", &[], |t| t.first().get_one::<i64>())?
        .unwrap_or(0) as u32;
    // SAFETY: lock manager and ACL calls on relation OIDs; each lock taken here is either kept
    // to the end of the transaction or released once by the call that took it.
    unsafe {
        let user = pg_sys::GetUserId();
        let may = |rel: u32, mode: u32| {
            pg_sys::pg_class_aclmask(
                pg_sys::Oid::from(rel),
                user,
                mode as pg_sys::AclMode,
                pg_sys::AclMaskHow::ACLMASK_ANY,
            ) != 0
        };
        if !may(queue, pg_sys::ACL_UPDATE | pg_sys::ACL_DELETE | pg_sys::ACL_TRUNCATE) {
            return Err(denied("corpus.embedding_queue"));
        }
        if let Some((_, name)) = relations.iter().find(|(rel, _)| !may(*rel, pg_sys::ACL_SELECT)) {
            return Err(denied(name));
        }
        let share = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
        let exclusive = pg_sys::ExclusiveLock as pg_sys::LOCKMODE;
        loop {
            pg_sys::LockRelationOid(pg_sys::Oid::from(queue), exclusive);
            let got = relations
                .iter()
                .take_while(|(rel, _)| pg_sys::ConditionalLockRelationOid(pg_sys::Oid::from(*rel), share))
                .count();
            if got == relations.len() {
                return Ok(());
            }
            for (rel, _) in &relations[..got] {
                pg_sys::UnlockRelationOid(pg_sys::Oid::from(*rel), share);
            }
            pg_sys::UnlockRelationOid(pg_sys::Oid::from(queue), exclusive);
            let busy = pg_sys::Oid::from(relations[got].0);
            pg_sys::LockRelationOid(busy, share);
            pg_sys::UnlockRelationOid(busy, share);
        }
    }
}

fn denied(table: &str) -> CoreError {
    CoreError::new(
        pg_corpus_core::SqlState::InsufficientPrivilege,
        format!("permission denied for table {table}"),
        "The role needs UPDATE on corpus.embedding_queue and SELECT on the item table.",
    )
}

/// Queue a slot's items of this node's relations (see [`slots::enqueue_statement`]), one
/// statement per relation; announces the work. How many entries were written.
pub fn enqueue_local(slot: &Slot, only_missing: bool, renew: bool) -> Result<i64, CoreError> {
    let (id, embedding) = slot.columns()?;
    let mut total = 0;
    for (_, relation) in local_relations(slot.item_table)? {
        let sql =
            slots::enqueue_statement(slot.item_table, &slot.registered, id, embedding, &relation, only_missing, renew);
        total += write(&sql, &[], |t| Ok(t.len() as i64))?;
    }
    if total > 0 {
        announce(&slot.table_text)?;
    }
    Ok(total)
}

/// On a Citus worker: this node's copy of a slot the coordinator registered or changed (its
/// JSON, the table named as text: it has another OID on every node), and the first backlog of
/// the shards placed here. With the caller's rights.
pub fn replica(slot_json: &str) -> Result<i64, CoreError> {
    let key = write(
        "INSERT INTO corpus.embedding_slots AS e
         SELECT * FROM jsonb_populate_record(NULL::corpus.embedding_slots, $1::text::jsonb)
         ON CONFLICT (item_table, embedding_column) DO UPDATE
            SET id_column = EXCLUDED.id_column, id_type = EXCLUDED.id_type, input_columns = EXCLUDED.input_columns,
                model = EXCLUDED.model, dimensions = EXCLUDED.dimensions, trigger_name = EXCLUDED.trigger_name,
                trigger_function = EXCLUDED.trigger_function, id_attnum = EXCLUDED.id_attnum,
                embedding_attnum = EXCLUDED.embedding_attnum, input_attnums = EXCLUDED.input_attnums
         RETURNING e.item_table::oid::int8, e.embedding_column::text",
        &[DatumWithOid::from(slot_json)],
        |t| t.first().get_two::<i64, String>(),
    )?;
    let (Some(table), Some(column)) = key else { return Ok(0) };
    enqueue_local(&slot_named(table, &column)?, true, false)
}

/// Record a new model for a slot (and on the other Citus nodes' copies); how many items the
/// table has (the model change's total).
pub fn model_start(item_table: i64, column: &str, model: &str) -> Result<i64, CoreError> {
    let slot = slot_named(item_table, column)?;
    let json = write(
        "UPDATE corpus.embedding_slots s SET model = $3
          WHERE s.item_table = $1::oid::regclass AND s.embedding_column = $2::name
         RETURNING to_jsonb(s)::text",
        &[DatumWithOid::from(item_table), DatumWithOid::from(slot.registered.as_str()), DatumWithOid::from(model)],
        |t| t.first().get_one::<String>(),
    )?
    .unwrap_or_default();
    write(
        "SELECT count(*) FROM corpus._citus_fan_out($1::oid::regclass,
             format('SELECT corpus._embedding_slot_replica(%L::jsonb)', $2))",
        &[DatumWithOid::from(item_table), DatumWithOid::from(json.as_str())],
        |_| Ok(()),
    )?;
    write(&format!("SELECT count(*)::int8 FROM {}", slot.table_text), &[], |t| t.first().get_one::<i64>())
        .map(Option::unwrap_or_default)
}

/// One batch of a model change on this node, from where the previous one ended (`state`, see
/// [`slots::ModelStep`]); holds the queue while it runs ([`lock_queue`]).
pub fn model_step(
    item_table: i64,
    column: &str,
    state: &serde_json::Value,
    batch_size: i32,
) -> Result<serde_json::Value, CoreError> {
    let slot = slot_named(item_table, column)?;
    let (id, _) = slot.columns()?;
    let relations = local_relations(item_table)?;
    let step = slots::ModelStep::parse(state);
    let (mut i, mut after) = (step.relation, step.after);
    if i <= relations.len() {
        lock_queue(&relations[i - 1..])?;
    }
    while i <= relations.len() {
        let sql = slots::model_batch_statement(
            item_table,
            &slot.registered,
            id,
            slot.id_type.as_deref().unwrap_or("text"),
            &relations[i - 1].1,
        );
        let (n, last) =
            write(&sql, &[DatumWithOid::from(after.as_deref()), DatumWithOid::from(i64::from(batch_size))], |t| {
                t.first().get_two::<i64, String>()
            })?;
        let n = n.unwrap_or(0);
        if n > 0 {
            announce(&slot.table_text)?;
            return Ok(slots::ModelStep::batch(i, last.as_deref(), n));
        }
        i += 1;
        after = None;
    }
    Ok(slots::ModelStep::done())
}

/// The current names of a slot's embedding input columns.
pub fn slot_inputs(item_table: i64, column: &str) -> Result<Vec<String>, CoreError> {
    write(
        "SELECT ARRAY(SELECT corpus._slot_column(s.item_table, u.a)::text
                        FROM unnest((corpus._slot_attnums(s)).input_attnums) WITH ORDINALITY AS u(a, n) ORDER BY u.n)
           FROM corpus.embedding_slots s WHERE s.item_table = $1::oid::regclass AND s.embedding_column = $2::name",
        &[DatumWithOid::from(item_table), DatumWithOid::from(column)],
        |t| if t.is_empty() { Ok(None) } else { t.first().get_one::<Vec<String>>() },
    )
    .map(Option::unwrap_or_default)
}

/// Items of a slot's queue on this node that wait for an embedding (pending, claimed or dead).
pub fn backlog(item_table: i64, column: &str) -> Result<i64, CoreError> {
    write(
        "SELECT count(*) FROM corpus.embedding_queue q
          WHERE q.item_table = $1::oid::regclass AND q.embedding_column = $2::name",
        &[DatumWithOid::from(item_table), DatumWithOid::from(column)],
        |t| t.first().get_one::<i64>(),
    )
    .map(Option::unwrap_or_default)
}

/// The sources of the table that rank by `column` (its registered or current name): the
/// condition on `corpus.sources s` of [`switch_sources`] and [`sources_using`] (`$1` the table,
/// `$2` the column).
const SOURCES_OF_COLUMN: &str = "s.item_table = $1::oid::regclass
            AND (s.embedding_column = $2::name
                 OR (corpus._current_columns(s.item_table, s.column_types #> '{attnums,item}',
                                             ARRAY[s.embedding_column]))[1] = $2::name)";

/// Point every source that embeds into `from` of the table at `to`; the corpora changed.
pub fn switch_sources(item_table: i64, from: &str, to: &str) -> Result<Vec<String>, CoreError> {
    write(
        &format!(
            "UPDATE corpus.sources s SET embedding_column = $3::name WHERE {SOURCES_OF_COLUMN} RETURNING s.corpus"
        ),
        &[DatumWithOid::from(item_table), DatumWithOid::from(from), DatumWithOid::from(to)],
        |t| {
            let mut out = Vec::new();
            for row in t {
                if let Some(c) = row.get::<String>(1)? {
                    if !out.contains(&c) {
                        out.push(c);
                    }
                }
            }
            Ok(out)
        },
    )
}

/// How many sources rank by `column` of the table.
pub fn sources_using(item_table: i64, column: &str) -> Result<i64, CoreError> {
    write(
        &format!("SELECT count(*) FROM corpus.sources s WHERE {SOURCES_OF_COLUMN}"),
        &[DatumWithOid::from(item_table), DatumWithOid::from(column)],
        |t| t.first().get_one::<i64>(),
    )
    .map(Option::unwrap_or_default)
}

/// Mark a build to switch by itself: the sources of `from` switch to `built` once no item
/// waits for it (registered names; None: not any more). A catalog from before the mark existed
/// has nothing to clear.
pub fn switch_when_built(item_table: i64, built: &str, from: Option<&str>) -> Result<(), CoreError> {
    write(
        "UPDATE corpus.embedding_slots s SET switch_from = $3::name
          WHERE s.item_table = $1::oid::regclass AND s.embedding_column = $2::name
            AND (to_jsonb(s) ? 'switch_from')",
        &[DatumWithOid::from(item_table), DatumWithOid::from(built), DatumWithOid::from(from)],
        |_| Ok(()),
    )
}

/// The builds marked to switch by themselves whose backlog is empty (none in a catalog from
/// before the mark existed), as (table, built column,
/// column switched from), each locked for this transaction (one that another transaction
/// holds is left to it). The lock does not block writers queueing items (their foreign key
/// takes a key-share lock).
pub fn finished_auto_builds() -> Result<Vec<(i64, String, String)>, CoreError> {
    write(
        "SELECT s.item_table::oid::int8, s.embedding_column::text, to_jsonb(s) ->> 'switch_from'
           FROM corpus.embedding_slots s
          WHERE to_jsonb(s) ->> 'switch_from' IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM corpus.embedding_queue q
                             WHERE q.item_table = s.item_table AND q.embedding_column = s.embedding_column)
          ORDER BY s.item_table, s.embedding_column
            FOR NO KEY UPDATE OF s SKIP LOCKED",
        &[],
        |t| {
            let mut out = Vec::new();
            for row in t {
                if let (Some(table), Some(built), Some(from)) =
                    (row.get::<i64>(1)?, row.get::<String>(2)?, row.get::<String>(3)?)
                {
                    out.push((table, built, from));
                }
            }
            Ok(out)
        },
    )
}
