//! pg_corpus: hybrid retrieval inside PostgreSQL with corpus isolation.
//!
//! This crate is the thin pgrx layer: SQL-visible functions turn their arguments into calls of
//! the pgrx-free core (`pg_corpus_core`) and run the SQL it plans through `spi`, the only module
//! that talks to SPI.

// A set-returning function's type names each of its columns (pgrx's `TableIterator` of
// `name!(...)` tuples): long by nature, and read where it is declared.
#![allow(clippy::type_complexity)]

use pgrx::prelude::*;

mod bm25_index;
mod citus;
mod compat;
mod content;
mod error;
mod eval;
mod gucs;
mod health;
mod jsonb;
mod lexical;
mod progress;
mod queue;
mod reanalyze;
mod registry;
mod regtypes;
mod search;
mod spi;
mod trigger;
mod tune;
mod vector;

::pgrx::pg_module_magic!(name, version);

// Hand-written SQL: the catalog tables, their privileges and the definition functions.
pgrx::extension_sql_file!("../sql/catalog.sql", name = "catalog", bootstrap);
pgrx::extension_sql_file!("../sql/lexical.sql", name = "lexical", requires = ["catalog"]);

pgrx::extension_sql_file!("../sql/eval.sql", name = "eval", requires = ["catalog"]);
pgrx::extension_sql_file!("../sql/embedding.sql", name = "embedding", requires = ["catalog"]);
pgrx::extension_sql_file!("../sql/access.sql", name = "access", requires = ["lexical", "embedding"]);
pgrx::extension_sql_file!("../sql/bm25.sql", name = "bm25", requires = ["lexical", lexical::_bm25_document_text]);
pgrx::extension_sql_file!("../sql/bm25_index.sql", name = "bm25_index", requires = ["bm25"]);
pgrx::extension_sql!(
    "CREATE FUNCTION corpus._catalog_changed() RETURNS trigger
         LANGUAGE c AS 'MODULE_PATHNAME', '_catalog_changed_wrapper';
     CREATE TRIGGER definitions_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON corpus.corpora
         FOR EACH STATEMENT EXECUTE FUNCTION corpus._catalog_changed();
     CREATE TRIGGER definitions_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON corpus.sources
         FOR EACH STATEMENT EXECUTE FUNCTION corpus._catalog_changed();
     CREATE TRIGGER definitions_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON corpus.edges
         FOR EACH STATEMENT EXECUTE FUNCTION corpus._catalog_changed();",
    name = "catalog_triggers",
    requires = ["catalog"]
);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    gucs::init();
    spi::catalog::init();
}

#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}
