//! Citation-graph expansion of the best hits.

use super::NeighboursQuery;
use super::{fuse::source_infos, Executor, Request};
use crate::augment;
use crate::error::Result;
use crate::fusion::{self, Fused};
use crate::plan::{self};

/// Citation-graph expansion: the forward neighbours of the best hits join them,
/// each scored its seed's score times `1 - hop_penalty`, at most `max_added`, every one looked
/// up under the corpus predicate and the filters; then the hits are capped and cut to k again.
pub(super) fn expand(req: &Request, rows: Vec<Fused>, exec: &mut dyn Executor) -> Result<Vec<Fused>> {
    let limits = req.corpus.graph;
    let seeds: Vec<augment::Seed> = rows
        .iter()
        .take(limits.seeds)
        .map(|f| augment::Seed { source: f.source, item_id: f.item_id.clone(), score: f.score })
        .collect();
    let mut neighbours = Vec::new();
    for (e, edges) in req.corpus.edges.iter().enumerate() {
        let ids: Vec<String> =
            seeds.iter().filter(|s| s.source == edges.from_source).map(|s| s.item_id.clone()).collect();
        if ids.is_empty() {
            continue;
        }
        let exclude: Vec<String> =
            rows.iter().filter(|f| f.source == edges.to_source).map(|f| f.item_id.clone()).collect();
        let per_seed = limits.max_added as i64;
        let (sql, params) = plan::graph_neighbours(&req.corpus, e, &req.conds, ids.clone(), exclude.clone(), per_seed);
        let q = NeighboursQuery { edges: e, seeds: ids, exclude, per_seed, sql, params };
        for (seed, item_id, parent_id) in exec.neighbours(&q)? {
            // the seed's stored id as text: find its rank among the seeds of this source
            let Some(si) = seeds.iter().position(|s| s.source == edges.from_source && s.item_id == seed) else {
                continue;
            };
            neighbours.push(augment::Neighbour { edges: e, seed: si, source: edges.to_source, item_id, parent_id });
        }
    }
    let present = |source: usize, id: &str| rows.iter().any(|f| f.source == source && f.item_id == id);
    let added = augment::expansion(&seeds, neighbours, present, &limits);
    let infos = source_infos(req);
    let mut all = rows.clone();
    for a in added {
        let n = a.neighbour;
        let seed = &seeds[n.seed];
        let via = serde_json::json!({
            "edges": req.corpus.edges[n.edges].name,
            "seed": {"source": req.corpus.sources[seed.source].name, "item_id": seed.item_id},
            "hop_penalty": limits.hop_penalty,
        });
        let f = Fused {
            source: n.source,
            parent_scope: infos[n.source].parent_scope.clone(),
            item_id: n.item_id,
            parent_id: n.parent_id,
            score: a.score,
            semantic: None,
            lexical: None,
            queries: Vec::new(),
            // admitted by its edge from an admitted seed, not by evidence of its own
            evidence: req.evidence.as_ref().map(|_| serde_json::json!({"graph_edge": via.clone()})),
            origin: Some(serde_json::json!({"kind": "graph", "graph": via})),
        };
        if !req.excludes(&f) {
            all.push(f);
        }
    }
    all.sort_by(fusion::fused_order);
    Ok(fusion::cap(&all, req.max_per_parent, req.k))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::engine::tests::fake::*;
    use crate::engine::Args;
    use crate::error::SqlState;
    use crate::model::{Corpus, SearchRow};
    use crate::testing::legal;

    fn graph_corpus() -> Arc<Corpus> {
        let mut c = legal();
        c.edges = vec![crate::model::Edges {
            name: "cites".into(),
            oid: 99,
            schema: "public".into(),
            table: "citations".into(),
            from_source: 0,
            from_column: "from_id".into(),
            from_type: "bigint".into(),
            to_source: 1,
            to_column: "to_id".into(),
        }];
        Arc::new(c)
    }

    #[test]
    fn expansion_has_no_pages_beyond_the_first() {
        let a = Args { expand: Some(true), offset: 10, ..args("hybrid") };
        let e = run_on(graph_corpus(), &mut default_fake(), a).unwrap_err();
        assert_eq!(e.state, crate::error::SqlState::FeatureNotSupported);
        assert!(e.hint.contains("expand => false"), "{e:?}");
    }

    #[test]
    fn expansion_adds_the_seeds_forward_neighbours_within_its_limits() {
        let mut f = default_fake();
        // halachot are far: only the graph brings them in
        unmatched(&mut f, 1);
        for seed in 1..=8u32 {
            let cited: Vec<(String, String)> =
                (0..5).map(|j| (format!("{}", 100_000 + seed * 10 + j), "77".into())).collect();
            f.cites.insert(seed.to_string(), cited);
        }
        let a = Args { expand: Some(true), max_per_parent: None, k: 30, ..args("hybrid") };
        let rows = run_on(graph_corpus(), &mut f, a).unwrap();
        let added: Vec<&SearchRow> = rows.iter().filter(|r| r.origin.is_some()).collect();
        assert_eq!(added.len(), 15, "at most 15 added: {rows:?}");
        let seeds: Vec<String> =
            rows.iter().filter(|r| r.origin.is_none()).take(5).map(|r| r.item_id.clone()).collect();
        for r in &added {
            let g = &r.origin.as_ref().unwrap()["graph"];
            let seed = g["seed"]["item_id"].as_str().unwrap();
            assert!(seeds.iter().any(|s| s == seed), "only the top 5 hits are seeds: {g}");
            let seed_score = rows.iter().find(|x| x.item_id == seed).unwrap().score;
            assert!((r.score - seed_score * 0.95).abs() < 1e-12);
            assert_eq!(r.source, "halachot");
        }
        // only the seeds were asked about, in one call for the one edge set
        let asked: Vec<&Vec<String>> =
            f.calls.iter().filter_map(|c| if let Call::Neighbours(s) = c { Some(s) } else { None }).collect();
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].len(), 5);
        // expand without edges is an error with a hint
        let mut f = default_fake();
        let e = run_on(corpus(), &mut f, Args { expand: Some(true), ..args("hybrid") }).unwrap_err();
        assert_eq!(e.state, SqlState::InvalidParameterValue);
        assert!(e.hint.contains("corpus_add_edges"));
    }

    #[test]
    fn only_the_edges_direction_is_followed() {
        let mut f = default_fake();
        // the chunks are far: the halachot are the best hits, and the seeds
        unmatched(&mut f, 0);
        // were a halacha's edges followed backwards, it would bring in a chunk
        f.cites.insert("100001".into(), vec![("4321".into(), "432".into())]);
        let a = Args { expand: Some(true), max_per_parent: None, ..args("hybrid") };
        let rows = run_on(graph_corpus(), &mut f, a).unwrap();
        assert_eq!(rows[0].item_id, "100001");
        assert!(rows.iter().all(|r| r.origin.is_none() && r.item_id != "4321"), "{rows:?}");
        let asked: Vec<&Call> = f.calls.iter().filter(|c| matches!(c, Call::Neighbours(_))).collect();
        assert!(asked.is_empty(), "no seed is of the edge set's from-source: {asked:?}");
    }
}
