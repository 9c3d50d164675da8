//! The embedding worker's reads and writes of item tables (pg_corpus_core::items), run as the
//! table's owner in a restricted security context once the calling role's own column privileges
//! have been checked: a tenant's triggers, policies and generated columns on its table then run
//! with the tenant's rights, never with the worker's (which reach every registered table).

use std::ffi::CString;

use pg_corpus_core::items::{self, ItemTable};
use pg_corpus_core::{CoreError, SqlState};
use pgrx::datum::DatumWithOid;
use pgrx::pg_sys;
use pgrx::spi::Spi;

use super::access::as_role_restricted;
use super::spi_failure;

/// An item table, its owner and the current names and types of the columns a slot names by
/// attribute number.
struct Opened {
    oid: pg_sys::Oid,
    table: ItemTable,
    owner: pg_sys::Oid,
    namespace: pg_sys::Oid,
}

fn open(oid: pg_sys::Oid) -> Result<Opened, CoreError> {
    // SAFETY: relcache lookup by OID, released before returning; names are copied out.
    unsafe {
        let rel = pg_sys::RelationIdGetRelation(oid);
        if rel.is_null() {
            return Err(CoreError::new(
                SqlState::UndefinedTable,
                format!("item table with OID {} does not exist", oid.to_u32()),
                "The table was dropped; its queue entries go with its slot (see corpus.embedding_slots).",
            ));
        }
        let form = (*rel).rd_rel;
        let kind = (*form).relkind as u8;
        if kind != pg_sys::RELKIND_RELATION && kind != pg_sys::RELKIND_PARTITIONED_TABLE {
            pg_sys::RelationClose(rel);
            // (a view's or foreign table's owner is not who the worker's statements may run as:
            // a security_invoker view would then read with its owner's rights)
            return Err(CoreError::new(
                SqlState::DatatypeMismatch,
                format!("relation with OID {} is not a table", oid.to_u32()),
                "Embedding slots are registered on tables and partitioned tables only.",
            ));
        }
        let owner = (*form).relowner;
        let namespace = (*form).relnamespace;
        let name = std::ffi::CStr::from_ptr((*form).relname.data.as_ptr()).to_string_lossy().into_owned();
        let ns = pg_sys::get_namespace_name(namespace);
        pg_sys::RelationClose(rel);
        let schema =
            if ns.is_null() { String::new() } else { std::ffi::CStr::from_ptr(ns).to_string_lossy().into_owned() };
        Ok(Opened { oid, table: ItemTable { schema, name }, owner, namespace })
    }
}

impl Opened {
    /// The current name and type of column `attnum` (42703 when it was dropped).
    fn column(&self, attnum: i16) -> Result<(String, pg_sys::Oid), CoreError> {
        // SAFETY: syscache lookups; missing_ok turns a dropped column into NULL.
        unsafe {
            let name = pg_sys::get_attname(self.oid, attnum, true);
            if name.is_null() || attnum <= 0 {
                return Err(items::column_gone(&self.table, attnum));
            }
            let name = std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned();
            Ok((name, pg_sys::get_atttype(self.oid, attnum)))
        }
    }

    /// 42501 unless the calling role holds `mode` on column `attnum` (or on the whole table).
    fn require(&self, attnum: i16, name: &str, mode: u32, privilege: &str) -> Result<(), CoreError> {
        // SAFETY: ACL checks by OID for the current user.
        let ok = unsafe {
            let user = pg_sys::GetUserId();
            pg_sys::pg_class_aclcheck(self.oid, user, mode as pg_sys::AclMode) == pg_sys::AclResult::ACLCHECK_OK
                || pg_sys::pg_attribute_aclcheck(self.oid, attnum, user, mode as pg_sys::AclMode)
                    == pg_sys::AclResult::ACLCHECK_OK
        };
        if ok {
            Ok(())
        } else {
            Err(items::column_denied(&self.table, name, privilege))
        }
    }

    /// 42501 unless the calling role may use the table's schema; 42704 unless a registered
    /// embedding slot of this table has exactly these columns (the functions serve the queue's
    /// slots, not any table a worker can write to).
    fn require_slot(
        &self,
        id_attnum: i16,
        embedding_attnum: Option<i16>,
        input_attnums: Option<&[i16]>,
    ) -> Result<(), CoreError> {
        // SAFETY: an ACL check by OID for the current user.
        #[cfg(feature = "pg15")]
        let usage = unsafe {
            pg_sys::pg_namespace_aclcheck(self.namespace, pg_sys::GetUserId(), pg_sys::ACL_USAGE as pg_sys::AclMode)
        };
        // SAFETY: as above (PostgreSQL 16 replaced the per-class functions).
        #[cfg(not(feature = "pg15"))]
        let usage = unsafe {
            pg_sys::object_aclcheck(
                pg_sys::NamespaceRelationId,
                self.namespace,
                pg_sys::GetUserId(),
                pg_sys::ACL_USAGE as pg_sys::AclMode,
            )
        };
        if usage != pg_sys::AclResult::ACLCHECK_OK {
            return Err(CoreError::new(
                SqlState::InsufficientPrivilege,
                format!("permission denied for schema {}", self.table.schema),
                format!("GRANT USAGE ON SCHEMA {} TO <worker role>;", pg_corpus_core::sql::ident(&self.table.schema)),
            ));
        }
        let found = Spi::connect(|client| {
            client
                .select(
                    "SELECT EXISTS (SELECT 1 FROM corpus.embedding_slots s, corpus._slot_attnums(s) c
                                     WHERE s.item_table = $1::pg_catalog.oid AND c.id_attnum = $2
                                       AND ($3::pg_catalog.int2 IS NULL OR c.embedding_attnum = $3)
                                       AND ($4::pg_catalog.int2[] IS NULL OR c.input_attnums = $4))",
                    None,
                    &[
                        DatumWithOid::from(self.oid),
                        DatumWithOid::from(id_attnum),
                        DatumWithOid::from(embedding_attnum),
                        DatumWithOid::from(input_attnums.map(|a| a.to_vec())),
                    ],
                )?
                .first()
                .get_one::<bool>()
        })
        .map_err(spi_failure)?;
        if found == Some(true) {
            Ok(())
        } else {
            Err(CoreError::new(
                SqlState::UndefinedObject,
                format!("no registered embedding slot of table {} has these columns", self.table.display()),
                "These functions serve corpus.corpus_embedding_claim and _complete for the slots in corpus.embedding_slots.",
            ))
        }
    }

    /// 42501 when row-level security applies to the calling role on this table, or to its owner
    /// (FORCE ROW LEVEL SECURITY): the statements run as the owner, and rows its policies hide
    /// would read as gone (their queue entries dropped) instead of being embedded.
    fn require_no_row_security(&self) -> Result<(), CoreError> {
        // SAFETY: checks by OID for the current user and for the owner, noError.
        let (caller, owner) = unsafe {
            (
                pg_sys::check_enable_rls(self.oid, pg_sys::InvalidOid, true),
                pg_sys::check_enable_rls(self.oid, self.owner, true),
            )
        };
        let enabled = pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32;
        if caller == enabled || owner == enabled {
            return Err(items::row_security_denied(&self.table));
        }
        Ok(())
    }
}

/// The relations of this node that hold the table's rows, named for the statements: the table
/// itself, or on Citus the shards of a distributed table placed on this node (none on a
/// coordinator without shards; the columns keep their names on the shards).
fn local_relations(t: &Opened) -> Result<Vec<ItemTable>, CoreError> {
    if !super::has_function("corpus._local_relations(regclass)") {
        return Ok(vec![t.table.clone()]); // (a database still at a release before Citus support)
    }
    let oids: Vec<pg_sys::Oid> = Spi::connect(|client| {
        let rows = client.select(
            "SELECT r::pg_catalog.oid FROM corpus._local_relations($1::pg_catalog.oid::pg_catalog.regclass) r",
            None,
            &[DatumWithOid::from(t.oid)],
        )?;
        let mut out = Vec::new();
        for row in rows {
            if let Some(oid) = row.get::<pg_sys::Oid>(1)? {
                out.push(oid);
            }
        }
        Ok(out)
    })
    .map_err(spi_failure)?;
    oids.into_iter().map(|oid| if oid == t.oid { Ok(t.table.clone()) } else { open(oid).map(|o| o.table) }).collect()
}

/// The first answer of `f` over the relations that hold the table's rows (the item is in one
/// of them): the table itself, or this node's shards of a distributed table.
fn in_first_relation<T>(
    relations: &[ItemTable],
    mut f: impl FnMut(&ItemTable) -> Result<Option<T>, CoreError>,
) -> Result<Option<T>, CoreError> {
    for rel in relations {
        if let Some(v) = f(rel)? {
            return Ok(Some(v));
        }
    }
    Ok(None)
}

/// `item_id` as a value of the id column's type (its input function: an id that is not one
/// raises that type's own error, e.g. 22P02).
fn id_value(type_oid: pg_sys::Oid, item_id: &str) -> Result<DatumWithOid<'static>, CoreError> {
    let text = CString::new(item_id).map_err(|_| {
        CoreError::new(
            SqlState::InvalidParameterValue,
            "item_id contains a NUL character",
            "Pass the id as the queue shows it.",
        )
    })?;
    // SAFETY: the type's input function on a valid C string; the datum lives in the current
    // memory context for the statement that uses it.
    unsafe {
        let (mut input, mut ioparam) = (pg_sys::InvalidOid, pg_sys::InvalidOid);
        pg_sys::getTypeInputInfo(type_oid, &mut input, &mut ioparam);
        let datum = pg_sys::OidInputFunctionCall(input, text.as_ptr().cast_mut(), ioparam, -1);
        Ok(DatumWithOid::new(datum, type_oid))
    }
}

/// The text to embed for one item (None: the item is gone). The caller needs SELECT on the id
/// and input columns.
pub fn item_text(
    table: pg_sys::Oid,
    id_attnum: i16,
    input_attnums: &[i16],
    item_id: &str,
) -> Result<Option<String>, CoreError> {
    let t = open(table)?;
    t.require_slot(id_attnum, None, Some(input_attnums))?;
    let (id, id_type) = t.column(id_attnum)?;
    t.require(id_attnum, &id, pg_sys::ACL_SELECT, "SELECT")?;
    let mut inputs = Vec::with_capacity(input_attnums.len());
    for &a in input_attnums {
        let (name, _) = t.column(a)?;
        t.require(a, &name, pg_sys::ACL_SELECT, "SELECT")?;
        inputs.push(name);
    }
    t.require_no_row_security()?;
    let relations = local_relations(&t)?;
    as_role_restricted(t.owner, || {
        in_first_relation(&relations, |rel| {
            let sql = items::text_sql(rel, &id, &inputs);
            // (the id's input function inside: a domain's CHECK is the tenant's code)
            let key = id_value(id_type, item_id)?;
            Spi::connect(|client| {
                let rows = client.select(sql.as_str(), Some(1), &[key])?;
                if rows.is_empty() {
                    Ok(None)
                } else {
                    Ok(Some(rows.first().get_one::<String>()?.unwrap_or_default()))
                }
            })
            .map_err(spi_failure)
        })
    })
}

/// Check the caller may store embeddings in `embedding_attnum` of `table`; the opened table,
/// the id and embedding columns' current names and the id's type.
fn writable(
    table: pg_sys::Oid,
    id_attnum: i16,
    embedding_attnum: i16,
) -> Result<(Opened, String, pg_sys::Oid, String, pg_sys::Oid), CoreError> {
    let t = open(table)?;
    t.require_slot(id_attnum, Some(embedding_attnum), None)?;
    let (id, id_type) = t.column(id_attnum)?;
    let (embedding, embedding_type) = t.column(embedding_attnum)?;
    t.require(id_attnum, &id, pg_sys::ACL_SELECT, "SELECT")?;
    t.require(embedding_attnum, &embedding, pg_sys::ACL_UPDATE, "UPDATE")?;
    t.require_no_row_security()?;
    Ok((t, id, id_type, embedding, embedding_type))
}

/// Lock the item's row for the store that follows (false: the item is gone).
pub fn lock_item(table: pg_sys::Oid, id_attnum: i16, embedding_attnum: i16, item_id: &str) -> Result<bool, CoreError> {
    let (t, id, id_type, _, _) = writable(table, id_attnum, embedding_attnum)?;
    let relations = local_relations(&t)?;
    as_role_restricted(t.owner, || {
        let locked = in_first_relation(&relations, |rel| {
            let sql = items::lock_sql(rel, &id);
            let key = id_value(id_type, item_id)?;
            Spi::connect_mut(|client| Ok((!client.update(sql.as_str(), Some(1), &[key])?.is_empty()).then_some(())))
                .map_err(spi_failure)
        })?;
        Ok(locked.is_some())
    })
}

/// Store `embedding` (a datum of its own type: the column's assignment rules apply) for the
/// item; false when no row has that id.
pub fn store_embedding(
    table: pg_sys::Oid,
    id_attnum: i16,
    embedding_attnum: i16,
    item_id: &str,
    embedding: DatumWithOid<'static>,
) -> Result<bool, CoreError> {
    let (t, id, id_type, column, column_type) = writable(table, id_attnum, embedding_attnum)?;
    if embedding.oid() != column_type {
        return Err(CoreError::new(
            SqlState::DatatypeMismatch,
            format!("the embedding is not of the type of column \"{column}\" of table {}", t.table.display()),
            "Pass a value of the embedding column's own type (pgvector's vector).",
        ));
    }
    let relations = local_relations(&t)?;
    as_role_restricted(t.owner, || {
        let stored = in_first_relation(&relations, |rel| {
            let sql = items::store_sql(rel, &column, &id);
            let key = id_value(id_type, item_id)?;
            // SAFETY: the caller's datum and type, copied for each relation tried.
            let value = unsafe { DatumWithOid::new_from_datum(embedding.datum(), embedding.oid()) };
            Spi::connect_mut(|client| Ok((!client.update(sql.as_str(), None, &[value, key])?.is_empty()).then_some(())))
                .map_err(spi_failure)
        })?;
        Ok(stored.is_some())
    })
}

/// 42501 unless the calling role is an embedding worker: one that may claim work, which is
/// UPDATE on `corpus.embedding_queue` (the documented worker grant). These functions run a
/// tenant's code as the tenant; only the worker's own calls should make it run.
pub fn require_worker() -> Result<(), CoreError> {
    // SAFETY: catalog lookups by name and an ACL check by OID.
    let ok = unsafe {
        let ns = pg_sys::get_namespace_oid(c"corpus".as_ptr(), true);
        let queue =
            if ns == pg_sys::InvalidOid { ns } else { pg_sys::get_relname_relid(c"embedding_queue".as_ptr(), ns) };
        queue != pg_sys::InvalidOid
            && pg_sys::pg_class_aclcheck(queue, pg_sys::GetUserId(), pg_sys::ACL_UPDATE as pg_sys::AclMode)
                == pg_sys::AclResult::ACLCHECK_OK
    };
    if ok {
        Ok(())
    } else {
        Err(CoreError::new(
            SqlState::InsufficientPrivilege,
            "only an embedding worker reads and stores item embeddings this way",
            "Grant the worker role its documented privileges: GRANT SELECT, UPDATE, DELETE ON corpus.embedding_queue TO <worker role>;",
        )
        .with_detail("An embedding worker is a role with UPDATE on corpus.embedding_queue."))
    }
}
