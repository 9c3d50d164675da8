//! One error type for every user mistake the core can detect. The extension maps
//! [`SqlState`] to PostgreSQL's error codes and reports message, detail and hint.

use std::fmt;

/// The SQLSTATEs pg_corpus raises (PostgreSQL's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlState {
    /// 42704
    UndefinedObject,
    /// 42710
    DuplicateObject,
    /// 42P01
    UndefinedTable,
    /// 42703
    UndefinedColumn,
    /// 42804
    DatatypeMismatch,
    /// 42501
    InsufficientPrivilege,
    /// 22023
    InvalidParameterValue,
    /// 22004
    NullValueNotAllowed,
    /// 22000
    DataException,
    /// 55000
    ObjectNotInPrerequisiteState,
    /// 25006
    ReadOnlySqlTransaction,
    /// 54001
    StatementTooComplex,
    /// 42809
    WrongObjectType,
    /// 0A000
    FeatureNotSupported,
    /// 08006
    ConnectionFailure,
    /// XX002
    IndexCorrupted,
}

impl SqlState {
    pub fn code(self) -> &'static str {
        match self {
            SqlState::UndefinedObject => "42704",
            SqlState::DuplicateObject => "42710",
            SqlState::UndefinedTable => "42P01",
            SqlState::UndefinedColumn => "42703",
            SqlState::DatatypeMismatch => "42804",
            SqlState::InsufficientPrivilege => "42501",
            SqlState::InvalidParameterValue => "22023",
            SqlState::NullValueNotAllowed => "22004",
            SqlState::DataException => "22000",
            SqlState::ObjectNotInPrerequisiteState => "55000",
            SqlState::ReadOnlySqlTransaction => "25006",
            SqlState::StatementTooComplex => "54001",
            SqlState::WrongObjectType => "42809",
            SqlState::FeatureNotSupported => "0A000",
            SqlState::ConnectionFailure => "08006",
            SqlState::IndexCorrupted => "XX002",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct CoreError {
    pub state: SqlState,
    pub message: String,
    pub detail: Option<String>,
    pub hint: String,
}

impl CoreError {
    pub fn new(state: SqlState, message: impl Into<String>, hint: impl Into<String>) -> Self {
        CoreError { state, message: message.into(), detail: None, hint: hint.into() }
    }

    /// With a DETAIL that is a JSON object naming the error's kind (and the field it is about),
    /// where one SQLSTATE covers several families a client tells apart.
    pub fn with_kind(self, kind: &str, field: Option<&str>) -> Self {
        let mut o = serde_json::Map::new();
        o.insert("kind".into(), serde_json::Value::from(kind));
        if let Some(f) = field {
            o.insert("field".into(), serde_json::Value::from(f));
        }
        self.with_detail(serde_json::Value::Object(o).to_string())
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.state.code())
    }
}

impl std::error::Error for CoreError {}

pub type Result<T> = std::result::Result<T, CoreError>;
