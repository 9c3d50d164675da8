//! Test support of the engine's stages: a fake executor over in-memory items per source, each
//! with its distance to the query and its lexical score, that records every call the engine
//! makes; and the builders of corpora, arguments and searches the stages' tests share.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::engine::{
    search, validate, Args, ChampionList, ChampionRequest, Config, Executor, FeedbackDoc, FetchedRow, ItemKeysQuery,
    ItemsQuery, NeighboursQuery, Request, SeedItem, SeedQuery, Setting, SliceOf, SliceQuery, TermStats,
};
use crate::error::{CoreError, Result};
use crate::lexical::QueryKey;
use crate::model::{Branch, Corpus, Hit, SearchRow, Strategy};
use crate::plan::Subplan;
use crate::sql::Param;
use crate::testing::legal;

#[derive(Debug, Clone)]
pub struct Item {
    pub id: String,
    pub parent: String,
    pub distance: f64,
    /// BM25 score (None: no query key in it).
    pub lexical: Option<f64>,
    /// Found by the query's rarer keys (else only by common keys, which a pruned plan misses).
    pub rare: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    Branch {
        source: usize,
        branch: Branch,
        strategy: Strategy,
        limit: i64,
        settings: Vec<Setting>,
        vector0: f32,
        sql: String,
    },
    /// The estimate statement's SQL.
    Estimate(String),
    Count,
    TableRows,
    Partial(usize),
    Probe(usize),
    ParentProbe,
    TermStats(Vec<String>),
    Champions(usize),
    TsKeys,
    Feedback(Vec<String>),
    Fetch(Vec<String>),
    Queued(usize),
    Seed(usize),
    ItemKeys(usize, Vec<String>),
    Neighbours(Vec<String>),
    Models(Vec<(i64, String)>),
}

pub struct Fake {
    pub items: Vec<Vec<Item>>,
    pub slice_rows: Vec<f64>,
    pub table_rows: Vec<f64>,
    pub df: HashMap<String, u64>,
    pub documents: u64,
    pub calls: Vec<Call>,
    /// Fail the n-th call (0-based) with this error.
    pub fail_at: Option<(usize, CoreError)>,
    /// Ids the final fetch does not return (deleted since the branches ran).
    pub vanished: Vec<String>,
    /// Ids queued for re-embedding (stale embeddings).
    pub stale: Vec<String>,
    /// Sources whose approximate subplan a partial HNSW index serves.
    pub partial_index: Vec<usize>,
    /// The planner's estimate of the corpus' parents.
    pub parent_rows: f64,
    /// Whether any parent is in the corpus (None: when a source has items).
    pub parents_in_corpus: Option<bool>,
    /// Sources whose champion lists the caller may not read (none come back).
    pub unlisted: Vec<String>,
    /// (first component of a query vector, item id): a semantic subplan with that vector (to
    /// within 1e-6) finds the item nearest of all (distance 0.0).
    pub boost_vector: Vec<(f32, String)>,
    /// (query key, item id): a lexical subplan scoring that key finds the item best of all.
    pub boost_key: Vec<(String, String)>,
    /// Item id → the index terms it holds (what the evidence filter asks about).
    pub terms: HashMap<String, Vec<String>>,
    /// Seed id → the (item id, parent id) its edges point to.
    pub cites: HashMap<String, Vec<(String, String)>>,
    /// Source → the stored vector of its items a find-similar search starts from (else a
    /// vector of the default space starting with 9.0).
    pub seed_vectors: HashMap<usize, Vec<f32>>,
    /// A probe of one item whose SQL contains this fails (the item exists otherwise).
    pub failing_probe: Option<&'static str>,
    /// (table OID, column) → the models of that embedding column (else none recorded).
    pub models: HashMap<(i64, String), crate::engine::SlotModels>,
}

impl Fake {
    pub fn new(items: Vec<Vec<Item>>) -> Fake {
        let n = items.len();
        Fake {
            slice_rows: items.iter().map(|l| l.len() as f64).collect(),
            table_rows: vec![100_000.0; n],
            items,
            df: HashMap::new(),
            documents: 50_000,
            calls: Vec::new(),
            fail_at: None,
            vanished: Vec::new(),
            stale: Vec::new(),
            partial_index: Vec::new(),
            parent_rows: 5_000.0,
            parents_in_corpus: None,
            unlisted: Vec::new(),
            boost_vector: Vec::new(),
            boost_key: Vec::new(),
            terms: HashMap::new(),
            cites: HashMap::new(),
            seed_vectors: HashMap::new(),
            failing_probe: None,
            models: HashMap::new(),
        }
    }

    pub fn record(&mut self, c: Call) -> Result<()> {
        if let Some((n, e)) = &self.fail_at {
            if *n == self.calls.len() {
                self.calls.push(c);
                return Err(e.clone());
            }
        }
        self.calls.push(c);
        Ok(())
    }

    pub fn branch_calls(&self) -> Vec<(usize, Branch, i64)> {
        self.calls
            .iter()
            .filter_map(|c| match c {
                Call::Branch { source, branch, limit, .. } => Some((*source, *branch, *limit)),
                _ => None,
            })
            .collect()
    }

    /// The first component of the query vector of every semantic subplan that ran, in order.
    pub fn semantic_vectors(&self) -> Vec<f32> {
        self.calls
            .iter()
            .filter_map(|c| match c {
                Call::Branch { branch: Branch::Semantic, vector0, .. } => Some(*vector0),
                _ => None,
            })
            .collect()
    }
}

impl Executor for Fake {
    fn branch_hits(&mut self, p: &Subplan, settings: &[Setting]) -> Result<Vec<Hit>> {
        let vector0 = match p.params.first() {
            Some(Param::Floats(v)) => v[0],
            _ => f32::NAN,
        };
        self.record(Call::Branch {
            source: p.source,
            branch: p.branch,
            strategy: p.strategy,
            limit: p.limit,
            settings: settings.to_vec(),
            vector0,
            sql: p.sql.clone(),
        })?;
        let keys = match (p.branch, p.params.first()) {
            (Branch::Lexical, Some(Param::TextArray(keys))) => keys.clone(),
            _ => Vec::new(),
        };
        let boosted: Vec<&String> = match p.branch {
            Branch::Semantic => {
                self.boost_vector.iter().filter(|(v, _)| (v - vector0).abs() < 1e-6).map(|(_, id)| id).collect()
            }
            Branch::Lexical => self.boost_key.iter().filter(|(k, _)| keys.contains(k)).map(|(_, id)| id).collect(),
        };
        let mut rows: Vec<(&Item, f64)> = match p.branch {
            Branch::Semantic => self.items[p.source]
                .iter()
                .map(|i| (i, if boosted.contains(&&i.id) { 0.0 } else { i.distance }))
                .collect(),
            Branch::Lexical => self.items[p.source]
                .iter()
                .filter(|i| i.lexical.is_some() && (!p.pruned || i.rare))
                .map(|i| (i, if boosted.contains(&&i.id) { 1e9 } else { i.lexical.unwrap() }))
                .collect(),
        };
        match p.branch {
            Branch::Semantic => rows.sort_by(|a, b| a.1.total_cmp(&b.1)),
            Branch::Lexical => rows.sort_by(|a, b| b.1.total_cmp(&a.1)),
        }
        Ok(rows
            .into_iter()
            .take(p.limit as usize)
            .map(|(i, raw)| Hit { source: p.source, item_id: i.id.clone(), parent_id: i.parent.clone(), raw })
            .collect())
    }

    fn estimate_rows(&mut self, q: &SliceQuery) -> Result<f64> {
        self.record(Call::Estimate(q.sql.clone()))?;
        Ok(match q.of {
            SliceOf::Parents => self.parent_rows,
            SliceOf::Items => self.slice_rows[q.source],
        })
    }

    fn served_by_partial_index(&mut self, p: &Subplan, settings: &[Setting]) -> Result<bool> {
        assert_eq!(p.strategy, Strategy::Approximate);
        assert!(settings.iter().any(|s| s.name == "hnsw.iterative_scan"), "asked under the ANN settings");
        self.record(Call::Partial(p.source))?;
        Ok(self.partial_index.contains(&p.source))
    }

    fn any_row(&mut self, q: &SliceQuery) -> Result<bool> {
        assert!(q.sql.ends_with("\nLIMIT 1"), "{}", q.sql);
        if q.of == SliceOf::Parents {
            self.record(Call::ParentProbe)?;
            return Ok(self.parents_in_corpus.unwrap_or_else(|| self.items.iter().any(|l| !l.is_empty())));
        }
        self.record(Call::Probe(q.source))?;
        // a probe of one item (plan::item_probe): the item exists, and passes unless its SQL
        // holds the failing part
        if let (true, Some(crate::sql::Param::Text(id))) = (q.sql.contains("i.\"id\" = $1::text::"), q.params.first()) {
            let wanted = id.trim().parse::<u64>().map(|n| n.to_string()).unwrap_or_else(|_| id.clone());
            let exists = self.items[q.source].iter().any(|i| i.id == wanted);
            return Ok(exists && !self.failing_probe.is_some_and(|s| q.sql.contains(s)));
        }
        Ok(!self.items[q.source].is_empty())
    }

    fn count_rows(&mut self, q: &SliceQuery) -> Result<f64> {
        self.record(Call::Count)?;
        Ok(self.slice_rows[q.source])
    }

    fn table_rows(&mut self, tables: &[i64]) -> Result<Vec<f64>> {
        self.record(Call::TableRows)?;
        Ok(self.table_rows[..tables.len()].to_vec())
    }

    fn term_stats(&mut self, _corpus: &str, terms: &[String]) -> Result<TermStats> {
        self.record(Call::TermStats(terms.to_vec()))?;
        Ok(TermStats {
            df: terms.iter().filter_map(|t| self.df.get(t).map(|d| (t.clone(), *d))).collect(),
            documents: self.documents,
            total_length: self.documents * 80,
        })
    }

    fn champion_heads(&mut self, _corpus: &str, requests: &[ChampionRequest]) -> Result<Vec<Vec<ChampionList>>> {
        self.record(Call::Champions(requests.len()))?;
        Ok(requests
            .iter()
            .map(|r| {
                if self.unlisted.contains(&r.source) {
                    return Vec::new();
                }
                let src = if r.source == "halachot" { 1 } else { 0 };
                r.terms
                    .iter()
                    .map(|t| ChampionList {
                        term: t.clone(),
                        items: self.items[src].iter().take(r.prefix as usize).map(|i| i.id.clone()).collect(),
                        impacts: self.items[src].iter().take(r.prefix as usize).map(|_| 1.0).collect(),
                    })
                    .collect()
            })
            .collect())
    }

    fn ts_query_keys(&mut self, _ts_config: i64, text: &str) -> Result<Vec<QueryKey>> {
        self.record(Call::TsKeys)?;
        Ok(text.split_whitespace().map(|w| QueryKey { key: w.to_lowercase(), weight: 1.0 }).collect())
    }

    fn feedback_docs(&mut self, q: &ItemsQuery) -> Result<HashMap<String, FeedbackDoc>> {
        let ids = q.ids.clone();
        self.record(Call::Feedback(ids.clone()))?;
        Ok(ids
            .into_iter()
            .map(|id| {
                let tf: BTreeMap<String, f64> = [(format!("term{}", id.len()), 2.0)].into_iter().collect();
                (id, FeedbackDoc { embedding: Some(vec![1.0; 384]), tf })
            })
            .collect())
    }

    fn fetch_rows(&mut self, q: &ItemsQuery) -> Result<Vec<FetchedRow>> {
        let ids = q.ids.clone();
        self.record(Call::Fetch(ids.clone()))?;
        Ok(ids
            .into_iter()
            .filter(|id| !self.vanished.contains(id))
            .map(|id| FetchedRow {
                content: Some(format!("text of {id}")),
                locator: json!({"id": id}),
                metadata: json!({}),
                item_id: id,
            })
            .collect())
    }

    fn seed_item(&mut self, q: &SeedQuery) -> Result<Option<SeedItem>> {
        let src = q.source;
        self.record(Call::Seed(src))?;
        assert!(q.sql.contains("p.\"source_kind\" = "), "the seed is looked up under the corpus predicate:\n{}", q.sql);
        let id = &q.item_id;
        // the fake's ids are integers: '012' and ' 12' are item 12, as the SQL cast makes them
        let wanted = id.trim().parse::<u64>().map(|n| n.to_string()).unwrap_or_else(|_| id.clone());
        Ok(self.items[src].iter().find(|i| i.id == wanted).map(|i| SeedItem {
            item_id: i.id.clone(),
            parent_id: Some(i.parent.clone()),
            embedding: Some(self.seed_vectors.get(&src).cloned().unwrap_or_else(|| vector_starting(9.0))),
            content: Some("חוזה שכירות".into()),
        }))
    }

    fn embedding_models(&mut self, columns: &[(i64, String)]) -> Result<Vec<crate::engine::SlotModels>> {
        self.record(Call::Models(columns.to_vec()))?;
        Ok(columns.iter().map(|c| self.models.get(c).cloned().unwrap_or_default()).collect())
    }

    fn item_keys(&mut self, q: &ItemKeysQuery) -> Result<HashMap<String, Vec<String>>> {
        let (src, ids, keys) = (q.source, &q.ids, &q.keys);
        assert!(
            q.sql.contains("p.\"source_kind\" = "),
            "the evidence check runs under the corpus predicate:\n{}",
            q.sql
        );
        self.record(Call::ItemKeys(src, ids.clone()))?;
        Ok(ids
            .iter()
            .filter(|id| self.items[src].iter().any(|i| &i.id == *id))
            .map(|id| {
                let held =
                    self.terms.get(id).map_or(Vec::new(), |t| t.iter().filter(|k| keys.contains(k)).cloned().collect());
                (id.clone(), held)
            })
            .collect())
    }

    fn neighbours(&mut self, q: &NeighboursQuery) -> Result<Vec<(String, String, String)>> {
        assert!(
            q.sql.contains("p.\"source_kind\" = "),
            "neighbours are looked up under the corpus predicate:\n{}",
            q.sql
        );
        let (seeds, exclude, per_seed) = (&q.seeds, &q.exclude, &q.per_seed);
        self.record(Call::Neighbours(seeds.clone()))?;
        let mut out = Vec::new();
        for seed in seeds {
            let mut n: Vec<&(String, String)> = self
                .cites
                .get(seed)
                .map(|v| v.iter().filter(|(id, _)| !exclude.contains(id)).collect())
                .unwrap_or_default();
            n.truncate(*per_seed as usize);
            out.extend(n.into_iter().map(|(id, parent)| (seed.clone(), id.clone(), parent.clone())));
        }
        Ok(out)
    }

    fn queued_items(&mut self, lookup: &crate::plan::QueueLookup) -> Result<Vec<(usize, String)>> {
        assert_eq!(lookup.through_items, lookup.sql.contains("corpus._item_queued("), "{}", lookup.sql);
        let asked = lookup.asked.clone();
        self.record(Call::Queued(asked.len()))?;
        Ok(asked.into_iter().filter(|(_, id)| self.stale.contains(id)).collect())
    }
}

/// `n` items of source `src`: item j in parent j / per_parent, distances and scores rising
/// and falling with j.
pub fn items(src: usize, n: usize, per_parent: usize) -> Vec<Item> {
    (0..n)
        .map(|j| Item {
            id: format!("{}", src * 100_000 + j + 1),
            parent: format!("{}", j / per_parent.max(1)),
            distance: 0.1 + j as f64 * 0.001 + src as f64 * 0.0005,
            lexical: Some(100.0 - j as f64 * 0.01),
            rare: j % 2 == 0,
        })
        .collect()
}

/// Make every item of source `src` far from the query and without any of its words: a search
/// ranks them last.
pub fn unmatched(f: &mut Fake, src: usize) {
    for i in f.items[src].iter_mut() {
        i.distance += 5.0;
        i.lexical = None;
    }
}

pub fn corpus() -> Arc<Corpus> {
    Arc::new(legal())
}

pub fn vec384() -> Vec<f32> {
    (0..384).map(|i| (i as f32 * 0.37).sin()).collect()
}

pub fn args(mode: &str) -> Args {
    Args {
        query_vec: (mode != "lexical").then(vec384),
        query_text: (mode != "semantic").then(|| "חוזה שכירות".to_string()),
        mode: mode.into(),
        ..Args::default()
    }
}

pub fn run(fake: &mut Fake, a: Args, config: Config) -> Result<Vec<SearchRow>> {
    run_in(corpus(), fake, a, config)
}

pub fn run_in(corpus: Arc<Corpus>, fake: &mut Fake, a: Args, config: Config) -> Result<Vec<SearchRow>> {
    let checked = a.check(&config)?;
    let req = Request::prepare(validate(corpus, a, checked, config)?, fake)?;
    search(&req, fake)
}

pub fn default_fake() -> Fake {
    let mut f = Fake::new(vec![items(0, 5000, 10), items(1, 5000, 10)]);
    f.df = [("חוזה".to_string(), 10u64), ("שכירות".to_string(), 40)].into_iter().collect();
    f
}

/// A vector of the corpus' dimension whose first component is `first` (the fake's boost key).
pub fn vector_starting(first: f32) -> Vec<f32> {
    let mut v = vec384();
    v[0] = first;
    v
}

pub fn extra_json(first: f32) -> Value {
    Value::from(vector_starting(first).into_iter().map(f64::from).collect::<Vec<f64>>())
}

/// The legal corpus with page images in a second embedding space ([`crate::testing::with_pages_def`]).
pub fn pages_corpus() -> Arc<Corpus> {
    Arc::new(crate::definition::resolve(&serde_json::from_value(crate::testing::with_pages_def()).unwrap()).unwrap())
}

/// 500 items of each of the pages corpus' three sources.
pub fn pages_fake() -> Fake {
    let mut f = Fake::new(vec![items(0, 500, 10), items(1, 500, 10), items(2, 500, 10)]);
    f.df = [("חוזה".to_string(), 10u64), ("שכירות".to_string(), 40)].into_iter().collect();
    f
}

pub fn evidence_corpus(cfg: Value) -> Arc<Corpus> {
    let mut c = legal();
    c.evidence = crate::evidence::parse(&cfg, &c.spaces).unwrap();
    Arc::new(c)
}

pub fn run_on(corpus: Arc<Corpus>, fake: &mut Fake, a: Args) -> Result<Vec<SearchRow>> {
    let config = Config::default();
    let checked = a.check(&config)?;
    let req = Request::prepare(validate(corpus, a, checked, config)?, fake)?;
    search(&req, fake)
}
