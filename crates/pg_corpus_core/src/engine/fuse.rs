//! The fusion loop: rounds with a widening window until k rows survive the cap, each fused
//! by RRF with the feedback round's lists and filtered by evidence, then expansion and
//! must-include classes.

use std::collections::HashMap;

use super::{
    evidence::{apply_evidence, Near},
    feedback::feedback_round,
    rounds::{run_round, Round},
    semantic_plans, Executor, Request,
};
use crate::error::Result;
use crate::fusion::{self, Fused, RankedList, SourceInfo};
use crate::model::{Branch, QueryTag};

pub(super) fn source_infos(req: &Request) -> Vec<SourceInfo> {
    req.corpus
        .sources
        .iter()
        .map(|s| SourceInfo {
            parent_scope: s.parent_scope.clone(),
            semantic_weight: s.semantic_weight,
            lexical_weight: s.lexical_weight,
        })
        .collect()
}

/// The fused, capped hits of a request (before the final fetch).
pub fn ranked(req: &Request, exec: &mut dyn Executor) -> Result<Vec<Fused>> {
    let sem = semantic_plans(req, exec)?;
    let max_window = (req.config.max_candidates.max(1) as usize).max(req.window);
    let sources = source_infos(req);
    let mut window = req.window;
    let queries = req.queries();
    // the evidence filter's index terms of the items it has checked, across rounds
    let mut item_keys: HashMap<(usize, String), Vec<String>> = HashMap::new();
    loop {
        let Round { lists, saturated, frontiers } = run_round(req, &queries, &sem, window, exec)?;
        let near = req.evidence.as_ref().map(|_| Near::of(&lists));
        let (lists, saturated) = if req.feedback {
            let first = fusion::rrf(&lists, &sources, req.rrf_k);
            let (more, more_saturated) = feedback_round(req, &sem, window, &first, exec)?;
            // RRF(feedback vector, first lexical list, feedback lexical list, extra queries'
            // lists): the feedback vector replaces the original one
            let (original, extra): (Vec<RankedList>, Vec<RankedList>) =
                lists.into_iter().partition(|l| l.query == QueryTag::Original);
            let mut fused_lists: Vec<RankedList> =
                more.iter().filter(|l| l.branch == Branch::Semantic).cloned().collect();
            // (the moved vector is the default space's: other spaces keep their first list)
            fused_lists.extend(original.iter().filter(|l| l.branch == Branch::Semantic && l.space != 0).cloned());
            fused_lists.extend(original.into_iter().filter(|l| l.branch == Branch::Lexical));
            fused_lists.extend(more.into_iter().filter(|l| l.branch == Branch::Lexical));
            fused_lists.extend(extra);
            (fused_lists, saturated || more_saturated)
        } else {
            (lists, saturated)
        };
        let mut fused = fusion::rrf(&lists, &sources, req.rrf_k);
        if !req.exclude_items.is_empty() || req.exclude_parent.is_some() {
            fused.retain(|f| !req.excludes(f));
        }
        let saturated = match (&req.evidence, &near) {
            (Some(ev), Some(near)) => apply_evidence(req, ev, near, &frontiers, &mut fused, &mut item_keys, exec)?,
            _ => saturated,
        };
        let rows = fusion::cap(&fused, req.max_per_parent, req.k);
        if window >= max_window || !fusion::needs_wider_window(rows.len(), req.k, saturated) {
            let mut rows = if req.expand { super::expand::expand(req, rows, exec)? } else { rows };
            if req.must_include && !req.corpus.must_include.is_empty() {
                let mut near = near;
                super::must_include::must_include(req, &mut rows, &fused, near.as_mut(), &mut item_keys, exec)?;
            }
            return Ok(rows);
        }
        window = window.saturating_mul(4).min(max_window);
    }
}
