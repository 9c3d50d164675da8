//! What a search adds to its own hits: must-include classes ("the mandatory source is
//! always a candidate, even when guidance dominates semantically") and citation-graph expansion
//! (the top seeds' forward neighbours, at most a few, with a hop penalty). Both are declared per
//! corpus; every item they add is searched or looked up under the whole corpus predicate, the
//! searchable contract and the caller's filters ([`crate::plan`]).

use serde_json::Value;

use crate::error::{CoreError, Result, SqlState};
use crate::model::{is_name, Corpus, EdgeDef, Edges, GraphLimits, MustInclude};

/// The most hits one must-include class guarantees.
pub const MAX_CLASS_TOP: usize = 20;
/// The most must-include classes of a corpus.
pub const MAX_CLASSES: usize = 8;

const CLASS_SHAPE: &str = "must_include is a JSON array of classes such as \
     [{\"name\": \"binding_law\", \"filters\": {\"source_class\": \"binding_law\"}, \"top\": 3}, \
     {\"name\": \"statutes\", \"source\": \"laws\", \"top\": 2}]: a name, a source, filters of declared \
     fields or both, and top from 1 to 20 (default 3).";

fn invalid(msg: String, hint: &str) -> CoreError {
    CoreError::new(SqlState::InvalidParameterValue, msg, hint)
}

/// Parse and check a corpus' must-include classes (their filters against its declared fields).
pub fn parse_must_include(value: &Value, corpus: &Corpus) -> Result<Vec<MustInclude>> {
    let items = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Array(a) => a,
        _ => return Err(invalid("must_include must be a JSON array".into(), CLASS_SHAPE)),
    };
    if items.len() > MAX_CLASSES {
        return Err(invalid(
            format!("must_include declares {} classes, at most {MAX_CLASSES}", items.len()),
            CLASS_SHAPE,
        ));
    }
    let mut out: Vec<MustInclude> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let n = i + 1;
        let Value::Object(f) = item else {
            return Err(invalid(format!("must_include class {n} must be a JSON object"), CLASS_SHAPE));
        };
        if let Some(k) = f.keys().find(|k| !["name", "source", "filters", "top"].contains(&k.as_str())) {
            return Err(invalid(
                format!("must_include class {n} has an unknown key {}", crate::json::brief_str(k)),
                CLASS_SHAPE,
            ));
        }
        let name = match f.get("name") {
            Some(Value::String(s)) if is_name(s) => s.clone(),
            other => {
                return Err(invalid(
                    format!(
                        "must_include class {n} needs a name (a lower-case identifier), got {}",
                        other.map_or("nothing".to_string(), crate::json::brief)
                    ),
                    CLASS_SHAPE,
                ))
            }
        };
        if out.iter().any(|c| c.name == name) {
            return Err(invalid(format!("must_include names class \"{name}\" twice"), CLASS_SHAPE));
        }
        let source = match f.get("source") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => match corpus.sources.iter().position(|src| &src.name == s) {
                Some(idx) => Some(idx),
                None => {
                    return Err(CoreError::new(
                        SqlState::UndefinedObject,
                        format!(
                            "must_include class \"{name}\" names source {}, which corpus \"{}\" does not have",
                            crate::json::brief_str(s),
                            corpus.name
                        ),
                        "See the corpus' sources in corpus.corpus_list().",
                    ))
                }
            },
            Some(x) => {
                return Err(invalid(
                    format!("must_include class \"{name}\": source must be a string, got {}", crate::json::brief(x)),
                    CLASS_SHAPE,
                ))
            }
        };
        let filters = match f.get("filters") {
            None | Some(Value::Null) => Value::Object(Default::default()),
            Some(v @ Value::Object(_)) => v.clone(),
            Some(x) => {
                return Err(invalid(
                    format!(
                        "must_include class \"{name}\": filters must be a JSON object, got {}",
                        crate::json::brief(x)
                    ),
                    CLASS_SHAPE,
                ))
            }
        };
        if source.is_none() && filters.as_object().is_some_and(|o| o.is_empty()) {
            return Err(invalid(
                format!("must_include class \"{name}\" names neither a source nor filters: it would be every item"),
                CLASS_SHAPE,
            ));
        }
        // the class's filters are filters of the corpus: declared fields, never the isolation
        // column (42501), checked as a strict search checks them
        crate::filters::check_class(corpus, &filters)
            .map_err(|e| CoreError { message: format!("must_include class \"{name}\": {}", e.message), ..e })?;
        let top = match f.get("top") {
            None | Some(Value::Null) => 3,
            Some(t) => match t.as_u64() {
                Some(t) if (1..=MAX_CLASS_TOP as u64).contains(&t) => t as usize,
                _ => {
                    return Err(invalid(
                        format!(
                            "must_include class \"{name}\": top must be an integer from 1 to {MAX_CLASS_TOP}, got {}",
                            crate::json::brief(t)
                        ),
                        CLASS_SHAPE,
                    ))
                }
            },
        };
        out.push(MustInclude { name, source, filters, top });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// The citation graph
// ---------------------------------------------------------------------------------------------

const GRAPH_SHAPE: &str =
    "graph is {\"seeds\": 5, \"max_added\": 15, \"hop_penalty\": 0.05}: seeds 1..50, max_added 1..100, hop_penalty in [0, 1).";

/// Parse a corpus' graph limits.
pub fn parse_limits(value: &Value) -> Result<GraphLimits> {
    let mut out = GraphLimits::default();
    let obj = match value {
        Value::Null => return Ok(out),
        Value::Object(o) => o,
        _ => return Err(invalid("graph must be a JSON object".into(), GRAPH_SHAPE)),
    };
    for (k, v) in obj {
        match k.as_str() {
            "seeds" => match v.as_u64() {
                Some(n) if (1..=50).contains(&n) => out.seeds = n as usize,
                _ => {
                    return Err(invalid(
                        format!("graph.seeds must be an integer from 1 to 50, got {}", crate::json::brief(v)),
                        GRAPH_SHAPE,
                    ))
                }
            },
            "max_added" => match v.as_u64() {
                Some(n) if (1..=100).contains(&n) => out.max_added = n as usize,
                _ => {
                    return Err(invalid(
                        format!("graph.max_added must be an integer from 1 to 100, got {}", crate::json::brief(v)),
                        GRAPH_SHAPE,
                    ))
                }
            },
            "hop_penalty" => match v.as_f64() {
                Some(p) if (0.0..1.0).contains(&p) => out.hop_penalty = p,
                _ => {
                    return Err(invalid(
                        format!("graph.hop_penalty must be a number in [0, 1), got {}", crate::json::brief(v)),
                        GRAPH_SHAPE,
                    ))
                }
            },
            other => {
                return Err(invalid(format!("graph has an unknown key {}", crate::json::brief_str(other)), GRAPH_SHAPE))
            }
        }
    }
    Ok(out)
}

/// Resolve an edge set against the corpus' sources and the edge table's live columns: both
/// columns exist and have the type of the ids they hold.
pub fn resolve_edges(def: &EdgeDef, corpus: &Corpus) -> Result<Edges> {
    let table = def.table.as_ref().ok_or_else(|| {
        CoreError::new(
            SqlState::UndefinedTable,
            format!("the table of edge set \"{}\" (oid {}) no longer exists", def.name, def.table_oid),
            format!(
                "Drop the edge set: SELECT corpus.corpus_drop_edges({}, {});",
                crate::sql::literal(&corpus.name),
                crate::sql::literal(&def.name)
            ),
        )
    })?;
    if !["r", "p", "v", "m", "f"].contains(&table.kind.as_str()) {
        return Err(CoreError::new(
            SqlState::WrongObjectType,
            format!(
                "the edge table {}.{} of edge set \"{}\" is not a table or view",
                table.schema, table.name, def.name
            ),
            "Register a table (or view) with one row per citation: the citing item's id and the cited item's id.",
        ));
    }
    let source = |name: &str| {
        corpus.sources.iter().position(|s| s.name == name).ok_or_else(|| {
            CoreError::new(
                SqlState::UndefinedObject,
                format!(
                    "edge set \"{}\" names source {}, which corpus \"{}\" does not have",
                    def.name,
                    crate::json::brief_str(name),
                    corpus.name
                ),
                "Edges join two sources of the corpus: see its sources in corpus.corpus_list().",
            )
        })
    };
    let from_source = source(&def.from_source)?;
    let to_source = source(&def.to_source)?;
    let column = |col: &str, src: usize, role: &str| -> Result<String> {
        let Some(info) = table.columns.get(col) else {
            return Err(CoreError::new(
                SqlState::UndefinedColumn,
                format!(
                    "column {} of edge table {}.{} does not exist",
                    crate::json::brief_str(col),
                    table.schema,
                    table.name
                ),
                format!(
                    "{role} names the column of the edge table that holds the ids of source \"{}\".",
                    corpus.sources[src].name
                ),
            ));
        };
        // compared in their built-in base types (ids are values of one, edge columns may be
        // domains over it): no value of a domain or of a table owner's type is ever built
        let want = &corpus.sources[src].id.cast_type;
        if !info.is_builtin() || info.cast_type() != want {
            return Err(CoreError::new(
                SqlState::DatatypeMismatch,
                format!(
                    "column \"{col}\" of edge table {}.{} is {}, the ids of source \"{}\" are {want}",
                    table.schema, table.name, info.sql_type, corpus.sources[src].name
                ),
                format!("{role} must have the type of the ids it holds, so that the edge is followed by an index."),
            ));
        }
        Ok(info.cast_type().to_string())
    };
    let from_type = column(&def.from_column, from_source, "from_column")?;
    column(&def.to_column, to_source, "to_column")?;
    Ok(Edges {
        name: def.name.clone(),
        oid: table.oid,
        schema: table.schema.clone(),
        table: table.name.clone(),
        from_source,
        from_column: def.from_column.clone(),
        from_type,
        to_source,
        to_column: def.to_column.clone(),
    })
}

/// A seed of an expansion: a hit of the search, in rank order.
#[derive(Debug, Clone, PartialEq)]
pub struct Seed {
    pub source: usize,
    pub item_id: String,
    pub score: f64,
}

/// A forward neighbour the edge tables returned: edge set, seed (index into the seeds), the
/// neighbour's source, id and parent.
#[derive(Debug, Clone, PartialEq)]
pub struct Neighbour {
    pub edges: usize,
    pub seed: usize,
    pub source: usize,
    pub item_id: String,
    pub parent_id: String,
}

/// A neighbour the expansion adds: its best seed's score times `1 - hop_penalty`.
#[derive(Debug, Clone, PartialEq)]
pub struct Added {
    pub neighbour: Neighbour,
    pub score: f64,
}

/// Choose what an expansion adds: neighbours of the first `limits.seeds` seeds only, none that
/// is already a hit (`present`), each once (its best seed's), best scores first (ties: seed
/// rank, source, id), at most `limits.max_added`.
pub fn expansion(
    seeds: &[Seed],
    neighbours: Vec<Neighbour>,
    present: impl Fn(usize, &str) -> bool,
    limits: &GraphLimits,
) -> Vec<Added> {
    let mut best: Vec<Added> = Vec::new();
    for n in neighbours {
        if n.seed >= seeds.len().min(limits.seeds) || present(n.source, &n.item_id) {
            continue;
        }
        let score = seeds[n.seed].score * (1.0 - limits.hop_penalty);
        match best.iter_mut().find(|a| a.neighbour.source == n.source && a.neighbour.item_id == n.item_id) {
            Some(a) if a.score >= score => {}
            Some(a) => *a = Added { neighbour: n, score },
            None => best.push(Added { neighbour: n, score }),
        }
    }
    best.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.neighbour.seed.cmp(&b.neighbour.seed))
            .then(a.neighbour.source.cmp(&b.neighbour.source))
            .then_with(|| crate::fusion::cmp_ids(&a.neighbour.item_id, &b.neighbour.item_id))
    });
    best.truncate(limits.max_added);
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::legal;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn classes_are_checked_against_the_corpus() {
        let c = legal();
        let ok = parse_must_include(&json!([{"name": "rules", "source": "halachot", "top": 2}]), &c).unwrap();
        assert_eq!(ok, vec![MustInclude { name: "rules".into(), source: Some(1), filters: json!({}), top: 2 }]);
        for (bad, state) in [
            (json!({}), SqlState::InvalidParameterValue),
            (json!([{"source": "halachot"}]), SqlState::InvalidParameterValue),
            (json!([{"name": "x"}]), SqlState::InvalidParameterValue),
            (json!([{"name": "x", "source": "nope"}]), SqlState::UndefinedObject),
            (json!([{"name": "x", "source": "halachot", "top": 0}]), SqlState::InvalidParameterValue),
            (json!([{"name": "x", "source": "halachot", "top": 21}]), SqlState::InvalidParameterValue),
            (
                json!([{"name": "x", "source": "halachot"}, {"name": "x", "source": "chunks"}]),
                SqlState::InvalidParameterValue,
            ),
            (json!([{"name": "x", "filters": {"source_kind": "internal_committee"}}]), SqlState::InsufficientPrivilege),
            (json!([{"name": "x", "filters": {"nope": 1}}]), SqlState::UndefinedColumn),
            (json!([{"name": "x", "source": "chunks", "other": 1}]), SqlState::InvalidParameterValue),
        ] {
            let e = parse_must_include(&bad, &c).unwrap_err();
            assert_eq!(e.state, state, "{bad}: {e:?}");
            assert!(!e.hint.is_empty());
        }
    }

    #[test]
    fn graph_limits_default_to_the_seed_and_are_bounded() {
        assert_eq!(parse_limits(&Value::Null).unwrap(), GraphLimits { seeds: 5, max_added: 15, hop_penalty: 0.05 });
        assert_eq!(parse_limits(&json!({"seeds": 2})).unwrap().seeds, 2);
        for bad in
            [json!({"seeds": 0}), json!({"max_added": 101}), json!({"hop_penalty": 1}), json!({"x": 1}), json!([])]
        {
            assert_eq!(parse_limits(&bad).unwrap_err().state, SqlState::InvalidParameterValue, "{bad}");
        }
    }

    fn seeds(n: usize) -> Vec<Seed> {
        (0..n).map(|i| Seed { source: 0, item_id: format!("s{i}"), score: 1.0 / (61.0 + i as f64) }).collect()
    }

    proptest! {
        /// Whatever the edge tables return: only the first `seeds` seeds' neighbours, none twice,
        /// none already a hit, at most `max_added`, each scored below its seed by the penalty.
        #[test]
        fn expansion_keeps_its_limits(
            raw in prop::collection::vec((0usize..3, 0usize..12, 0usize..2, 0u32..40), 0..200),
            n_seeds in 0usize..12,
            limit_seeds in 1usize..8,
            max_added in 1usize..20,
            penalty in 0.0f64..0.99,
        ) {
            let seeds = seeds(n_seeds);
            let limits = GraphLimits { seeds: limit_seeds, max_added, hop_penalty: penalty };
            let neighbours: Vec<Neighbour> = raw
                .iter()
                .filter(|(_, s, _, _)| *s < n_seeds)
                .map(|&(e, s, src, id)| Neighbour { edges: e, seed: s, source: src, item_id: id.to_string(), parent_id: "p".into() })
                .collect();
            let present = |src: usize, id: &str| src == 0 && id.parse::<u32>().unwrap() % 7 == 0;
            let added = expansion(&seeds, neighbours.clone(), present, &limits);
            prop_assert!(added.len() <= max_added);
            let mut seen = std::collections::HashSet::new();
            for a in &added {
                prop_assert!(a.neighbour.seed < limit_seeds);
                prop_assert!(seen.insert((a.neighbour.source, a.neighbour.item_id.clone())));
                prop_assert!(!present(a.neighbour.source, &a.neighbour.item_id));
                let seed_score = seeds[a.neighbour.seed].score;
                prop_assert!((a.score - seed_score * (1.0 - penalty)).abs() < 1e-15);
                prop_assert!(a.score <= seed_score);
                // its best seed: no other seed of it within the limit ranks better
                prop_assert!(!neighbours.iter().any(|n| n.source == a.neighbour.source
                    && n.item_id == a.neighbour.item_id && n.seed < a.neighbour.seed));
            }
            prop_assert!(added.windows(2).all(|w| w[0].score >= w[1].score));
            // nothing left out while room remained
            let eligible: std::collections::HashSet<(usize, String)> = neighbours
                .iter()
                .filter(|n| n.seed < limit_seeds && !present(n.source, &n.item_id))
                .map(|n| (n.source, n.item_id.clone()))
                .collect();
            prop_assert_eq!(added.len(), eligible.len().min(max_added));
        }
    }
}
