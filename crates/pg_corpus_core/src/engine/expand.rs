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
