//! The only module that talks to SPI, split by domain: [`catalog`] (corpus definitions and
//! their per-backend cache), [`search`] (the search engine's executor), [`stats`] (lexical
//! statistics), [`eval`] (gold sets and runs) and [`health`] (the health check's reads). Every
//! query it runs was planned by the core (`pg_corpus_core::plan`, `::health`) or is a fixed
//! catalog query; values always travel as parameters.

pub mod access;
pub mod audit;
pub mod catalog;
pub mod eval;
pub mod health;
pub mod items;
pub mod queue;
pub mod registry;
pub mod search;
pub mod slots;
pub mod stats;

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CString;
use std::rc::Rc;

use pg_corpus_core::sql::Param;
use pg_corpus_core::{CoreError, SqlState};
use pgrx::datum::DatumWithOid;
use pgrx::pg_sys::{self, PgOid};
use pgrx::spi::{OwnedPreparedStatement, Spi};

pub(crate) fn datums(params: &[Param]) -> Vec<DatumWithOid<'static>> {
    params
        .iter()
        .map(|p| match p {
            Param::Text(s) => DatumWithOid::from(s.clone()),
            Param::TextArray(v) => DatumWithOid::from(v.clone()),
            Param::Floats(v) => DatumWithOid::from(v.clone()),
            Param::Int(n) => DatumWithOid::from(*n),
            Param::Float(x) => DatumWithOid::from(*x),
        })
        .collect()
}

/// SPI failures that are not PostgreSQL errors (those propagate as themselves) are bugs of
/// ours; report them with a SQLSTATE that says so instead of a panic.
pub(crate) fn spi_failure(e: pgrx::spi::SpiError) -> CoreError {
    CoreError::new(
        SqlState::ObjectNotInPrerequisiteState,
        format!("pg_corpus internal query failed: {e}"),
        "This is a bug in pg_corpus; please report it with the statement that caused it.",
    )
}

/// Run `f` in a subtransaction of its own, as PL/pgSQL's exception blocks do: an error in it
/// (PostgreSQL's, or `f`'s own raised) rolls back only what `f` did and is the answer, with the
/// memory context and resource owner put back.
pub(crate) fn subtransaction<R>(
    f: impl FnOnce() -> R + std::panic::UnwindSafe,
) -> Result<R, Box<pgrx::pg_sys::panic::CaughtError>> {
    // SAFETY: the subtransaction is ended on both paths, and the memory context and resource
    // owner restored after each.
    unsafe {
        let cxt = pg_sys::CurrentMemoryContext;
        let owner = pg_sys::CurrentResourceOwner;
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        pg_sys::MemoryContextSwitchTo(cxt);
        pgrx::pg_sys::PgTryBuilder::new(|| {
            let r = f();
            pg_sys::ReleaseCurrentSubTransaction();
            pg_sys::MemoryContextSwitchTo(cxt);
            pg_sys::CurrentResourceOwner = owner;
            Ok(r)
        })
        .catch_others(|e| {
            pg_sys::MemoryContextSwitchTo(cxt);
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
            pg_sys::MemoryContextSwitchTo(cxt);
            pg_sys::CurrentResourceOwner = owner;
            Err(Box::new(e))
        })
        .execute()
    }
}

/// The error report of a caught error.
pub(crate) fn caught_report(e: &pgrx::pg_sys::panic::CaughtError) -> &pgrx::pg_sys::panic::ErrorReportWithLevel {
    match e {
        pgrx::pg_sys::panic::CaughtError::PostgresError(r)
        | pgrx::pg_sys::panic::CaughtError::ErrorReport(r)
        | pgrx::pg_sys::panic::CaughtError::RustPanic { ereport: r, .. } => r,
    }
}

/// Saved plans most recently used are kept at most; beyond it all are freed (the search's
/// statements are a few shapes per corpus and strategy).
const MAX_SAVED_PLANS: usize = 512;

thread_local! {
    static PLANS: RefCell<HashMap<(String, Vec<u32>), Rc<OwnedPreparedStatement>>> = RefCell::new(HashMap::new());
}

/// Run a read-only statement pg_corpus built, through a saved plan kept per backend for its SQL
/// text and parameter types (what PL/pgSQL does for each of its statements): parse analysis is
/// done once, and PostgreSQL's plan cache re-plans after DDL, ANALYZE or a change of role or
/// row-level security. It chooses custom or generic plans by `plan_cache_mode`; the search's
/// executor forces custom plans for subplans and fetches, whose plans follow their values. Nearly all the time of a search of
/// an empty corpus was parsing, analysing and planning its subplans (docs/search-engine.md).
pub(crate) fn select_saved<R>(
    sql: &str,
    args: &[DatumWithOid<'_>],
    read: impl FnOnce(pgrx::spi::SpiTupleTable<'_>) -> pgrx::spi::SpiResult<R>,
) -> Result<R, CoreError> {
    let plan = saved_plan(sql, args).map_err(spi_failure)?;
    Spi::connect(|client| read(client.select(&*plan, None, args)?)).map_err(spi_failure)
}

/// Run a statement that writes through a saved plan, as [`select_saved`] does for reads: for
/// statements run once per row (the re-embed trigger's). Returns the rows it processed.
pub(crate) fn write_saved(sql: &str, args: &[DatumWithOid<'_>]) -> Result<usize, CoreError> {
    let plan = saved_plan(sql, args).map_err(spi_failure)?;
    Spi::connect_mut(|client| Ok(client.update(&*plan, None, args)?.len())).map_err(spi_failure)
}

/// The saved plan of `sql` for the types of `args` (prepared and kept on first use).
fn saved_plan(sql: &str, args: &[DatumWithOid<'_>]) -> pgrx::spi::SpiResult<Rc<OwnedPreparedStatement>> {
    let types: Vec<u32> = args.iter().map(|a| a.oid().to_u32()).collect();
    let key = (sql.to_string(), types);
    if let Some(plan) = PLANS.with(|p| p.borrow().get(&key).cloned()) {
        return Ok(plan);
    }
    let oids: Vec<PgOid> = args.iter().map(|a| PgOid::from_untagged(a.oid())).collect();
    let plan = Rc::new(Spi::connect(|client| client.prepare(sql, &oids).map(|p| p.keep()))?);
    PLANS.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() >= MAX_SAVED_PLANS {
            p.clear();
        }
        p.insert(key, plan.clone());
    });
    Ok(plan)
}

/// Run `f` with `search_path = pg_catalog, pg_temp`: the SQL pg_corpus generates names its own
/// and pgvector's objects schema-qualified and relies on built-in operators (`=`, `@@`, casts),
/// which a caller's search_path must not be able to replace (a hostile `public.=` could
/// otherwise widen the corpus predicate). Every SQL-visible entry point runs under it. Settings
/// `f` changes with [`set_option`] are restored with it.
pub fn pinned_search_path<T>(f: impl FnOnce() -> T) -> T {
    with_settings(&[("search_path", "pg_catalog, pg_temp".to_string())], f)
}

/// Change a setting for the rest of the innermost [`with_settings`] (it restores it).
pub(crate) fn set_option(name: &str, value: &str) {
    let (Ok(name), Ok(value)) = (CString::new(name), CString::new(value)) else {
        return;
    };
    // SAFETY: valid C strings; GUC_ACTION_SAVE records the old value in the current nest level.
    unsafe {
        pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
    }
}

/// A setting's current value (None when no such setting exists yet).
pub(crate) fn get_option(name: &str) -> Option<String> {
    let name = CString::new(name).ok()?;
    // SAFETY: valid C string; missing_ok returns NULL for an unknown name.
    unsafe {
        let v = pg_sys::GetConfigOption(name.as_ptr(), true, false);
        (!v.is_null()).then(|| std::ffi::CStr::from_ptr(v).to_string_lossy().into_owned())
    }
}

/// Run `f` with configuration settings changed, and restore them afterwards — the mechanism
/// PostgreSQL itself uses for a function's `SET` clause, so nothing leaks into the caller's
/// session or transaction (an error rolls the nest level back with the transaction).
pub fn with_settings<T>(settings: &[(&str, String)], f: impl FnOnce() -> T) -> T {
    // SAFETY: paired with AtEOXact_GUC below; an error unwinds through the transaction's abort,
    // which pops every nest level.
    let nest = unsafe { pg_sys::NewGUCNestLevel() };
    for (name, value) in settings {
        set_option(name, value);
    }
    let out = f();
    unsafe { pg_sys::AtEOXact_GUC(true, nest) };
    out
}

/// Run one statement that writes (not read-only: a hot standby refuses it), and read what it
/// returns.
pub(crate) fn write<R>(
    sql: &str,
    args: &[DatumWithOid<'_>],
    read: impl FnOnce(pgrx::spi::SpiTupleTable<'_>) -> Result<R, pgrx::spi::SpiError>,
) -> Result<R, CoreError> {
    Spi::connect_mut(|client| read(client.update(sql, None, args)?)).map_err(spi_failure)
}

/// An interval argument's text (as the session shows it) and its sign against zero (None:
/// NULL): what the functions that take a duration check and quote in their errors.
pub(crate) fn interval_sign(
    value: Option<pgrx::datum::Interval>,
) -> Result<Option<(String, std::cmp::Ordering)>, CoreError> {
    let Some(value) = value else { return Ok(None) };
    let (text, sign) = Spi::connect(|client| {
        client
            .select(
                "SELECT $1::interval::text, pg_catalog.interval_cmp($1::interval, interval '0')",
                Some(1),
                &[DatumWithOid::from(value)],
            )?
            .first()
            .get_two::<String, i32>()
    })
    .map_err(spi_failure)?;
    Ok(Some((text.unwrap_or_default(), sign.unwrap_or(0).cmp(&0))))
}

/// Whether this transaction can write (not a standby, not read-only).
pub(crate) fn can_write() -> bool {
    // SAFETY: reads of backend-global state.
    unsafe { !pg_sys::RecoveryInProgress() && !pg_sys::XactReadOnly }
}

/// 25006 unless this transaction can write: a function that changes the catalog, asked on a
/// hot standby or in a read-only transaction.
pub(crate) fn require_writable(function: &str) -> Result<(), CoreError> {
    if can_write() {
        return Ok(());
    }
    Err(CoreError::new(
        SqlState::ReadOnlySqlTransaction,
        format!("cannot execute {function} in a read-only transaction"),
        "Run it on the primary, in a transaction that may write.",
    ))
}

/// Whether the installed catalog has this function (`to_regprocedure` of its signature): the
/// library serves a database still at an older release until it is updated, so what a newer
/// release added is asked for first.
pub(crate) fn has_function(signature: &str) -> bool {
    select_bool("SELECT pg_catalog.to_regprocedure($1) IS NOT NULL", &[DatumWithOid::from(signature)])
}

/// A one-value boolean query, read-only (false for no row or NULL; Spi::get_one's statements
/// are not read-only, which a hot standby refuses).
pub(crate) fn select_bool(sql: &str, args: &[DatumWithOid<'_>]) -> bool {
    Spi::connect(|client| client.select(sql, Some(1), args)?.first().get_one::<bool>()).ok().flatten().unwrap_or(false)
}

thread_local! {
    /// Facts about tables read in the current whole-database operation ([`with_table_memo`]).
    static TABLE_MEMO: std::cell::RefCell<Option<std::collections::HashMap<String, serde_json::Value>>> =
        const { std::cell::RefCell::new(None) };
}

/// Run `f` (one health check or refresh call) with [`table_memo`] remembering what it read
/// about tables: corpora that share a table ask the same questions of it once. Nested calls
/// share the outer call's memory.
pub fn with_table_memo<T>(f: impl FnOnce() -> T) -> T {
    if TABLE_MEMO.with(|m| m.borrow().is_some()) {
        return f();
    }
    struct Forget;
    impl Drop for Forget {
        fn drop(&mut self) {
            TABLE_MEMO.with(|m| *m.borrow_mut() = None);
        }
    }
    let _forget = Forget;
    TABLE_MEMO.with(|m| *m.borrow_mut() = Some(Default::default()));
    f()
}

/// The value of `key` read by `read` once per [`with_table_memo`] call (every time outside one).
pub fn table_memo(
    key: String,
    read: impl FnOnce() -> Result<serde_json::Value, CoreError>,
) -> Result<serde_json::Value, CoreError> {
    if let Some(hit) = TABLE_MEMO.with(|m| m.borrow().as_ref().and_then(|m| m.get(&key).cloned())) {
        return Ok(hit);
    }
    let v = read()?;
    TABLE_MEMO.with(|m| {
        if let Some(m) = m.borrow_mut().as_mut() {
            m.insert(key, v.clone());
        }
    });
    Ok(v)
}
