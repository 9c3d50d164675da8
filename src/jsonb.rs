//! jsonb as text (arguments and results), for reading with `pg_corpus_core::json::parse`'s bound on nesting (pgrx's
//! `JsonB` parses with serde_json's limit of 128 levels and panics beyond: XX000).

use pgrx::callconv::{Arg, ArgAbi, BoxRet, FcInfo};
use pgrx::datum::Datum;
use pgrx::{impl_sql_translatable, pg_sys, FromDatum, IntoDatum};

/// jsonb's text form (`jsonb_out`), unparsed.
pub struct JsonbText(pub String);

impl JsonbText {
    /// The value, at most `pg_corpus_core::json::MAX_DEPTH` levels deep (else 54001 naming `what`).
    pub fn parse(&self, what: &str) -> Result<serde_json::Value, pg_corpus_core::CoreError> {
        pg_corpus_core::json::parse(&self.0, what)
    }
}

impl FromDatum for JsonbText {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _typoid: pg_sys::Oid) -> Option<Self> {
        if is_null {
            return None;
        }
        // SAFETY: `datum` is a jsonb (the argument's or column's declared type); jsonb_out
        // returns a palloc'd C string, copied and freed here.
        unsafe {
            let text = pgrx::direct_function_call::<&core::ffi::CStr>(pg_sys::jsonb_out, &[Some(datum)])?;
            let owned = text.to_string_lossy().into_owned();
            pg_sys::pfree(text.as_ptr() as *mut core::ffi::c_void);
            Some(JsonbText(owned))
        }
    }
}

impl IntoDatum for JsonbText {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        let text = std::ffi::CString::new(self.0).ok()?;
        // SAFETY: jsonb_in parses a C string (and raises a PostgreSQL error on bad input).
        unsafe {
            pgrx::direct_function_call::<pg_sys::Datum>(pg_sys::jsonb_in, &[Some(pg_sys::Datum::from(text.as_ptr()))])
        }
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

unsafe impl<'fcx> ArgAbi<'fcx> for JsonbText {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        unsafe { arg.unbox_arg_using_from_datum().expect("a non-null jsonb argument") }
    }
}

// SAFETY: the datum returned is the jsonb into_datum built (or NULL), as the function declares.
unsafe impl BoxRet for JsonbText {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
        match self.into_datum() {
            Some(datum) => unsafe { fcinfo.return_raw_datum(datum) },
            None => fcinfo.return_null(),
        }
    }
}

impl_sql_translatable!(JsonbText, "jsonb");
