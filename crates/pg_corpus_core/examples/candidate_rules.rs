//! Candidate rules of the BM25 branch against exact BM25, offline, on a generated collection
//! (bench/lexical_speed.py writes it and reads the answer):
//!
//!     cargo run -p pg_corpus_core --release --example candidate_rules -- \
//!         DOCS.tsv QUERIES.tsv OUT.json [--budget 2000] [--k 10] [--window 40] \
//!         [--lists 50,100,250,500] [--language simple]
//!
//! DOCS.tsv: `corpus<TAB>item id<TAB>text` a line; QUERIES.tsv: `class<TAB>text` a line. Every
//! corpus is indexed on its own (`MemoryIndex`: its statistics are the corpus' statistics) and
//! every query is scored exhaustively (exact BM25, the reference), then through:
//!
//! - `budget`: the first round of the extension's plan for the query, built by this crate's
//!   functions: `lexical::candidate_plan` (which keys find candidates through the index, which
//!   only score, which take their champion lists' heads), the champion lists ordered by
//!   `bm25::tf_norm` (best first, item id as text breaking ties, at most
//!   `lexical::CHAMPION_LIST_LEN` items, for keys in more documents than that) and
//!   `lexical::preselect` over their heads. A search left short of `k` rows searches again
//!   with a wider window and budget, which this row does not model;
//! - `champions_M`: a sensitivity check, not what the extension does: the plan's index keys'
//!   documents plus, for every key the plan does not find through the index, the first M
//!   documents of its champion list, whatever its document frequency.
//!
//! For each rule and query: the candidates, overlap@k of the rule's top k with the exact top k,
//! and the exact score mass it keeps. OUT.json: `{corpus: [{class, plan, rules: {rule:
//! {candidates, overlap, score_mass}}}]}`, queries in file order.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use pg_corpus_core::analysis::{Analysis, Analyzer};
use pg_corpus_core::bm25::{self, Bm25Params, MemoryIndex};
use pg_corpus_core::lexical::{self, ChampionHead, QueryKey, CHAMPION_LIST_LEN};
use pg_corpus_core::model::Language;
use serde_json::{json, Value};

struct Args {
    docs: String,
    queries: String,
    out: String,
    budget: u64,
    k: usize,
    window: usize,
    lists: Vec<usize>,
    language: Language,
}

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("candidate_rules: {msg}");
    std::process::exit(2)
}

fn args() -> Args {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let mut pos = Vec::new();
    let mut opt: HashMap<String, String> = HashMap::new();
    let mut it = raw.into_iter();
    while let Some(a) = it.next() {
        match a.strip_prefix("--") {
            Some(name) => {
                opt.insert(name.to_string(), it.next().unwrap_or_else(|| fail(format!("--{name} wants a value"))));
            }
            None => pos.push(a),
        }
    }
    if pos.len() != 3 {
        fail("usage: candidate_rules DOCS.tsv QUERIES.tsv OUT.json [--budget N] [--k N] [--window N] [--lists M,..] [--language L]");
    }
    let num = |name: &str, default: usize| -> usize {
        opt.get(name).map_or(default, |v| v.parse().unwrap_or_else(|_| fail(format!("--{name}: not a number"))))
    };
    Args {
        docs: pos[0].clone(),
        queries: pos[1].clone(),
        out: pos[2].clone(),
        budget: num("budget", 2000) as u64,
        k: num("k", 10),
        window: num("window", 40),
        lists: opt.get("lists").map_or_else(
            || vec![50, 100, 250, 500],
            |v| v.split(',').map(|m| m.trim().parse().unwrap_or_else(|_| fail("--lists: numbers"))).collect(),
        ),
        language: Language::parse(opt.get("language").map_or("simple", String::as_str)).unwrap_or_else(|e| fail(e)),
    }
}

fn read_tsv(path: &str, fields: usize) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(Path::new(path)).unwrap_or_else(|e| fail(format!("{path}: {e}")));
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<String> = l.splitn(fields, '\t').map(str::to_string).collect();
            if f.len() != fields {
                fail(format!("{path}: a line without {fields} fields"));
            }
            f
        })
        .collect()
}

/// One corpus: its items, their analyses, the index and every key's documents with counts.
struct Corpus {
    ids: Vec<String>,
    analyses: Vec<Analysis>,
    index: MemoryIndex,
    postings: HashMap<String, Vec<(usize, u32)>>,
}

impl Corpus {
    fn new(items: Vec<(String, String)>, analyzer: &Analyzer) -> Corpus {
        let mut c =
            Corpus { ids: Vec::new(), analyses: Vec::new(), index: MemoryIndex::new(), postings: HashMap::new() };
        for (id, text) in items {
            let a = analyzer.analyze(&text);
            let doc = c.index.add(&a);
            for t in &a.terms {
                c.postings.entry(t.key.clone()).or_default().push((doc, t.count));
            }
            c.ids.push(id);
            c.analyses.push(a);
        }
        c
    }

    /// The key's champion list: its documents by BM25 term weight, best first, item id as
    /// text breaking ties, with the weights.
    fn champion_list(&self, key: &str, p: Bm25Params) -> Vec<(usize, f64)> {
        let avg = self.index.stats().avg_doc_len().max(1.0);
        let mut list: Vec<(usize, f64)> = self
            .postings
            .get(key)
            .map(|post| {
                post.iter()
                    .map(|&(d, tf)| (d, bm25::tf_norm(tf as f64, self.index.doc_len(d) as f64, avg, p)))
                    .collect()
            })
            .unwrap_or_default();
        list.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| self.ids[a.0].cmp(&self.ids[b.0])));
        list
    }

    fn containing(&self, key: &str) -> impl Iterator<Item = usize> + '_ {
        self.postings.get(key).into_iter().flatten().map(|&(d, _)| d)
    }
}

/// The rule's top k by exact score (ties by document number, as the exact reference), against
/// the exact top k.
fn judge(candidates: &HashSet<usize>, scores: &[f64], exact: &[(usize, f64)], k: usize) -> Value {
    let mut got: Vec<usize> = candidates.iter().copied().filter(|&d| scores[d] > 0.0).collect();
    got.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    got.truncate(k);
    let exact_ids: HashSet<usize> = exact.iter().map(|e| e.0).collect();
    let mass: f64 = exact.iter().map(|e| e.1).sum();
    json!({
        "candidates": candidates.len(),
        "overlap": got.iter().filter(|d| exact_ids.contains(d)).count() as f64 / k as f64,
        "score_mass": if mass > 0.0 { got.iter().map(|&d| scores[d]).sum::<f64>() / mass } else { 1.0 },
    })
}

fn main() {
    let a = args();
    let analyzer = Analyzer::new(a.language);
    let p = Bm25Params::default();
    let mut items: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for f in read_tsv(&a.docs, 3) {
        let mut f = f.into_iter();
        let (corpus, id, text) =
            (f.next().unwrap_or_default(), f.next().unwrap_or_default(), f.next().unwrap_or_default());
        items.entry(corpus).or_default().push((id, text));
    }
    let queries = read_tsv(&a.queries, 2);
    let mut out = serde_json::Map::new();
    for (name, docs) in items {
        let c = Corpus::new(docs, &analyzer);
        let n_docs = c.index.len() as u64;
        let mut lists: HashMap<String, Vec<(usize, f64)>> = HashMap::new();
        let mut rows = Vec::new();
        for q in &queries {
            let terms = analyzer.query_terms(&q[1]);
            let keys: Vec<QueryKey> =
                terms.iter().map(|t| QueryKey { key: t.key.clone(), weight: t.weight * t.count as f64 }).collect();
            let scores = c.index.scores(&terms, p);
            let exact = c.index.search(&terms, p, a.k);
            let Some(plan) = lexical::candidate_plan(&keys, |k| c.index.df(k), n_docs, a.budget, a.k) else {
                rows.push(json!({"class": q[0], "plan": "none", "rules": {}}));
                continue;
            };
            for k in &keys {
                lists.entry(k.key.clone()).or_insert_with(|| c.champion_list(&k.key, p));
            }
            let through_index: Vec<&str> = keys
                .iter()
                .map(|k| k.key.as_str())
                .filter(|k| !plan.common.iter().any(|c| c == k) && !plan.champions.iter().any(|c| c == k))
                .collect();
            let found: HashSet<usize> = through_index.iter().flat_map(|k| c.containing(k)).collect();
            let mut rules = serde_json::Map::new();
            // the extension's first round: the index keys' documents and the items preselected
            // from the champion lists' heads
            let weight = |key: &str| plan.scored.iter().find(|s| s.key == key).map_or(0.0, |s| s.weight_idf);
            let heads: Vec<ChampionHead> = plan
                .champions
                .iter()
                .filter(|k| c.index.df(k) > CHAMPION_LIST_LEN)
                .map(|k| {
                    let head = &lists[k.as_str()][..(plan.champion_prefix as usize).min(lists[k.as_str()].len())];
                    ChampionHead {
                        weight_idf: weight(k),
                        items: head.iter().map(|&(d, _)| c.ids[d].clone()).collect(),
                        impacts: head.iter().map(|&(_, w)| w).collect(),
                    }
                })
                .collect();
            let unlisted: f64 = plan
                .scored
                .iter()
                .filter(|s| !plan.champions.contains(&s.key))
                .map(|s| s.weight_idf.max(0.0) * (p.k1 + 1.0))
                .sum();
            let by_id: HashMap<&str, usize> = c.ids.iter().enumerate().map(|(d, id)| (id.as_str(), d)).collect();
            let mut budget_set = found.clone();
            budget_set.extend(
                lexical::preselect(&heads, unlisted, a.window, a.budget as usize)
                    .iter()
                    .filter_map(|id| by_id.get(id.as_str())),
            );
            rules.insert("budget".into(), judge(&budget_set, &scores, &exact, a.k));
            // sensitivity: the first M of the list of every key the plan does not find through the index
            for &m in &a.lists {
                let mut set = found.clone();
                for k in keys.iter().filter(|k| !through_index.contains(&k.key.as_str())) {
                    set.extend(lists[k.key.as_str()].iter().take(m).map(|e| e.0));
                }
                rules.insert(format!("champions_{m}"), judge(&set, &scores, &exact, a.k));
            }
            let kind = if plan.champions.is_empty() {
                "index"
            } else if found.is_empty() {
                "champions"
            } else {
                "index+champions"
            };
            rows.push(json!({"class": q[0], "plan": kind, "rules": rules}));
        }
        eprintln!("{name}: {} documents, {} queries", n_docs, rows.len());
        out.insert(name, Value::Array(rows));
    }
    let text = serde_json::to_string(&Value::Object(out)).unwrap_or_else(|e| fail(e));
    std::fs::write(&a.out, text).unwrap_or_else(|e| fail(format!("{}: {e}", a.out)));
}
