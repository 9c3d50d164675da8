//! What counts as content in a text (`pg_corpus_core::content`), as the SQL functions the
//! searchable contract is written with.

use pg_corpus_core::content::{content_prefix_bytes, has_content_length, utf8_prefix};

use crate::lexical::{detoasted_bytes, varlena_bytes};
use pgrx::prelude::*;

/// The number of content characters of a text: blank characters (Unicode white space,
/// invisible and control characters) trimmed at both ends, each inner run of white space
/// counted once, inner invisible characters not counted.
#[pg_extern(immutable, strict, parallel_safe)]
fn _content_length(text: &str) -> i32 {
    i32::try_from(pg_corpus_core::content::content_length(text)).unwrap_or(i32::MAX)
}

pgrx::extension_sql!(
    "-- (what searches ask of every row they consider: it reads a stored text's beginning
-- first, and the rest only when the beginning has too few content characters)
CREATE FUNCTION corpus._has_content(pg_catalog.text, pg_catalog.int4) RETURNS pg_catalog.bool
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', '_has_content';",
    name = "has_content",
    requires = ["catalog"]
);

/// Whether a text holds at least `min_length` content characters
/// (`corpus._has_content(text, min_length)`, the same as `corpus._content_length(text) >=
/// min_length`). A compressed or out-of-line text is read from its beginning
/// ([`content_prefix_bytes`]: decompressing and fetching only that much), and wholly only
/// when its beginning has too few.
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn _has_content(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: a strict function of (text, int4): neither argument is NULL.
    unsafe {
        let args = (*fcinfo).args.as_slice(2);
        let min = i32::from_datum(args[1].value, false).unwrap_or(0);
        let Ok(min) = usize::try_from(min) else {
            return true.into_datum().expect("a bool datum");
        };
        text_has_content(args[0].value, min).into_datum().expect("a bool datum")
    }
}

/// [`_has_content`] over a text datum.
///
/// # Safety
/// `value` must be a non-NULL text datum.
unsafe fn text_has_content(value: pg_sys::Datum, min: usize) -> bool {
    if min == 0 {
        return true;
    }
    unsafe {
        let whole = pg_sys::toast_raw_datum_size(value).saturating_sub(pg_sys::VARHDRSZ);
        let prefix = content_prefix_bytes(min);
        if prefix < whole {
            if let Ok(count) = i32::try_from(prefix) {
                let slice = pg_sys::pg_detoast_datum_slice(value.cast_mut_ptr(), 0, count);
                if has_content_length(utf8_prefix(detoasted_bytes(slice)), min) {
                    return true;
                }
            }
        }
        has_content_length(utf8_prefix(varlena_bytes(value)), min)
    }
}

#[no_mangle]
pub extern "C" fn pg_finfo__has_content() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}
