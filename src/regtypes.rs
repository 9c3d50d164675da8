//! `regclass` and `regconfig` as function arguments: the OID of a table or of a text search
//! configuration, resolved by PostgreSQL's input function from the caller's name for it (on the
//! caller's search_path, before the function runs).

use pgrx::callconv::{Arg, ArgAbi};
use pgrx::{impl_sql_translatable, pg_sys, FromDatum};

macro_rules! oid_argument {
    ($name:ident, $sql:literal) => {
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

        unsafe impl<'fcx> ArgAbi<'fcx> for $name {
            unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
                unsafe { arg.unbox_arg_using_from_datum().expect(concat!("a non-null ", $sql, " argument")) }
            }
        }

        impl_sql_translatable!($name, arg_only = $sql);
    };
}

oid_argument!(RegClass, "regclass");
oid_argument!(RegConfig, "regconfig");
