//! The embedding worker's access to item tables as release 0.3.0's SQL worker API calls it (its
//! PL/pgSQL claim and completion), for a database whose library is newer than its extension
//! until `ALTER EXTENSION pg_corpus UPDATE`: no SQL of their own (the current worker API calls
//! `spi::items` itself). Columns come as attribute numbers; the statements run as the table's
//! owner once the worker's own privileges are checked (src/spi/items.rs).

use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::AnyElement;

use crate::error::OrRaise;
use crate::spi;

/// The text to embed for one queued item, NULL when the item is gone.
#[pg_extern(volatile, strict, parallel_unsafe, sql = false)]
fn _embedding_item_text(
    item_table: pg_sys::Oid,
    id_attnum: i16,
    input_attnums: Vec<i16>,
    item_id: &str,
) -> Option<String> {
    spi::pinned_search_path(|| {
        spi::items::require_worker()?;
        spi::items::item_text(item_table, id_attnum, &input_attnums, item_id)
    })
    .or_raise()
}

/// Lock a queued item's row before its queue row (false: the item is gone).
#[pg_extern(volatile, strict, parallel_unsafe, sql = false)]
fn _embedding_item_lock(item_table: pg_sys::Oid, id_attnum: i16, embedding_attnum: i16, item_id: &str) -> bool {
    spi::pinned_search_path(|| {
        spi::items::require_worker()?;
        spi::items::lock_item(item_table, id_attnum, embedding_attnum, item_id)
    })
    .or_raise()
}

/// Store a worker's embedding for a queued item (false: no row has that id).
#[pg_extern(volatile, strict, parallel_unsafe, sql = false)]
fn _embedding_item_store(
    item_table: pg_sys::Oid,
    id_attnum: i16,
    embedding_attnum: i16,
    item_id: &str,
    embedding: AnyElement,
) -> bool {
    // SAFETY: the argument's own datum and type, used within this call.
    let value = unsafe { DatumWithOid::new(embedding.datum(), embedding.oid()) };
    spi::pinned_search_path(|| {
        spi::items::require_worker()?;
        spi::items::store_embedding(item_table, id_attnum, embedding_attnum, item_id, value)
    })
    .or_raise()
}
