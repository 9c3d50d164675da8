//! The re-embed trigger: one function of the library, `corpus._embedding_trigger(column)`, fired
//! after every write of a slot's table (its partitions and Citus shards included) with the
//! slot's registered embedding column as argument. It reads the slot and the columns' current
//! names once per statement, finds them in the written relation by name, compares old and new
//! values byte for byte (no operator a table owner wrote runs), and changes the queue by the
//! core's rule (`pg_corpus_core::slots::row_steps`).
//!
//! It is SECURITY DEFINER (writers of the table need no rights on the queue) with
//! `SET search_path = pg_catalog, pg_temp` in its declaration. A write never fails because of it: a slot that is gone, or whose columns have
//! no live column of a fitting type, makes it do nothing (the health check reports the slot).

use std::ffi::CStr;

use pg_corpus_core::slots::{self, RowFacts, RowWrite};
use pg_corpus_core::{CoreError, SqlState};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgMemoryContexts;

use crate::error::OrRaise;
use crate::spi::slots::{self as spi_slots, TriggerSlot};

/// The slot as the written relation sees it, for one statement.
struct Statement {
    registered: String,
    slot: Option<Resolved>,
    announced: bool,
}

struct Resolved {
    slot: TriggerSlot,
    /// the columns in the written relation
    id: Column,
    embedding: Column,
    inputs: Vec<Column>,
}

/// A column of the written relation: its number and what comparing its values needs.
struct Column {
    attnum: i32,
    typid: pg_sys::Oid,
    len: i16,
    byval: bool,
}

/// The V1 calling-convention record PostgreSQL looks up for `_embedding_trigger_wrapper`.
#[no_mangle]
pub extern "C" fn pg_finfo__embedding_trigger_wrapper() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn _embedding_trigger_wrapper(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the fcinfo PostgreSQL passed to this function.
    let data = unsafe {
        trigger_data(
            fcinfo,
            "corpus._embedding_trigger()",
            "Registering a source with an embedding column puts it on the source's table.",
        )
    };
    // SAFETY: the TriggerData of a trigger call.
    let (event, nargs) = unsafe { ((*data).tg_event, (*(*data).tg_trigger).tgnargs) };
    let op = event & pg_sys::TRIGGER_EVENT_OPMASK;
    let row = event & pg_sys::TRIGGER_EVENT_ROW != 0;
    let after = event & (pg_sys::TRIGGER_EVENT_BEFORE | pg_sys::TRIGGER_EVENT_INSTEAD) == 0;
    if !after || row == (op == pg_sys::TRIGGER_EVENT_TRUNCATE) || nargs != 1 {
        crate::error::raise(CoreError::new(
            SqlState::FeatureNotSupported,
            "corpus._embedding_trigger() must fire AFTER each row of INSERT, UPDATE and DELETE, or AFTER a TRUNCATE statement, with one argument".to_string(),
            "Registering a source with an embedding column creates its triggers; drop a trigger created otherwise.",
        ))
    }
    // bulk loads may defer the queue (a setting only superusers and roles granted SET on it change)
    if crate::gucs::embedding_queue_deferred() {
        return pg_sys::Datum::from(0);
    }
    // SAFETY: a trigger call's TriggerData, FmgrInfo and relation are valid for this call; the
    // statement's state lives in fn_extra, allocated in the FmgrInfo's context.
    unsafe {
        let statement = statement(fcinfo, data);
        fire(data, statement).or_raise();
    }
    // a null pointer (not SQL NULL): what an AFTER trigger returns
    pg_sys::Datum::from(0)
}

/// The TriggerData of a call by the trigger manager; any other call of `function` is refused
/// (0A000) with `hint`.
///
/// # Safety
/// `fcinfo` is the one PostgreSQL passed to the calling function.
pub unsafe fn trigger_data(fcinfo: pg_sys::FunctionCallInfo, function: &str, hint: &str) -> *mut pg_sys::TriggerData {
    // SAFETY: `context` is a TriggerData node exactly when the trigger manager calls.
    let data = unsafe {
        let context = (*fcinfo).context;
        (!context.is_null() && (*context).type_ == pg_sys::NodeTag::T_TriggerData)
            .then_some(context as *mut pg_sys::TriggerData)
    };
    match data {
        Some(data) => data,
        None => crate::error::raise(CoreError::new(
            SqlState::FeatureNotSupported,
            format!("{function} can only be called as a trigger"),
            hint,
        )),
    }
}

/// The statement's slot, resolved at its first row and kept in `fn_extra` (the FmgrInfo lives
/// for one statement's execution).
unsafe fn statement(fcinfo: pg_sys::FunctionCallInfo, data: *mut pg_sys::TriggerData) -> &'static mut Statement {
    unsafe {
        let flinfo = (*fcinfo).flinfo;
        if (*flinfo).fn_extra.is_null() {
            let trigger = &*(*data).tg_trigger;
            let registered = if trigger.tgnargs >= 1 {
                CStr::from_ptr(*trigger.tgargs).to_string_lossy().into_owned()
            } else {
                String::new()
            };
            let name = CStr::from_ptr(trigger.tgname).to_string_lossy().into_owned();
            let relation = (*data).tg_relation;
            let relid = (*relation).rd_id.to_u32();
            let slot = crate::spi::pinned_search_path(|| spi_slots::trigger_slot(relid, &name, &registered)).or_raise();
            let slot = slot.and_then(|slot| resolve(relation, slot));
            let state = Statement { registered, slot, announced: false };
            let ptr = PgMemoryContexts::For((*flinfo).fn_mcxt).leak_and_drop_on_delete(state);
            (*flinfo).fn_extra = ptr.cast();
        }
        &mut *((*flinfo).fn_extra as *mut Statement)
    }
}

/// The slot's columns in the written relation (a partition or shard may number them otherwise).
unsafe fn resolve(relation: pg_sys::Relation, slot: TriggerSlot) -> Option<Resolved> {
    unsafe {
        let desc = (*relation).rd_att;
        let number = |name: &str| -> Option<Column> {
            let name = std::ffi::CString::new(name).ok()?;
            let n = pg_sys::SPI_fnumber(desc, name.as_ptr());
            (n > 0).then(|| column(desc, n))
        };
        let id = number(&slot.id)?;
        let embedding = number(&slot.embedding)?;
        let inputs = slot.inputs.iter().map(|c| number(c)).collect::<Option<Vec<Column>>>()?;
        Some(Resolved { slot, id, embedding, inputs })
    }
}

/// Column `attnum` of a relation's TupleDesc (1-based, valid).
unsafe fn column(desc: pg_sys::TupleDesc, attnum: i32) -> Column {
    // SAFETY: a live TupleDesc, borrowed (not freed) for this call.
    unsafe {
        let desc = pgrx::PgTupleDesc::from_pg_unchecked(desc);
        let a = desc.get((attnum - 1) as usize).expect("an attribute of the relation");
        Column { attnum, typid: a.atttypid, len: a.attlen, byval: a.attbyval }
    }
}

/// A column's value in a tuple (None: NULL).
unsafe fn value(tuple: pg_sys::HeapTuple, desc: pg_sys::TupleDesc, attnum: i32) -> Option<pg_sys::Datum> {
    let mut null = false;
    let datum = unsafe { pg_sys::heap_getattr(tuple, attnum, desc, &mut null) };
    (!null).then_some(datum)
}

/// Whether two values of a column are the same bytes (variable-length ones after detoasting).
unsafe fn same(a: Option<pg_sys::Datum>, b: Option<pg_sys::Datum>, attr: &Column) -> bool {
    let (Some(a), Some(b)) = (a, b) else { return a.is_none() && b.is_none() };
    unsafe {
        if attr.byval {
            return a == b;
        }
        if attr.len > 0 {
            let n = attr.len as usize;
            return std::slice::from_raw_parts(a.cast_mut_ptr::<u8>(), n)
                == std::slice::from_raw_parts(b.cast_mut_ptr::<u8>(), n);
        }
        if attr.len == -2 {
            return CStr::from_ptr(a.cast_mut_ptr()) == CStr::from_ptr(b.cast_mut_ptr());
        }
        let bytes = |d: pg_sys::Datum| {
            let v = pg_sys::pg_detoast_datum_packed(d.cast_mut_ptr());
            std::slice::from_raw_parts(pgrx::vardata_any(v) as *const u8, pgrx::varsize_any_exhdr(v))
        };
        bytes(a) == bytes(b)
    }
}

unsafe fn fire(data: *mut pg_sys::TriggerData, statement: &mut Statement) -> Result<(), CoreError> {
    let Some(r) = statement.slot.as_ref() else { return Ok(()) };
    unsafe {
        let event = (*data).tg_event;
        let op = event & pg_sys::TRIGGER_EVENT_OPMASK;
        if op == pg_sys::TRIGGER_EVENT_TRUNCATE {
            return spi_slots::forget_all(r.slot.slot_table, &statement.registered);
        }
        let desc = (*(*data).tg_relation).rd_att;
        let (old, new) = match op {
            pg_sys::TRIGGER_EVENT_INSERT => (None, Some((*data).tg_trigtuple)),
            pg_sys::TRIGGER_EVENT_DELETE => (Some((*data).tg_trigtuple), None),
            _ => (Some((*data).tg_trigtuple), Some((*data).tg_newtuple)),
        };
        let get = |t: Option<pg_sys::HeapTuple>, c: &Column| t.and_then(|t| value(t, desc, c.attnum));
        let differs = |c: &Column| !same(get(old, c), get(new, c), c);
        let write = match op {
            pg_sys::TRIGGER_EVENT_INSERT => RowWrite::Insert,
            pg_sys::TRIGGER_EVENT_DELETE => RowWrite::Delete,
            _ => RowWrite::Update,
        };
        let both = write == RowWrite::Update;
        let facts = RowFacts {
            write,
            id_changed: both && differs(&r.id),
            old_embedding_null: old.is_some() && get(old, &r.embedding).is_none(),
            new_embedding_null: new.is_some() && get(new, &r.embedding).is_none(),
            embedding_changed: both && differs(&r.embedding),
            inputs_changed: both && r.inputs.iter().any(differs),
        };
        let mut queued = false;
        for step in slots::row_steps(&facts) {
            let row = if step == slots::QueueStep::ForgetOld { old } else { new };
            let Some(id) = get(row, &r.id) else { continue };
            queued |= spi_slots::apply(step, r.slot.slot_table, &statement.registered, id, r.id.typid)?;
        }
        if queued && r.slot.announce && !statement.announced {
            spi_slots::announce(&r.slot.table_text)?;
            statement.announced = true;
        }
        Ok(())
    }
}

/// Put the library's trigger on every slot's table in place of the functions an older release
/// generated per slot (run once by the upgrade from 0.3.0, which declares and drops it).
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn _embedding_triggers_renew() -> i64 {
    crate::spi::pinned_search_path(spi_slots::renew_triggers).or_raise()
}
