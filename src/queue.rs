//! The re-embed queue's worker API: claim, complete, fail, release, retry dead letters and
//! enqueue. They run with the caller's rights: grant a worker role
//!   GRANT SELECT, UPDATE, DELETE ON corpus.embedding_queue TO embedder;
//! and on each item table SELECT on the id and input columns and UPDATE on the embedding column.
//! The item table itself is read and written as its owner, in a restricted security context,
//! once those privileges are checked (src/spi/items.rs): a tenant's triggers, row-level
//! security policies and generated columns run with the tenant's rights, never with the
//! worker's, which reach every table it serves. The rules are `pg_corpus_core::queue`'s, the
//! statements `spi::queue`'s.

use pg_corpus_core::queue::{self, Completion};
use pg_corpus_core::slots;
use pg_corpus_core::CoreError;
use pgrx::datum::{DatumWithOid, Interval};
use pgrx::prelude::*;

use crate::error::OrRaise;
use crate::jsonb::JsonbText;
use crate::regtypes::{Name, RegClass};
use crate::spi;
use crate::spi::queue as q;
use crate::vector::VectorDatum;

type ClaimRow = (
    Option<RegClass>,
    Option<Name>,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<i32>,
    Option<String>,
    Option<i32>,
);

fn oid_of(table: i64) -> Option<RegClass> {
    u32::try_from(table).ok().map(|t| RegClass(pg_sys::Oid::from(t)))
}

/// Claim up to batch_size items (oldest first) for `lease`; a crashed worker's items come back
/// when its lease runs out. Returns the text to embed and the version to hand back.
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_embedding_claim(
    batch_size: default!(Option<i32>, 16),
    lease: default!(Option<Interval>, "'5 minutes'"),
    worker: default!(Option<&str>, "NULL"),
    only_table: default!(Option<RegClass>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(item_table, Option<RegClass>),
        name!(embedding_column, Option<Name>),
        name!(item_id, Option<String>),
        name!(version, Option<i64>),
        name!(content, Option<String>),
        name!(model, Option<String>),
        name!(dimensions, Option<i32>),
        name!(reason, Option<String>),
        name!(attempts, Option<i32>),
    ),
> {
    let rows = spi::pinned_search_path(|| -> Result<Vec<ClaimRow>, CoreError> {
        spi::require_writable("corpus_embedding_claim")?;
        let batch_size = queue::check_batch_size(batch_size)?;
        let lease = match (lease, spi::interval_sign(lease)?) {
            (Some(lease), Some((_, std::cmp::Ordering::Greater))) => lease,
            (_, shown) => return Err(queue::bad_lease(shown.map(|(text, _)| text).as_deref())),
        };
        let only = only_table.map(RegClass::as_i64);
        let mut out: Vec<ClaimRow> = Vec::new();
        for r in q::claim_rows(batch_size, lease, worker, only)? {
            let Some(slot) = q::slot_columns(r.item_table, &r.embedding_column)? else { continue };
            if slot.dropped {
                // a column of the slot was dropped (with CASCADE, which dropped its trigger
                // too): nothing to embed from; a dead letter the health check reports
                q::mark_dropped(r.item_table, &r.embedding_column, &r.item_id)?;
                continue;
            }
            spi::items::require_worker()?;
            let table = pg_sys::Oid::from(u32::try_from(r.item_table).unwrap_or(0));
            let Some(text) = spi::items::item_text(table, slot.id_attnum, &slot.input_attnums, &r.item_id)? else {
                // the item is gone: nothing to embed
                q::dequeue(r.item_table, &r.embedding_column, &r.item_id)?;
                continue;
            };
            out.push((
                oid_of(r.item_table),
                Some(Name(r.embedding_column)),
                Some(r.item_id),
                Some(r.version),
                Some(text),
                slot.model,
                slot.dimensions,
                r.reason,
                r.attempts,
            ));
        }
        // On a Citus coordinator, the queue entries of distributed tables are on the nodes
        // holding their shards: claimed there, node after node, until the batch is full.
        let got = i32::try_from(out.len()).unwrap_or(batch_size);
        if got < batch_size {
            for c in q::claim_elsewhere(batch_size - got, lease, worker, only)? {
                out.push((
                    oid_of(c.item_table),
                    Some(Name(c.embedding_column)),
                    c.item_id,
                    c.version,
                    c.content,
                    c.model,
                    c.dimensions,
                    c.reason,
                    c.attempts,
                ));
            }
        }
        switch_finished_builds();
        Ok(out)
    })
    .or_raise();
    TableIterator::new(rows)
}

/// Store a worker's embedding. Returns 'stored', 'requeued' (the text changed since the claim:
/// the result describes old text and is refused) or 'not_queued' (nothing to do any more).
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_embedding_complete(
    item_table: Option<RegClass>,
    embedding_column: Option<Name>,
    item_id: Option<&str>,
    version: Option<i64>,
    embedding: Option<VectorDatum>,
    model: default!(Option<&str>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> String {
    // SAFETY: this call's own fcinfo; the embedding is its fifth argument (0-based 4).
    let vector_type = unsafe { pg_sys::get_fn_expr_argtype((*fcinfo).flinfo, 4) };
    spi::pinned_search_path(|| -> Result<&'static str, CoreError> {
        spi::require_writable("corpus_embedding_complete")?;
        let table = item_table.map_or(0, RegClass::as_i64);
        let column = embedding_column.as_ref().map_or("", |n| n.0.as_str());
        // the slot by its registered name or its column's current name (42704 when none)
        let named = spi::slots::slot_named(table, column)?;
        let slot = q::slot_columns(table, &named.registered)?;
        let Some(embedding) = embedding else { return Err(queue::null_embedding()) };
        let slot_name = format!("{}.{column}", named.table_text);
        let (slot_model, slot_dimensions) = slot.as_ref().map_or((None, None), |s| (s.model.as_deref(), s.dimensions));
        queue::check_embedding(embedding.dimensions, &slot_name, slot_dimensions, model, slot_model)?;
        let table_oid = pg_sys::Oid::from(u32::try_from(table).unwrap_or(0));
        // Lock the item row before the queue row, the order in which the (AFTER UPDATE) trigger
        // of a concurrent writer takes them; the opposite order deadlocks with that writer.
        if let (Some(slot), Some(id)) = (&slot, item_id) {
            spi::items::require_worker()?;
            spi::items::lock_item(table_oid, slot.id_attnum, slot.embedding_attnum, id)?;
        }
        let queued = match item_id {
            Some(id) => q::lock_queued(table, column, id)?,
            None => None,
        };
        // SAFETY: the argument's own datum and type, used within this call.
        let value = unsafe { DatumWithOid::new(embedding.datum, vector_type) };
        let Some(queued_version) = queued else {
            // On a Citus coordinator: the entry of a distributed table's item is on the node
            // holding its shard, which stores the embedding there (its own transaction)
            let elsewhere = q::complete_elsewhere(table, column, item_id, version, value, model)?;
            return Ok(match elsewhere.as_deref() {
                Some("stored") => Completion::Stored.name(),
                Some("requeued") => Completion::Requeued.name(),
                _ => Completion::NotQueued.name(),
            });
        };
        let outcome = Completion::of(queued_version, version);
        if outcome == Completion::Stored {
            // (the worker's rights were checked when its item was locked)
            let (Some(slot), Some(id)) = (&slot, item_id) else { return Ok(Completion::NotQueued.name()) };
            spi::items::store_embedding(table_oid, slot.id_attnum, slot.embedding_attnum, id, value)?;
            q::dequeue(table, column, id)?;
            switch_finished_builds();
        }
        Ok(outcome.name())
    })
    .or_raise()
    .to_string()
}

/// A worker could not embed an item: count the attempt; after max_attempts it becomes a dead
/// letter (state 'dead': not claimed again, reported by the health check).
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_embedding_fail(
    item_table: Option<RegClass>,
    embedding_column: Option<Name>,
    item_id: Option<&str>,
    version: Option<i64>,
    error: Option<&str>,
    max_attempts: default!(Option<i32>, 5),
) -> String {
    spi::pinned_search_path(|| {
        spi::require_writable("corpus_embedding_fail")?;
        let table = item_table.map_or(0, RegClass::as_i64);
        let column = embedding_column.as_ref().map_or("", |n| n.0.as_str());
        q::fail(table, column, item_id, version, error, max_attempts)
            .map(|s| s.unwrap_or_else(|| Completion::NotQueued.name().to_string()))
    })
    .or_raise()
}

/// A worker gives a claimed item back without having tried it (shutdown, or a slot whose model
/// it does not serve): pending again at once, the claim's attempt not counted. Returns
/// 'released' or 'not_claimed' (another version, not claimed, or claimed by someone else when
/// worker is given).
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_embedding_release(
    item_table: Option<RegClass>,
    embedding_column: Option<Name>,
    item_id: Option<&str>,
    version: Option<i64>,
    worker: default!(Option<&str>, "NULL"),
) -> String {
    spi::pinned_search_path(|| {
        spi::require_writable("corpus_embedding_release")?;
        let table = item_table.map_or(0, RegClass::as_i64);
        let column = embedding_column.as_ref().map_or("", |n| n.0.as_str());
        q::release(table, column, item_id, version, worker)
    })
    .map(|released| if released { "released" } else { "not_claimed" }.to_string())
    .or_raise()
}

/// Dead letters back into the queue (after the cause is fixed); how many.
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_embedding_retry_dead(only_table: default!(Option<RegClass>, "NULL")) -> i64 {
    spi::pinned_search_path(|| {
        spi::require_writable("corpus_embedding_retry_dead")?;
        q::retry_dead(only_table.map(RegClass::as_i64))
    })
    .or_raise()
}

/// Queue every item of a slot (only_missing: those without an embedding) in one statement —
/// after a bulk load with pg_corpus.defer_embedding_queue = on, or to re-embed on purpose.
/// Holds the queue while it runs: writes that queue an item wait for it.
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_embedding_enqueue(
    item_table: Option<RegClass>,
    embedding_column: Option<Name>,
    only_missing: default!(Option<bool>, true),
) -> i64 {
    spi::pinned_search_path(|| {
        spi::require_writable("corpus_embedding_enqueue")?;
        let table = item_table.map_or(0, RegClass::as_i64);
        let column = embedding_column.as_ref().map_or("", |n| n.0.as_str());
        q::enqueue(table, column, only_missing.unwrap_or(false))
    })
    .or_raise()
}

/// Build new embeddings beside the ones searches use: `new_column` (an empty vector column of
/// the table, with its own index) gets a slot of its own with `model`, the same id and input
/// columns as `embedding_column`'s, its trigger and a backlog of every item; the re-embed worker
/// fills it while every search keeps ranking by `embedding_column`. Answers the backlog.
/// `corpus_embedding_switch` makes the new column current; with `auto_switch`, the worker's
/// call that finds no item waiting any more makes it so.
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_embedding_build(
    item_table: Option<RegClass>,
    embedding_column: Option<Name>,
    new_column: Option<Name>,
    model: Option<&str>,
    auto_switch: default!(Option<bool>, false),
) -> i64 {
    spi::pinned_search_path(|| {
        spi::require_writable("corpus_embedding_build")?;
        let table = item_table.map_or(0, RegClass::as_i64);
        let column = embedding_column.as_ref().map_or("", |n| n.0.as_str());
        let new = new_column.as_ref().map_or("", |n| n.0.as_str());
        let model = slots::check_model(model)?;
        let slot = spi::slots::slot_named(table, column)?;
        let (id, _) = slot.columns()?;
        if spi::slots::slot_named(table, new).is_ok() {
            return Err(slots::already_registered(&slot.table_text, new));
        }
        let inputs = spi::slots::slot_inputs(table, &slot.registered)?;
        let dimensions = spi::registry::vector_typmod(table, new);
        spi::slots::attach(table, new, id, &inputs, Some(model), dimensions)?;
        if auto_switch.unwrap_or(false) {
            let built = spi::slots::slot_named(table, new)?;
            spi::slots::switch_when_built(table, &built.registered, Some(&slot.registered))?;
        }
        spi::slots::backlog(table, new)
    })
    .or_raise()
}

/// Abandon a build: `new_column`'s slot, trigger and queue go (the column and its values stay
/// yours). Refused for a column a source ranks by.
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_embedding_build_cancel(item_table: Option<RegClass>, new_column: Option<Name>) {
    spi::pinned_search_path(|| {
        spi::require_writable("corpus_embedding_build_cancel")?;
        let table = item_table.map_or(0, RegClass::as_i64);
        let new = new_column.as_ref().map_or("", |n| n.0.as_str());
        let built = spi::slots::slot_named(table, new)?;
        if spi::slots::sources_using(table, &built.registered)? > 0 {
            return Err(slots::not_a_build(&built.table_text, new));
        }
        spi::slots::detach(table, &built.registered)
    })
    .or_raise()
}

/// Make built embeddings current: every source that ranks by `embedding_column` of the table
/// ranks by `new_column` from this transaction's commit on, each corpus checked against the
/// tables; the old column's slot and queue go when no source uses it any more. Refused while
/// items wait for their new embedding, unless `force`. Answers the number of corpora switched.
#[pg_extern(volatile, parallel_unsafe)]
fn corpus_embedding_switch(
    item_table: Option<RegClass>,
    embedding_column: Option<Name>,
    new_column: Option<Name>,
    force: default!(Option<bool>, false),
) -> i32 {
    spi::pinned_search_path(|| {
        spi::require_writable("corpus_embedding_switch")?;
        let table = item_table.map_or(0, RegClass::as_i64);
        let column = embedding_column.as_ref().map_or("", |n| n.0.as_str());
        let new = new_column.as_ref().map_or("", |n| n.0.as_str());
        let old = spi::slots::slot_named(table, column)?;
        let built = spi::slots::slot_named(table, new)?;
        let waiting = spi::slots::backlog(table, &built.registered)?;
        if waiting > 0 && !force.unwrap_or(false) {
            return Err(slots::build_incomplete(&built.table_text, new, waiting));
        }
        switch(table, &old.registered, &built.registered)
    })
    .or_raise()
}

/// Point the sources of column `from` of the table at `to` (registered names), each corpus
/// checked against the tables, and drop `from`'s slot when no source uses it any more; the
/// number of corpora switched.
fn switch(table: i64, from: &str, to: &str) -> Result<i32, CoreError> {
    let corpora = spi::slots::switch_sources(table, from, to)?;
    for corpus in &corpora {
        spi::catalog::validate_corpus(corpus)?;
        spi::registry::snapshot_column_types(corpus, None)?;
    }
    spi::slots::switch_when_built(table, to, None)?;
    spi::slots::detach(table, from)?;
    Ok(corpora.len() as i32)
}

/// Switch every build marked `auto_switch` whose backlog is empty (the worker's claim and
/// complete call it: the worker that stores the last embedding, or the next claim after it,
/// makes the build current). As the owner of the extension's tables, since a worker may not
/// change the catalog, and each in a subtransaction: a switch that fails (a corpus whose
/// definition the new column does not satisfy) is a WARNING, never the worker's error, and is
/// tried again by the next call.
fn switch_finished_builds() {
    let finished = match spi::access::as_side_table_owner(spi::slots::finished_auto_builds) {
        Ok(f) => f,
        Err(e) => return crate::error::warning(&e),
    };
    for (table, built, from) in finished {
        let attempt =
            spi::subtransaction(|| spi::access::as_side_table_owner(|| switch(table, &from, &built)).or_raise());
        if let Err(e) = attempt {
            let report = spi::caught_report(&e);
            let table_text = spi::slots::table_text(table).unwrap_or_else(|_| table.to_string());
            crate::error::warning(&slots::auto_switch_failed(&table_text, &built, &from, report.message()));
        }
    }
}

/// On a Citus worker: this node's copy of a slot the coordinator registered or changed, and the
/// first backlog of the shards placed here (the coordinator calls it on every other node).
#[pg_extern(volatile, parallel_unsafe)]
fn _embedding_slot_replica(slot: Option<JsonbText>) -> i64 {
    spi::pinned_search_path(|| spi::slots::replica(slot.as_ref().map_or("null", |s| s.0.as_str()))).or_raise()
}

/// A model change's first step: the slot records the new model (here and on the other Citus
/// nodes); answers how many items the table has. CALL corpus.corpus_set_embedding_model runs it.
#[pg_extern(volatile, parallel_unsafe)]
fn _embedding_model_start(item_table: Option<RegClass>, embedding_column: Option<Name>, model: Option<&str>) -> i64 {
    spi::pinned_search_path(|| {
        let model = slots::check_model(model)?;
        let column = embedding_column.as_ref().map_or("", |n| n.0.as_str());
        spi::slots::model_start(item_table.map_or(0, RegClass::as_i64), column, model)
    })
    .or_raise()
}

/// One batch of a model change on this node, each in its own transaction (the procedure
/// commits between them; a coordinator drives the other nodes' batches through it): `state` is
/// where the previous batch ended (`{}` to begin); answers the next state with the batch's size
/// `n`, or `{"done": true}`.
#[pg_extern(volatile, parallel_unsafe)]
fn _embedding_model_step(
    item_table: Option<RegClass>,
    embedding_column: Option<Name>,
    state: Option<JsonbText>,
    batch_size: Option<i32>,
) -> JsonbText {
    spi::pinned_search_path(|| {
        let column = embedding_column.as_ref().map_or("", |n| n.0.as_str());
        let state = match state.as_ref() {
            Some(s) => s.parse("state")?,
            None => serde_json::json!({}),
        };
        let next = spi::slots::model_step(
            item_table.map_or(0, RegClass::as_i64),
            column,
            &state,
            batch_size.unwrap_or(10_000),
        )?;
        Ok(JsonbText(next.to_string()))
    })
    .or_raise()
}
