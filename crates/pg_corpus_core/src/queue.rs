//! The re-embed queue's worker API: what a claim, a completion, a failure and a release check
//! before they touch the queue, and what they answer. An item's queue row moves between the
//! states `pending` (to embed), `claimed` (a worker holds it until its lease runs out) and
//! `dead` (failed `max_attempts` times: not claimed again until retried); a completion of the
//! claimed version stores the embedding and removes the row.

use crate::error::{CoreError, Result, SqlState};

/// The most items one claim takes.
pub const MAX_BATCH: i32 = 10_000;

/// A claim's batch size, 1 to [`MAX_BATCH`] (22023 otherwise, NULL included).
pub fn check_batch_size(batch_size: Option<i32>) -> Result<i32> {
    match batch_size {
        Some(n) if (1..=MAX_BATCH).contains(&n) => Ok(n),
        other => Err(CoreError::new(
            SqlState::InvalidParameterValue,
            format!("batch_size must be between 1 and {MAX_BATCH}, got {}", shown(other)),
            "Claim what one embedding call can take, typically 16 to 256 items.",
        )),
    }
}

/// 22023: a claim's lease (shown as its text, None for NULL) is not a positive interval.
pub fn bad_lease(lease: Option<&str>) -> CoreError {
    CoreError::new(
        SqlState::InvalidParameterValue,
        format!("lease must be a positive interval, got {}", lease.unwrap_or("")),
        "The lease is how long a claimed item stays yours, e.g. '5 minutes'.",
    )
}

/// A value as PL/pgSQL's `format('%s')` shows it: NULL as nothing.
fn shown(v: Option<i32>) -> String {
    v.map_or(String::new(), |n| n.to_string())
}

/// 22004: a completion offers no embedding.
pub fn null_embedding() -> CoreError {
    CoreError::new(
        SqlState::NullValueNotAllowed,
        "embedding is NULL",
        "Report a failed item with corpus.corpus_embedding_fail instead.",
    )
    .with_kind("bad_vector", None)
}

/// What a completion checks of the embedding a worker offers for a slot: that it has the
/// slot's dimension (22000) and, when both name one, the slot's model (22023). `slot` names the
/// column as `table.column` in messages.
pub fn check_embedding(
    dims: usize,
    slot: &str,
    slot_dimensions: Option<i32>,
    model: Option<&str>,
    slot_model: Option<&str>,
) -> Result<()> {
    if let Some(want) = slot_dimensions {
        if i64::try_from(dims).ok() != Some(i64::from(want)) {
            return Err(CoreError::new(
                SqlState::DataException,
                format!("embedding has {dims} dimensions, {slot} has {want}"),
                "The worker embeds with a different model than the column was declared for.",
            ));
        }
    }
    if let (Some(m), Some(s)) = (model, slot_model) {
        if m != s {
            return Err(CoreError::new(
                SqlState::InvalidParameterValue,
                format!("embedding of model \"{m}\" offered for {slot}, which holds model \"{s}\""),
                "Configure the worker with the model the source records, or change the source's model.",
            ));
        }
    }
    Ok(())
}

/// What a completion did: `stored`; `requeued` (the text changed since the claim: the result
/// describes old text and is refused); `not_queued` (nothing to do any more).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    Stored,
    Requeued,
    NotQueued,
}

impl Completion {
    pub fn name(self) -> &'static str {
        match self {
            Completion::Stored => "stored",
            Completion::Requeued => "requeued",
            Completion::NotQueued => "not_queued",
        }
    }

    /// The completion of a queued item whose row holds `queued_version`, offered for `version`
    /// (a worker that names no version stores whatever version is queued).
    pub fn of(queued_version: i64, version: Option<i64>) -> Completion {
        match version {
            Some(v) if v != queued_version => Completion::Requeued,
            _ => Completion::Stored,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_one_to_ten_thousand_items() {
        assert_eq!(check_batch_size(Some(1)), Ok(1));
        assert_eq!(check_batch_size(Some(MAX_BATCH)), Ok(MAX_BATCH));
        for bad in [None, Some(0), Some(-3), Some(MAX_BATCH + 1)] {
            let e = check_batch_size(bad).unwrap_err();
            assert_eq!(e.state, SqlState::InvalidParameterValue);
            assert!(e.message.ends_with(&format!("got {}", shown(bad))), "{}", e.message);
        }
        assert_eq!(bad_lease(Some("-00:01:00")).message, "lease must be a positive interval, got -00:01:00");
    }

    #[test]
    fn an_embedding_must_fit_its_slot() {
        let ok = check_embedding(3, "public.t.e", Some(3), Some("m"), Some("m"));
        assert_eq!(ok, Ok(()));
        assert!(check_embedding(3, "public.t.e", None, None, Some("m")).is_ok());
        let e = null_embedding();
        assert_eq!((e.state, e.detail.as_deref()), (SqlState::NullValueNotAllowed, Some(r#"{"kind":"bad_vector"}"#)));
        let e = check_embedding(4, "public.t.e", Some(3), None, None).unwrap_err();
        assert_eq!(
            (e.state, e.message.as_str()),
            (SqlState::DataException, "embedding has 4 dimensions, public.t.e has 3")
        );
        let e = check_embedding(3, "public.t.e", Some(3), Some("a"), Some("b")).unwrap_err();
        assert_eq!(e.state, SqlState::InvalidParameterValue);
        assert!(e.message.contains("model \"a\"") && e.message.contains("holds model \"b\""), "{}", e.message);
    }

    #[test]
    fn only_the_claimed_version_is_stored() {
        assert_eq!(Completion::of(7, Some(7)), Completion::Stored);
        assert_eq!(Completion::of(8, Some(7)), Completion::Requeued);
        assert_eq!(Completion::of(8, None), Completion::Stored);
        assert_eq!(Completion::NotQueued.name(), "not_queued");
    }
}
