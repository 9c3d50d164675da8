//! Reporting core errors as PostgreSQL errors: SQLSTATE, message, detail, hint.

use pg_corpus_core::{CoreError, SqlState};
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

fn code(state: SqlState) -> PgSqlErrorCode {
    use PgSqlErrorCode::*;
    match state {
        SqlState::UndefinedObject => ERRCODE_UNDEFINED_OBJECT,
        SqlState::DuplicateObject => ERRCODE_DUPLICATE_OBJECT,
        SqlState::UndefinedTable => ERRCODE_UNDEFINED_TABLE,
        SqlState::UndefinedColumn => ERRCODE_UNDEFINED_COLUMN,
        SqlState::DatatypeMismatch => ERRCODE_DATATYPE_MISMATCH,
        SqlState::InsufficientPrivilege => ERRCODE_INSUFFICIENT_PRIVILEGE,
        SqlState::InvalidParameterValue => ERRCODE_INVALID_PARAMETER_VALUE,
        SqlState::NullValueNotAllowed => ERRCODE_NULL_VALUE_NOT_ALLOWED,
        SqlState::DataException => ERRCODE_DATA_EXCEPTION,
        SqlState::ObjectNotInPrerequisiteState => ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        SqlState::ReadOnlySqlTransaction => ERRCODE_READ_ONLY_SQL_TRANSACTION,
        SqlState::StatementTooComplex => ERRCODE_STATEMENT_TOO_COMPLEX,
        SqlState::WrongObjectType => ERRCODE_WRONG_OBJECT_TYPE,
        SqlState::FeatureNotSupported => ERRCODE_FEATURE_NOT_SUPPORTED,
        SqlState::ConnectionFailure => ERRCODE_CONNECTION_FAILURE,
        SqlState::IndexCorrupted => ERRCODE_INDEX_CORRUPTED,
    }
}

/// Raise `e` as an ERROR (does not return).
pub fn raise(e: CoreError) -> ! {
    let mut report = ErrorReport::new(code(e.state), e.message, "pg_corpus").set_hint(e.hint);
    if let Some(detail) = e.detail {
        report = report.set_detail(detail);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("ereport(ERROR) returned")
}

/// A NOTICE (SQLSTATE 00000) with a detail: what a search did that the caller should know
/// without it being an error (a lenient search's dropped filter conditions).
pub fn notice(message: String, detail: String, hint: &str) {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION, message, "pg_corpus")
        .set_detail(detail)
        .set_hint(hint.to_string())
        .report(PgLogLevel::NOTICE);
}

/// A WARNING with the error's SQLSTATE, message, detail and hint: something the caller's
/// statement did not need went wrong, and the statement goes on.
pub fn warning(e: &CoreError) {
    let mut report = ErrorReport::new(code(e.state), e.message.clone(), "pg_corpus").set_hint(e.hint.clone());
    if let Some(detail) = &e.detail {
        report = report.set_detail(detail.clone());
    }
    report.report(PgLogLevel::WARNING);
}

/// Unwrap a core result or raise its error.
pub trait OrRaise<T> {
    fn or_raise(self) -> T;
}

impl<T> OrRaise<T> for Result<T, CoreError> {
    fn or_raise(self) -> T {
        match self {
            Ok(v) => v,
            Err(e) => raise(e),
        }
    }
}

/// Raise an error another node raised, with its own SQLSTATE (a code PostgreSQL does not define
/// is reported as P0001, raise_exception), message, detail and hint.
pub fn raise_as(sqlstate: &str, message: String, detail: Option<String>, hint: Option<String>) -> ! {
    let b = sqlstate.as_bytes();
    let code = if b.len() == 5 {
        // MAKE_SQLSTATE: six bits per character, the first in the lowest bits
        b.iter().enumerate().fold(0i32, |acc, (i, c)| acc | ((i32::from(*c) - i32::from(b'0')) & 0x3F) << (6 * i))
    } else {
        0
    };
    let mut state = PgSqlErrorCode::from(code);
    if state == PgSqlErrorCode::ERRCODE_INTERNAL_ERROR && sqlstate != "XX000" {
        state = PgSqlErrorCode::ERRCODE_RAISE_EXCEPTION;
    }
    let mut report = ErrorReport::new(state, message, "pg_corpus");
    if let Some(detail) = detail {
        report = report.set_detail(detail);
    }
    if let Some(hint) = hint {
        report = report.set_hint(hint);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("ereport(ERROR) returned")
}
