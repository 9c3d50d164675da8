//! Must-include classes: each class's best hits among the rows.

use std::collections::HashMap;

use super::{
    evidence::{apply_evidence, Near},
    fuse::source_infos,
    rounds::run_round,
    strategy::semantic_plans_of,
    Executor, Request,
};
use crate::error::Result;
use crate::fusion::{self, Fused};

/// Must-include classes: each class's best hits — searched
/// by the original query under the corpus predicate, the filters and the class's own condition —
/// are among the rows, replacing the lowest-ranked others. A class hit the search ranked keeps
/// its score; one it did not scores 0 and comes last. The evidence filter, when on, judges class
/// hits as any other (a class is a candidate, not an answer).
pub(super) fn must_include(
    req: &Request,
    rows: &mut Vec<Fused>,
    pool: &[Fused],
    mut near: Option<&mut Near>,
    cache: &mut HashMap<(usize, String), Vec<String>>,
    exec: &mut dyn Executor,
) -> Result<()> {
    let infos = source_infos(req);
    let mut guaranteed: Vec<(usize, String)> = Vec::new();
    for class in &req.corpus.must_include {
        let mut creq = req.clone();
        creq.conds.extend(crate::filters::check_class(&req.corpus, &class.filters)?);
        creq.extra.clear();
        creq.feedback = false;
        let window = (4 * class.top).max(20);
        let csem = semantic_plans_of(&creq, class.source, exec)?;
        let round = run_round(&creq, &[creq.query()], &csem, window, exec)?;
        let mut class_hits = fusion::rrf(&round.lists, &infos, req.rrf_k);
        class_hits.retain(|f| !req.excludes(f));
        if let (Some(ev), Some(near)) = (&req.evidence, near.as_deref_mut()) {
            near.add(&round.lists, false);
            apply_evidence(&creq, ev, near, &[], &mut class_hits, cache, exec)?;
        }
        for (i, hit) in fusion::cap(&class_hits, req.max_per_parent, class.top).into_iter().enumerate() {
            let key = (hit.source, hit.item_id.clone());
            if guaranteed.contains(&key) {
                continue;
            }
            guaranteed.push(key.clone());
            if rows.iter().any(|f| f.source == hit.source && f.item_id == hit.item_id) {
                continue;
            }
            let origin = serde_json::json!({"kind": "must_include", "class": class.name, "class_rank": i + 1});
            let row = match pool.iter().find(|f| f.source == hit.source && f.item_id == hit.item_id) {
                Some(f) => {
                    Fused { origin: Some(origin), evidence: hit.evidence.clone().or(f.evidence.clone()), ..f.clone() }
                }
                None => Fused {
                    score: 0.0,
                    semantic: None,
                    lexical: None,
                    queries: Vec::new(),
                    origin: Some(origin),
                    ..hit
                },
            };
            rows.push(row);
        }
    }
    rows.sort_by(fusion::fused_order);
    // back to k rows: drop the lowest-ranked rows that no class guarantees, first those of a
    // parent the class hits took over the per-parent cap
    let over_cap = |rows: &[Fused], f: &Fused| {
        req.max_per_parent.is_some_and(|max| {
            rows.iter().filter(|o| o.parent_scope == f.parent_scope && o.parent_id == f.parent_id).count() > max
        })
    };
    while rows.len() > req.k {
        let free = |f: &Fused| !guaranteed.contains(&(f.source, f.item_id.clone()));
        let pick = rows.iter().rposition(|f| free(f) && over_cap(rows, f)).or_else(|| rows.iter().rposition(free));
        match pick {
            Some(i) => {
                rows.remove(i);
            }
            None => {
                rows.truncate(req.k);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use crate::engine::tests::fake::*;
    use crate::engine::Args;
    use crate::model::{Branch, Corpus, SearchRow};
    use crate::testing::legal;

    /// The legal corpus with one class: the two best halachot.
    fn rules_corpus() -> Arc<Corpus> {
        let mut c = legal();
        c.must_include =
            crate::augment::parse_must_include(&json!([{"name": "rules", "source": "halachot", "top": 2}]), &c)
                .unwrap();
        Arc::new(c)
    }

    #[test]
    fn pages_continue_the_first_page_with_the_rows_its_class_hits_replaced() {
        let c = rules_corpus();
        let a = Args { max_per_parent: None, ..args("hybrid") };
        let mut f = default_fake();
        unmatched(&mut f, 1);
        let first = run_on(c.clone(), &mut f, a.clone()).unwrap();
        let plain = run_on(c.clone(), &mut f, Args { must_include: false, k: 30, ..a.clone() }).unwrap();
        let second = run_on(c.clone(), &mut f, Args { offset: 10, ..a.clone() }).unwrap();
        assert_eq!(second.iter().map(|r| r.rank).collect::<Vec<_>>(), (11..=20).collect::<Vec<i32>>());
        // the two rows the class hits took the place of open the second page
        let ids = |rows: &[SearchRow]| rows.iter().map(|r| r.item_id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&second)[..2], ids(&plain)[8..10]);
        assert!(ids(&second).iter().all(|id| !ids(&first).contains(id)), "{first:?} {second:?}");
    }

    #[test]
    fn a_must_include_class_is_always_among_the_rows() {
        let c = rules_corpus();
        let mut f = default_fake();
        // halachot are far from the query and hold none of its words: the search ranks them last
        unmatched(&mut f, 1);
        let a = Args { max_per_parent: None, ..args("hybrid") };
        let rows = run_on(c.clone(), &mut f, a.clone()).unwrap();
        assert_eq!(rows.len(), 10);
        let class: Vec<&SearchRow> = rows.iter().filter(|r| r.origin.is_some()).collect();
        assert_eq!(class.len(), 2, "{rows:?}");
        for (i, r) in class.iter().enumerate() {
            assert_eq!(r.source, "halachot");
            assert_eq!(r.origin.as_ref().unwrap()["class"], json!("rules"));
            assert_eq!(r.origin.as_ref().unwrap()["class_rank"], json!(i + 1));
        }
        // they replaced the two lowest-ranked hits and come last
        assert!(rows[8].origin.is_some() && rows[9].origin.is_some());
        assert!(rows[..8].iter().all(|r| r.source == "chunks"));
        // the class round searched only its source
        let class_calls: Vec<(usize, Branch, i64)> = f.branch_calls().into_iter().filter(|c| c.2 == 20).collect();
        assert!(!class_calls.is_empty() && class_calls.iter().all(|c| c.0 == 1), "{class_calls:?}");
        // a class hit the search returns anyway is not added twice
        let mut f = default_fake();
        let rows = run_on(c, &mut f, a).unwrap();
        assert_eq!(rows.len(), 10);
        let mut ids: Vec<&str> = rows.iter().map(|r| r.item_id.as_str()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 10);
    }

    #[test]
    fn class_hits_say_where_they_came_from_and_take_the_last_rows_down_to_one() {
        let c = rules_corpus();
        let far_halachot = || {
            let mut f = default_fake();
            unmatched(&mut f, 1);
            f
        };
        let rows =
            run_on(c.clone(), &mut far_halachot(), Args { k: 5, max_per_parent: None, ..args("hybrid") }).unwrap();
        assert_eq!(rows.len(), 5);
        for r in &rows {
            match &r.origin {
                Some(o) => {
                    assert_eq!((o["kind"].as_str(), o["class"].as_str()), (Some("must_include"), Some("rules")), "{o}");
                    assert_eq!(r.source, "halachot");
                }
                None => assert_eq!(r.source, "chunks", "only the class brings halachot in: {r:?}"),
            }
        }
        assert_eq!(rows.iter().filter(|r| r.source == "halachot").count(), 2);
        // k = 1: the class takes the only row
        let rows = run_on(c, &mut far_halachot(), Args { k: 1, ..args("hybrid") }).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].source, "halachot");
        assert_eq!(rows[0].origin.as_ref().unwrap()["class_rank"], json!(1));
    }
}
