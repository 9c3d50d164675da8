//! A corpus' ranking settings: the fusion defaults of its searches.

use serde_json::{json, Map, Value};

/// RRF's rank constant when neither the call nor the corpus sets one.
pub const DEFAULT_RRF_K: i32 = 20;
/// The smallest candidate window (items per source and branch) when neither the call nor the
/// corpus sets one; a search asks for at least [`WINDOW_PER_K`] × k.
pub const DEFAULT_WINDOW: i32 = 100;
/// The smallest window of a search of one list (nothing to fuse: the window only has to hold
/// enough items for the per-parent cap).
pub const SINGLE_LIST_WINDOW: i32 = 20;
/// A search's window is never below this many candidates per row asked for.
pub const WINDOW_PER_K: usize = 4;
/// The bounds of the settings (rrf_k as the search argument takes it).
pub const MAX_RRF_K: i32 = 100_000;
pub const MAX_WINDOW: i32 = 100_000;
/// The feedback round's parameters when the corpus sets none: how far the query vector moves
/// towards the first fusion's best items (β), the weight of the original query's keys in the
/// expanded BM25 query (α), and how many expansion keys it keeps.
pub const DEFAULT_FEEDBACK_BETA: f64 = 0.5;
pub const DEFAULT_FEEDBACK_ALPHA: f64 = 0.5;
pub const DEFAULT_FEEDBACK_TERMS: i32 = 20;

/// The fusion defaults a corpus sets (None: the extension's default).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Ranking {
    pub rrf_k: Option<i32>,
    /// The smallest candidate window; a search uses max(window, 4k).
    pub window: Option<i32>,
    pub feedback: Option<bool>,
    pub feedback_beta: Option<f64>,
    pub feedback_alpha: Option<f64>,
    pub feedback_terms: Option<i32>,
}

/// The window of a search of one list for `k` rows: max(20, 4k), at most `max_candidates`.
pub fn single_list_window(k: usize, max_candidates: i32) -> usize {
    (SINGLE_LIST_WINDOW as usize).max(WINDOW_PER_K * k).min(max_candidates.max(1) as usize)
}

/// The window of a search of one exact list (BM25) whose rows nothing after the ranking drops
/// (no per-parent cap that can bite, no evidence filter): the `k` rows of the page and the
/// `offset` before it, at most `max_candidates`. The ranking is the same with any window, and
/// a round that comes back short widens it as for any search; every further candidate costs
/// the index's top-k a lower threshold to reach.
pub fn exact_list_window(k: usize, offset: usize, max_candidates: i32) -> usize {
    k.saturating_add(offset).max(1).min(max_candidates.max(1) as usize)
}

/// The feedback round's parameters a search uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FeedbackParams {
    pub beta: f64,
    pub alpha: f64,
    pub terms: usize,
}

impl Ranking {
    /// The rank constant a search uses.
    pub fn rrf_k(&self) -> i32 {
        self.rrf_k.unwrap_or(DEFAULT_RRF_K)
    }

    /// The candidate window of a search for `k` rows (at most `max_candidates`, the
    /// operator's bound on the work).
    pub fn window(&self, k: usize, max_candidates: i32) -> usize {
        let floor = self.window.unwrap_or(DEFAULT_WINDOW).max(1) as usize;
        floor.max(WINDOW_PER_K * k).min(max_candidates.max(1) as usize)
    }

    /// The feedback round's parameters.
    pub fn feedback_params(&self) -> FeedbackParams {
        FeedbackParams {
            beta: self.feedback_beta.unwrap_or(DEFAULT_FEEDBACK_BETA),
            alpha: self.feedback_alpha.unwrap_or(DEFAULT_FEEDBACK_ALPHA),
            terms: self.feedback_terms.unwrap_or(DEFAULT_FEEDBACK_TERMS).max(1) as usize,
        }
    }

    /// The stored form: only the keys set.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        if let Some(v) = self.rrf_k {
            out.insert("rrf_k".into(), json!(v));
        }
        if let Some(v) = self.window {
            out.insert("window".into(), json!(v));
        }
        if let Some(v) = self.feedback {
            out.insert("feedback".into(), json!(v));
        }
        if let Some(v) = self.feedback_beta {
            out.insert("feedback_beta".into(), json!(v));
        }
        if let Some(v) = self.feedback_alpha {
            out.insert("feedback_alpha".into(), json!(v));
        }
        if let Some(v) = self.feedback_terms {
            out.insert("feedback_terms".into(), json!(v));
        }
        Value::Object(out)
    }
}
