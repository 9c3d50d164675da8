//! Writing the search audit log (sql/catalog.sql `corpus.search_audit`; what a row holds is
//! `pg_corpus_core::audit`). The row is inserted in the caller's transaction with the rights of
//! the extension's owner (callers cannot write the table themselves, so they cannot forge or
//! remove rows); on a hot standby or in a read-only transaction nothing can be written, so the
//! search is not logged and the backend counts it (`skipped`).

use std::sync::atomic::{AtomicU64, Ordering};

use pg_corpus_core::audit::AuditRow;
use pg_corpus_core::CoreError;
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;

use super::spi_failure;

/// Searches of audited corpora this backend could not log (standby, read-only transaction).
static SKIPPED: AtomicU64 = AtomicU64::new(0);

pub(crate) fn skipped() -> u64 {
    SKIPPED.load(Ordering::Relaxed)
}

/// A role's name by OID.
fn role_name(oid: pg_sys::Oid) -> String {
    // SAFETY: the OID is the current or session user's, which exists; noerr = true returns NULL
    // rather than raising for a role dropped meanwhile.
    unsafe {
        let p = pg_sys::GetUserNameFromId(oid, true);
        if p.is_null() {
            return format!("oid {}", oid.to_u32());
        }
        std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Log one search; false when it could not be (and was counted).
pub(crate) fn record(row: &AuditRow) -> Result<bool, CoreError> {
    if !super::can_write() {
        SKIPPED.fetch_add(1, Ordering::Relaxed);
        return Ok(false);
    }
    // SAFETY: reads the current and session user.
    let (role, session) = unsafe { (role_name(pg_sys::GetUserId()), role_name(pg_sys::GetSessionUserId())) };
    let (filters, results, options) = (row.filters.to_string(), row.results.to_string(), row.options.to_string());
    super::access::as_audit_log_owner(|| {
        Spi::connect_mut(|client| {
            client.update(
                "INSERT INTO corpus.search_audit (role, session_role, corpus, function, mode, k, filters, query_hash,
                                                  query_text, results, options, latency_ms)
                 VALUES ($1::text::name, $2::text::name, $3, $4, $5, $6, $7::text::jsonb,
                         encode(sha256(convert_to($8, 'UTF8')), 'hex'), $9, $10::text::jsonb, $11::text::jsonb, $12)",
                None,
                &[
                    DatumWithOid::from(role.as_str()),
                    DatumWithOid::from(session.as_str()),
                    DatumWithOid::from(row.corpus.as_str()),
                    DatumWithOid::from(row.function),
                    DatumWithOid::from(row.mode.as_str()),
                    DatumWithOid::from(row.k),
                    DatumWithOid::from(filters.as_str()),
                    DatumWithOid::from(row.hash_input.as_str()),
                    DatumWithOid::from(row.query_text.as_deref()),
                    DatumWithOid::from(results.as_str()),
                    DatumWithOid::from(options.as_str()),
                    DatumWithOid::from(row.latency_ms),
                ],
            )?;
            Ok::<_, pgrx::spi::SpiError>(())
        })
        .map_err(spi_failure)
    })?;
    Ok(true)
}

/// The audit log of a corpus as the health check reports it: rows, oldest and newest entry, or
/// None when the caller may not read the log.
pub(crate) fn summary(corpus: &str) -> Result<Option<(i64, Option<String>, Option<String>)>, CoreError> {
    Spi::connect(|client| {
        let may = client
            .select("SELECT has_table_privilege('corpus.search_audit', 'SELECT')", None, &[])?
            .first()
            .get_one::<bool>()?
            .unwrap_or(false);
        if !may {
            return Ok(None);
        }
        let t = client
            .select(
                "SELECT count(*), min(logged_at)::text, max(logged_at)::text FROM corpus.search_audit WHERE corpus = $1",
                None,
                &[DatumWithOid::from(corpus)],
            )?
            .first();
        Ok(Some((t.get::<i64>(1)?.unwrap_or(0), t.get::<String>(2)?, t.get::<String>(3)?)))
    })
    .map_err(spi_failure)
}
