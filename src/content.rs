//! What counts as content in a text (`pg_corpus_core::content`), as the SQL function the
//! searchable contract is written with.

use pgrx::prelude::*;

/// The number of content characters of a text: blank characters (Unicode white space,
/// invisible and control characters) trimmed at both ends, each inner run of white space
/// counted once, inner invisible characters not counted.
#[pg_extern(immutable, strict, parallel_safe)]
fn _content_length(text: &str) -> i32 {
    i32::try_from(pg_corpus_core::content::content_length(text)).unwrap_or(i32::MAX)
}
