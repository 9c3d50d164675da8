//! What a search reads of pg_corpus' side tables on its caller's behalf (sql/access.sql): the
//! statistics of its own query keys, the champion lists of its common keys and the queue state
//! of its own hits, read with the rights of the role that owns those tables. A role reads the
//! tables directly only for what it may read in full; through a search it learns nothing about
//! items its own query did not find, beyond the document frequencies of its own keys.

use pg_corpus_core::model::Corpus;
use pg_corpus_core::statistics::{statistics_columns, statistics_denied};
use pg_corpus_core::{CoreError, SqlState};
use pgrx::pg_sys;

/// The role owning `corpus.lexical_stats` (the extension's side tables).
fn side_table_owner() -> Result<pg_sys::Oid, CoreError> {
    table_owner(c"lexical_stats")
}

/// Run `f` as the owner of `corpus.search_audit` (which a DBA may have given to another role
/// than the side tables'), in a restricted security context (see [`as_side_table_owner`]).
pub(crate) fn as_audit_log_owner<R>(f: impl FnOnce() -> Result<R, CoreError>) -> Result<R, CoreError> {
    as_role_restricted(table_owner(c"search_audit")?, f)
}

/// The role owning table `corpus.<name>`.
fn table_owner(name: &std::ffi::CStr) -> Result<pg_sys::Oid, CoreError> {
    let missing = || {
        CoreError::new(
            SqlState::ObjectNotInPrerequisiteState,
            format!("pg_corpus is not installed completely: corpus.{} does not exist", name.to_string_lossy()),
            "Re-create the extension: DROP EXTENSION pg_corpus; CREATE EXTENSION pg_corpus;",
        )
    };
    // SAFETY: catalog lookups by name and OID; the relcache entry is released before returning.
    unsafe {
        let ns = pg_sys::get_namespace_oid(c"corpus".as_ptr(), true);
        if ns == pg_sys::InvalidOid {
            return Err(missing());
        }
        let relid = pg_sys::get_relname_relid(name.as_ptr(), ns);
        if relid == pg_sys::InvalidOid {
            return Err(missing());
        }
        let rel = pg_sys::RelationIdGetRelation(relid);
        if rel.is_null() {
            return Err(missing());
        }
        let owner = (*(*rel).rd_rel).relowner;
        pg_sys::RelationClose(rel);
        Ok(owner)
    }
}

/// Run `f` as the owner of the side tables, in a restricted security context (as PostgreSQL
/// runs maintenance operations: no temporary objects, no changes of session state), and put
/// the caller's identity back however `f` ends (an error also ends the transaction or
/// subtransaction, which restores it too).
pub(crate) fn as_side_table_owner<R>(f: impl FnOnce() -> Result<R, CoreError>) -> Result<R, CoreError> {
    as_role_restricted(side_table_owner()?, f)
}

/// Run `f` as `role` in a restricted security context (see [`as_side_table_owner`]).
pub(crate) fn as_role_restricted<R>(
    role: pg_sys::Oid,
    f: impl FnOnce() -> Result<R, CoreError>,
) -> Result<R, CoreError> {
    let (mut user, mut context) = (pg_sys::InvalidOid, 0);
    // SAFETY: reads the current user and security context.
    unsafe { pg_sys::GetUserIdAndSecContext(&mut user, &mut context) };
    struct Restore(pg_sys::Oid, i32);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: puts back the identity read above.
            unsafe { pg_sys::SetUserIdAndSecContext(self.0, self.1) };
        }
    }
    let _restore = Restore(user, context);
    let restricted = (pg_sys::SECURITY_LOCAL_USERID_CHANGE | pg_sys::SECURITY_RESTRICTED_OPERATION) as i32;
    // SAFETY: switches to an existing role for the statements of `f` only (see Restore).
    unsafe { pg_sys::SetUserIdAndSecContext(role, context | restricted) };
    // Settings the other role's code changes (a tenant's trigger running `SET search_path` or
    // set_config(..., false)) must not outlive it in the caller's session: a nest level of its
    // own, rolled back, as PostgreSQL ends REFRESH MATERIALIZED VIEW and index builds; the
    // search_path pinned inside it.
    // SAFETY: paired with AtEOXact_GUC below; an error unwinds through the transaction's abort,
    // which pops every nest level.
    let nest = unsafe { pg_sys::NewGUCNestLevel() };
    super::set_option("search_path", "pg_catalog, pg_temp");
    let out = f();
    unsafe { pg_sys::AtEOXact_GUC(false, nest) };
    out
}

/// Whether the current role holds SELECT on `table` (the whole table, or this column).
fn may_select(table: pg_sys::Oid, column: &str) -> bool {
    let Ok(name) = std::ffi::CString::new(column) else { return false };
    // SAFETY: ACL checks by OID; `is_missing` makes a dropped relation an answer, not an error.
    unsafe {
        let user = pg_sys::GetUserId();
        let mut missing = false;
        let whole = pg_sys::pg_class_aclcheck_ext(table, user, pg_sys::ACL_SELECT as pg_sys::AclMode, &mut missing);
        if missing {
            return false;
        }
        if whole == pg_sys::AclResult::ACLCHECK_OK {
            return true;
        }
        let attnum = pg_sys::get_attnum(table, name.as_ptr());
        attnum != pg_sys::InvalidAttrNumber as i16
            && pg_sys::pg_attribute_aclcheck(table, attnum, user, pg_sys::ACL_SELECT as pg_sys::AclMode)
                == pg_sys::AclResult::ACLCHECK_OK
    }
}

/// A search may read a corpus' statistics for the current role when it may read every
/// source's columns they are computed from (42501 naming the first it may not).
pub(crate) fn check_may_read_statistics(corpus: &Corpus) -> Result<(), CoreError> {
    for needed in statistics_columns(corpus) {
        let table = pg_sys::Oid::from(needed.table as u32);
        if let Some(column) = needed.columns.iter().find(|c| !may_select(table, c)) {
            return Err(statistics_denied(&corpus.name, &needed, column));
        }
    }
    Ok(())
}

/// Whether row-level security hides rows of any of `tables` from the current role.
pub(crate) fn row_security_active(tables: &[i64]) -> bool {
    tables.iter().any(|&t| {
        // SAFETY: checks by OID with noError (a missing relation reads as no row security).
        let r = unsafe { pg_sys::check_enable_rls(pg_sys::Oid::from(t as u32), pg_sys::InvalidOid, true) };
        r as u32 == pg_sys::CheckEnableRlsResult::RLS_ENABLED
    })
}
