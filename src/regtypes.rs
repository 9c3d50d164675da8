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

/// The type a caller asked item ids to be returned as: its base type (under any domains) and
/// that type's input function.
pub struct KeyType {
    /// `format_type` of the base type.
    pub base_name: String,
    /// Whether the base type is built into PostgreSQL (its input function is no one's code).
    pub builtin: bool,
    base: pg_sys::Oid,
    input: pg_sys::Oid,
    ioparam: pg_sys::Oid,
}

impl KeyType {
    pub fn of(requested: pg_sys::Oid) -> KeyType {
        // SAFETY: catalog lookups of a type the parser resolved for this call's argument.
        unsafe {
            let base = pg_sys::getBaseType(requested);
            let name = pg_sys::format_type_be(base);
            let base_name = std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned();
            let (mut input, mut ioparam) = (pg_sys::InvalidOid, pg_sys::InvalidOid);
            pg_sys::getTypeInputInfo(base, &mut input, &mut ioparam);
            let builtin = base.to_u32() < pg_sys::FirstNormalObjectId;
            KeyType { base_name, builtin, base, input, ioparam }
        }
    }

    /// An item id (its key's text form) as a value of the base type.
    pub fn read(&self, id: &str) -> Option<pgrx::AnyElement> {
        let text = std::ffi::CString::new(id).unwrap_or_default();
        // SAFETY: a built-in type's input function on the text its output function wrote; the
        // datum lives in the current memory context, long enough for the row it is put in.
        unsafe {
            let datum = pg_sys::OidInputFunctionCall(self.input, text.as_ptr().cast_mut(), self.ioparam, -1);
            pgrx::AnyElement::from_polymorphic_datum(datum, false, self.base)
        }
    }
}
