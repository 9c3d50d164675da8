//! pgvector's `vector` as a function argument. The `pgvector` crate has no pgrx support, so we
//! read its varlena directly: int32 length header, int16 dim, int16 unused, float4[dim].

use pgrx::callconv::{Arg, ArgAbi};
use pgrx::{impl_sql_translatable, pg_sys, FromDatum};

pub struct Vector(pub Vec<f32>);

impl FromDatum for Vector {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _typoid: pg_sys::Oid) -> Option<Self> {
        if is_null {
            return None;
        }
        unsafe {
            let ptr = pg_sys::pg_detoast_datum(datum.cast_mut_ptr());
            let size = pgrx::varlena::varsize_any(ptr);
            let bytes = ptr as *const u8;
            let dim = bytes.add(4).cast::<i16>().read_unaligned();
            let dim = usize::try_from(dim).unwrap_or(0);
            // A well-formed vector is exactly 8 + 4*dim bytes; refuse anything shorter.
            let dim = if size >= 8 + 4 * dim { dim } else { 0 };
            let data = bytes.add(8).cast::<f32>();
            Some(Vector((0..dim).map(|i| data.add(i).read_unaligned()).collect()))
        }
    }
}

unsafe impl<'fcx> ArgAbi<'fcx> for Vector {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        unsafe { arg.unbox_arg_using_from_datum().expect("a non-null vector argument") }
    }
}

impl_sql_translatable!(Vector, arg_only = "vector");

/// PostgreSQL's `tsvector` as a function argument: the detoasted varlena, read in place by
/// `pg_corpus_core::tsvector` (no copy per row: `_bm25_score` runs for every candidate).
pub struct TsVectorArg {
    ptr: *const u8,
    len: usize,
}

impl TsVectorArg {
    /// The varlena's bytes. They live in the calling expression's memory context, which
    /// outlives the function call the argument was unboxed for.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: ptr/len describe the detoasted datum (see from_polymorphic_datum).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl FromDatum for TsVectorArg {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _typoid: pg_sys::Oid) -> Option<Self> {
        if is_null {
            return None;
        }
        unsafe {
            // a plain datum is returned as it is; a toasted one is detoasted into the current
            // (per-call or per-tuple) memory context
            let ptr = pg_sys::pg_detoast_datum(datum.cast_mut_ptr());
            let len = pgrx::varlena::varsize_any(ptr);
            Some(TsVectorArg { ptr: ptr as *const u8, len })
        }
    }
}

unsafe impl<'fcx> ArgAbi<'fcx> for TsVectorArg {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        unsafe { arg.unbox_arg_using_from_datum().expect("a non-null tsvector argument") }
    }
}

impl_sql_translatable!(TsVectorArg, arg_only = "tsvector");

/// pgvector's `vector` as an argument passed on unchanged (to be stored): its datum, and its
/// dimension read from the header.
pub struct VectorDatum {
    pub datum: pg_sys::Datum,
    pub dimensions: usize,
}

impl FromDatum for VectorDatum {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _typoid: pg_sys::Oid) -> Option<Self> {
        if is_null {
            return None;
        }
        // SAFETY: the datum is a vector (the argument's declared type): its int16 dimension
        // follows the varlena header.
        unsafe {
            let ptr = pg_sys::pg_detoast_datum(datum.cast_mut_ptr());
            let dim = (ptr as *const u8).add(4).cast::<i16>().read_unaligned();
            Some(VectorDatum { datum: pg_sys::Datum::from(ptr), dimensions: usize::try_from(dim).unwrap_or(0) })
        }
    }
}

unsafe impl<'fcx> ArgAbi<'fcx> for VectorDatum {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        unsafe { arg.unbox_arg_using_from_datum().expect("a non-null vector argument") }
    }
}

impl_sql_translatable!(VectorDatum, arg_only = "vector");
