//! What the embedding worker reads from and writes to an item table: the text of one item, a
//! row lock on it, and its new embedding. The extension runs these statements as the table's
//! owner in a restricted security context after checking the worker's own column privileges
//! (src/worker.rs), so that a tenant's code on its table (triggers, row-level security policies,
//! generated columns) runs with the tenant's rights and never with the worker's, which reach
//! every registered table.
//!
//! Columns are named by their attribute numbers in the catalog (`corpus.embedding_slots`) and
//! turned into their current names at each call: a renamed column never breaks the worker.

use crate::sql::{ident, qualified};
use crate::{CoreError, SqlState};

/// An item table as the statements name it.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemTable {
    pub schema: String,
    pub name: String,
}

impl ItemTable {
    fn sql(&self) -> String {
        qualified(&self.schema, &self.name)
    }

    /// `schema.name` for messages.
    pub fn display(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }
}

/// The text an embedding is computed from: the input columns joined by blank lines (NULLs
/// skipped), for the item whose id equals `$1` (a value of the id column's own type, so that its
/// index serves the lookup). No row: the item is gone.
pub fn text_sql(table: &ItemTable, id_column: &str, input_columns: &[String]) -> String {
    let inputs: Vec<String> = input_columns.iter().map(|c| format!("t.{}", ident(c))).collect();
    format!(
        "SELECT pg_catalog.concat_ws(E'\\n\\n', {}) FROM {} t WHERE t.{} = $1",
        inputs.join(", "),
        table.sql(),
        ident(id_column)
    )
}

/// Lock the item's row (before its queue row: the order of a concurrent writer's trigger).
pub fn lock_sql(table: &ItemTable, id_column: &str) -> String {
    format!("SELECT 1 FROM {} t WHERE t.{} = $1 FOR UPDATE", table.sql(), ident(id_column))
}

/// Store an embedding (`$1`) for the item whose id equals `$2`.
pub fn store_sql(table: &ItemTable, embedding_column: &str, id_column: &str) -> String {
    format!("UPDATE {} t SET {} = $1 WHERE t.{} = $2", table.sql(), ident(embedding_column), ident(id_column))
}

/// 42501: the calling role lacks `privilege` on `column`.
pub fn column_denied(table: &ItemTable, column: &str, privilege: &str) -> CoreError {
    CoreError::new(
        SqlState::InsufficientPrivilege,
        format!("permission denied for column \"{column}\" of table {}", table.display()),
        format!(
            "The embedding worker needs SELECT on the id and input columns and UPDATE on the embedding column: \
             GRANT {privilege} ({}) ON {} TO <worker role>;",
            ident(column),
            table.sql()
        ),
    )
    .with_detail(format!("{privilege} on column \"{column}\" is required."))
}

/// 42501: row-level security applies to the calling role on the table, so a worker run by it
/// would embed (or skip) only the rows its policies show.
pub fn row_security_denied(table: &ItemTable) -> CoreError {
    CoreError::new(
        SqlState::InsufficientPrivilege,
        format!("row-level security applies to the embedding worker on table {}", table.display()),
        format!(
            "The worker reads and writes every queued item of the tables it serves, as the table's owner: \
             exempt the worker's role (ALTER ROLE <worker role> BYPASSRLS), and do not force row-level \
             security on the owner (ALTER TABLE {} NO FORCE ROW LEVEL SECURITY).",
            table.sql()
        ),
    )
    .with_detail("Items its policies hide would stay stale forever, and claims would hand out their text.")
}

/// 42703: a column the slot names by attribute number is gone (dropped with CASCADE, which also
/// dropped the slot's trigger).
pub fn column_gone(table: &ItemTable, attnum: i16) -> CoreError {
    CoreError::new(
        SqlState::UndefinedColumn,
        format!("column {attnum} of table {} registered for embeddings no longer exists", table.display()),
        "Drop the sources of this table and register them again with the columns it has now \
         (corpus.corpus_drop_source, corpus.corpus_add_source).",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> ItemTable {
        ItemTable { schema: "le\"gal".into(), name: "chunks; DROP TABLE x".into() }
    }

    #[test]
    fn every_name_is_quoted() {
        let sql = text_sql(&table(), "i\"d", &["body".into(), "ti\"tle".into()]);
        assert_eq!(
            sql,
            "SELECT pg_catalog.concat_ws(E'\\n\\n', t.\"body\", t.\"ti\"\"tle\") \
             FROM \"le\"\"gal\".\"chunks; DROP TABLE x\" t WHERE t.\"i\"\"d\" = $1"
        );
        assert_eq!(
            store_sql(&table(), "e', 1); --", "id"),
            "UPDATE \"le\"\"gal\".\"chunks; DROP TABLE x\" t SET \"e', 1); --\" = $1 WHERE t.\"id\" = $2"
        );
        assert!(lock_sql(&table(), "id").ends_with("WHERE t.\"id\" = $1 FOR UPDATE"));
    }

    #[test]
    fn errors_name_the_grant_to_give() {
        let e = column_denied(&table(), "body", "SELECT");
        assert_eq!(e.state, SqlState::InsufficientPrivilege);
        assert!(e.hint.contains("GRANT SELECT (\"body\") ON \"le\"\"gal\".\"chunks; DROP TABLE x\""), "{}", e.hint);
        assert_eq!(row_security_denied(&table()).state, SqlState::InsufficientPrivilege);
        assert_eq!(column_gone(&table(), 3).state, SqlState::UndefinedColumn);
    }
}
