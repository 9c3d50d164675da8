//! `regclass`, `regconfig` and `name` as function arguments and results: the OID of a table or
//! of a text search configuration, resolved by PostgreSQL's input function from the caller's
//! name for it (on the caller's search_path, before the function runs), and an identifier.

use pgrx::callconv::{Arg, ArgAbi, BoxRet, FcInfo};
use pgrx::datum::Datum;
use pgrx::{impl_sql_translatable, pg_sys, FromDatum, IntoDatum};

macro_rules! oid_argument {
    ($name:ident, $sql:literal, $typoid:expr) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name(pub pg_sys::Oid);

        impl $name {
            /// The OID as the int8 the catalog's queries bind it as.
            pub fn as_i64(self) -> i64 {
                i64::from(self.0.to_u32())
            }
        }

        impl FromDatum for $name {
            unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, typoid: pg_sys::Oid) -> Option<Self> {
                // SAFETY: the datum is an OID (the argument's declared type is an OID alias).
                unsafe { pg_sys::Oid::from_polymorphic_datum(datum, is_null, typoid).map($name) }
            }
        }

        impl IntoDatum for $name {
            fn into_datum(self) -> Option<pg_sys::Datum> {
                self.0.into_datum()
            }

            fn type_oid() -> pg_sys::Oid {
                $typoid
            }
        }

        unsafe impl<'fcx> ArgAbi<'fcx> for $name {
            unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
                unsafe { arg.unbox_arg_using_from_datum().expect(concat!("a non-null ", $sql, " argument")) }
            }
        }

        // SAFETY: the datum returned is the OID, as the function declares.
        unsafe impl BoxRet for $name {
            unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
                match self.into_datum() {
                    Some(datum) => unsafe { fcinfo.return_raw_datum(datum) },
                    None => fcinfo.return_null(),
                }
            }
        }

        impl_sql_translatable!($name, $sql);
    };
}

oid_argument!(RegClass, "regclass", pg_sys::REGCLASSOID);
oid_argument!(RegConfig, "regconfig", pg_sys::REGCONFIGOID);

/// A value of type `name` (an identifier of at most 63 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Name(pub String);

impl FromDatum for Name {
    unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, _typoid: pg_sys::Oid) -> Option<Self> {
        if is_null {
            return None;
        }
        // SAFETY: a name datum points to a NUL-terminated NameData.
        let s = unsafe { std::ffi::CStr::from_ptr(datum.cast_mut_ptr::<std::ffi::c_char>()) };
        Some(Name(s.to_string_lossy().into_owned()))
    }
}

impl IntoDatum for Name {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        let bytes = self.0.as_bytes();
        let len = bytes.len().min(pg_sys::NAMEDATALEN as usize - 1);
        // SAFETY: a zeroed NameData of NAMEDATALEN bytes in the current memory context, the
        // identifier's first bytes copied in (a name is at most NAMEDATALEN - 1 bytes).
        unsafe {
            let p = pg_sys::palloc0(pg_sys::NAMEDATALEN as usize) as *mut u8;
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, len);
            Some(pg_sys::Datum::from(p))
        }
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::NAMEOID
    }
}

unsafe impl<'fcx> ArgAbi<'fcx> for Name {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        unsafe { arg.unbox_arg_using_from_datum().expect("a non-null name argument") }
    }
}

// SAFETY: the datum returned is a palloc'd NameData, as the function declares.
unsafe impl BoxRet for Name {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
        match self.into_datum() {
            Some(datum) => unsafe { fcinfo.return_raw_datum(datum) },
            None => fcinfo.return_null(),
        }
    }
}

impl_sql_translatable!(Name, "name");
