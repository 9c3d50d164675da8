//! The search policy against a fake executor: in-memory items per source, each with its
//! distance to the query and its lexical score; every call the engine makes is recorded.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use super::{semantic_plans, SliceOf};
use crate::error::{CoreError, Result, SqlState};
use crate::lexical::QueryKey;
use crate::model::{Branch, Corpus, Hit, SearchRow, Strategy};
use crate::plan::Subplan;
use crate::sql::Param;
use crate::testing::legal;

#[derive(Debug, Clone)]
struct Item {
    id: String,
    parent: String,
    distance: f64,
    /// BM25 score (None: no query key in it).
    lexical: Option<f64>,
    /// Found by the query's rarer keys (else only by common keys, which a pruned plan misses).
    rare: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Call {
    Branch {
        source: usize,
        branch: Branch,
        strategy: Strategy,
        limit: i64,
        settings: Vec<Setting>,
        vector0: f32,
        sql: String,
    },
    Estimate,
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
}

struct Fake {
    items: Vec<Vec<Item>>,
    slice_rows: Vec<f64>,
    table_rows: Vec<f64>,
    df: HashMap<String, u64>,
    documents: u64,
    calls: Vec<Call>,
    /// Fail the n-th call (0-based) with this error.
    fail_at: Option<(usize, CoreError)>,
    /// Ids the final fetch does not return (deleted since the branches ran).
    vanished: Vec<String>,
    /// Ids queued for re-embedding (stale embeddings).
    stale: Vec<String>,
    /// Sources whose approximate subplan a partial HNSW index serves.
    partial_index: Vec<usize>,
    /// The planner's estimate of the corpus' parents.
    parent_rows: f64,
    /// Whether any parent is in the corpus (None: when a source has items).
    parents_in_corpus: Option<bool>,
    /// Sources whose champion lists the caller may not read (none come back).
    unlisted: Vec<String>,
    /// (first component of a query vector, item id): a semantic subplan with that vector finds
    /// the item nearest of all (distance 0.0).
    boost_vector: Vec<(f32, String)>,
    /// (query key, item id): a lexical subplan scoring that key finds the item best of all.
    boost_key: Vec<(String, String)>,
    /// Item id → the index terms it holds (what the evidence filter asks about).
    terms: HashMap<String, Vec<String>>,
    /// Seed id → the (item id, parent id) its edges point to.
    cites: HashMap<String, Vec<(String, String)>>,
}

impl Fake {
    fn new(items: Vec<Vec<Item>>) -> Fake {
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
        }
    }

    fn record(&mut self, c: Call) -> Result<()> {
        if let Some((n, e)) = &self.fail_at {
            if *n == self.calls.len() {
                self.calls.push(c);
                return Err(e.clone());
            }
        }
        self.calls.push(c);
        Ok(())
    }

    fn branch_calls(&self) -> Vec<(usize, Branch, i64)> {
        self.calls
            .iter()
            .filter_map(|c| match c {
                Call::Branch { source, branch, limit, .. } => Some((*source, *branch, *limit)),
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
            Branch::Semantic => self.boost_vector.iter().filter(|(v, _)| *v == vector0).map(|(_, id)| id).collect(),
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
        self.record(Call::Estimate)?;
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
            embedding: Some(vector_starting(9.0)),
            content: Some("חוזה שכירות".into()),
        }))
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
fn items(src: usize, n: usize, per_parent: usize) -> Vec<Item> {
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

fn corpus() -> Arc<Corpus> {
    Arc::new(legal())
}

fn vec384() -> Vec<f32> {
    (0..384).map(|i| (i as f32 * 0.37).sin()).collect()
}

fn args(mode: &str) -> Args {
    Args {
        query_vec: (mode != "lexical").then(vec384),
        query_text: (mode != "semantic").then(|| "חוזה שכירות".to_string()),
        mode: mode.into(),
        ..Args::default()
    }
}

fn run(fake: &mut Fake, a: Args, config: Config) -> Result<Vec<SearchRow>> {
    run_in(corpus(), fake, a, config)
}

fn run_in(corpus: Arc<Corpus>, fake: &mut Fake, a: Args, config: Config) -> Result<Vec<SearchRow>> {
    let checked = a.check(&config)?;
    let req = Request::prepare(validate(corpus, a, checked, config)?, fake)?;
    search(&req, fake)
}

/// The legal corpus with its item tables distributed by Citus on the parent key.
fn distributed_corpus() -> Arc<Corpus> {
    let mut c = legal();
    for s in &mut c.sources {
        s.item.distribution = Some(s.parent_fk.column.clone());
    }
    Arc::new(c)
}

fn default_fake() -> Fake {
    let mut f = Fake::new(vec![items(0, 5000, 10), items(1, 5000, 10)]);
    f.df = [("חוזה".to_string(), 10u64), ("שכירות".to_string(), 40)].into_iter().collect();
    f
}

#[test]
fn hybrid_runs_both_branches_of_every_source_and_fuses_them() {
    let mut f = default_fake();
    let rows = run(&mut f, args("hybrid"), Config::default()).unwrap();
    assert_eq!(rows.len(), 10);
    let branches = f.branch_calls();
    assert_eq!(
        branches,
        vec![(0, Branch::Semantic, 40), (0, Branch::Lexical, 40), (1, Branch::Semantic, 40), (1, Branch::Lexical, 40)]
    );
    // ranks are 1..=k, scores non-increasing, every hit has the provenance of a branch
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.rank as usize, i + 1);
        assert!(r.semantic_rank.is_some() || r.lexical_rank.is_some());
        assert_eq!(r.content.as_deref(), Some(format!("text of {}", r.item_id).as_str()));
    }
    assert!(rows.windows(2).all(|w| w[0].score >= w[1].score));
    // the legal schema's sources share case_law: at most 3 hits per parent over both
    let mut per_parent: HashMap<&str, usize> = HashMap::new();
    for r in &rows {
        *per_parent.entry(r.parent_id.as_str()).or_default() += 1;
    }
    assert!(per_parent.values().all(|&n| n <= 3), "{per_parent:?}");
    // one round trip for the statistics of all keys, one reltuples read, one fetch per source
    assert_eq!(f.calls.iter().filter(|c| matches!(c, Call::TermStats(_))).count(), 1);
    assert_eq!(f.calls.iter().filter(|c| matches!(c, Call::TableRows)).count(), 1);
    assert!(f.calls.iter().filter(|c| matches!(c, Call::Fetch(_))).count() <= 2);
}

#[test]
fn a_small_slice_is_searched_exactly_a_large_one_through_hnsw_with_its_scan_budget() {
    let mut f = default_fake();
    f.slice_rows = vec![3000.0, 20_000.0];
    f.table_rows = vec![1_000_000.0, 200_000.0];
    run(&mut f, args("semantic"), Config::default()).unwrap();
    let strategies: Vec<(Strategy, Vec<Setting>)> = f
        .calls
        .iter()
        .filter_map(|c| match c {
            Call::Branch { strategy, settings, .. } => Some((*strategy, settings.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(strategies[0].0, Strategy::Exact);
    assert!(strategies[0].1.is_empty(), "an exact subplan needs no settings");
    assert_eq!(strategies[1].0, Strategy::Approximate);
    let budget = strategies[1].1.iter().find(|s| s.name == "hnsw.max_scan_tuples").unwrap();
    // 40 rows of a 10% slice, four times over: 1,600, raised to the 20,000 floor
    assert_eq!(budget.value, "20000");
    assert!(strategies[1].1.iter().any(|s| s.name == "hnsw.iterative_scan" && s.value == "relaxed_order"));
}

#[test]
fn a_small_slice_covered_by_a_partial_hnsw_index_uses_it() {
    let mut f = default_fake();
    f.slice_rows = vec![3000.0, 3000.0];
    f.partial_index = vec![1];
    run(&mut f, args("semantic"), Config::default()).unwrap();
    let strategies: Vec<(usize, Strategy)> = f
        .calls
        .iter()
        .filter_map(|c| match c {
            Call::Branch { source, strategy, .. } => Some((*source, *strategy)),
            _ => None,
        })
        .collect();
    assert_eq!(strategies, vec![(0, Strategy::Exact), (1, Strategy::Approximate)]);
    // a large slice is approximate anyway: the planner is not asked
    let mut f = default_fake();
    f.slice_rows = vec![50_000.0, 50_000.0];
    run(&mut f, args("semantic"), Config::default()).unwrap();
    assert!(!f.calls.iter().any(|c| matches!(c, Call::Partial(_))));
}

#[test]
fn the_window_widens_until_k_rows_survive_the_cap() {
    // 40 items per parent: the first window of 40 holds one or two parents per source
    let mut f = Fake::new(vec![items(0, 5000, 40), items(1, 5000, 40)]);
    let mut a = args("semantic");
    a.max_per_parent = Some(1);
    let rows = run(&mut f, a, Config::default()).unwrap();
    assert_eq!(rows.len(), 10);
    let limits: Vec<i64> = f.branch_calls().iter().filter(|c| c.0 == 0).map(|c| c.2).collect();
    assert_eq!(limits, vec![40, 160, 640], "×4 per round until 10 parents are in the window");
    let parents: std::collections::HashSet<&str> = rows.iter().map(|r| r.parent_id.as_str()).collect();
    assert_eq!(parents.len(), 10);
}

#[test]
fn the_window_stops_widening_when_the_sources_are_exhausted_or_at_max_candidates() {
    // 30 items in all, 10 parents of 3: a cap of 1 leaves 10 rows per source... in 10 parents
    let mut f = Fake::new(vec![items(0, 30, 3), items(1, 0, 1)]);
    let mut a = args("semantic");
    a.max_per_parent = Some(1);
    a.k = 20;
    let rows = run(&mut f, a, Config::default()).unwrap();
    assert_eq!(rows.len(), 10, "only 10 parents exist");
    assert_eq!(f.branch_calls(), vec![(0, Branch::Semantic, 80)], "one round; the empty source runs nothing");

    let mut f = Fake::new(vec![items(0, 100_000, 1000), items(1, 0, 1)]);
    let mut a = args("semantic");
    a.max_per_parent = Some(1);
    let config = Config { max_candidates: 500, ..Config::default() };
    let rows = run(&mut f, a, config).unwrap();
    let limits: Vec<i64> = f.branch_calls().iter().filter(|c| c.0 == 0).map(|c| c.2).collect();
    assert_eq!(limits, vec![40, 160, 500], "the window never exceeds pg_corpus.max_candidates");
    assert_eq!(rows.len(), 1, "500 items of one parent give one row");
}

#[test]
fn a_pruned_lexical_subplan_that_came_back_short_is_replanned_with_a_larger_budget() {
    // every document holds only the common key: the plan is pruned (champion lists) and the
    // fake returns only half of the matches for a pruned plan
    let mut f = Fake::new(vec![items(0, 30, 1), items(1, 0, 1)]);
    f.df = [("שכירות".to_string(), 3000u64), ("חוזה".to_string(), 2500)].into_iter().collect();
    let mut a = args("lexical");
    a.k = 20;
    let rows = run(&mut f, a, Config::default()).unwrap();
    let limits: Vec<i64> = f.branch_calls().iter().filter(|c| c.0 == 0).map(|c| c.2).collect();
    // window 80 (4k), budget 2000: both keys common (champion lists), 15 of 30 found; window
    // 320, budget 8000: both keys find candidates through the index, all 30 found
    assert_eq!(limits, vec![80, 320]);
    assert_eq!(rows.len(), 20);
    assert!(f.calls.iter().any(|c| matches!(c, Call::Champions(_))), "champion heads were read");
}

#[test]
fn a_source_without_readable_champion_lists_finds_its_common_keys_through_the_index() {
    // both keys common: with lists, chunks' candidates are the lists' heads (a pruned plan the
    // fake answers with half of the matches); without them, the index (every match)
    let run_with = |unlisted: Vec<String>| {
        let mut f = Fake::new(vec![items(0, 30, 1), items(1, 0, 1)]);
        f.df = [("שכירות".to_string(), 3000u64), ("חוזה".to_string(), 2500)].into_iter().collect();
        f.unlisted = unlisted;
        let mut a = args("lexical");
        a.k = 20;
        let rows = run(&mut f, a, Config { bm25_candidate_budget: 2000, ..Config::default() }).unwrap();
        let first = f
            .calls
            .iter()
            .find_map(|c| match c {
                Call::Branch { source: 0, sql, .. } => Some(sql.clone()),
                _ => None,
            })
            .unwrap();
        (rows.len(), f.branch_calls().iter().filter(|c| c.0 == 0).count(), first)
    };
    let (rows, rounds, _) = run_with(vec![]);
    assert_eq!((rows, rounds), (20, 2), "half found through the heads, then a wider round");
    let (rows, rounds, sql) = run_with(vec!["chunks".to_string()]);
    assert_eq!((rows, rounds), (20, 1), "all found through the index in the first round");
    assert!(sql.contains("@@"), "the index: {sql}");
}

#[test]
fn the_automatic_candidate_budget_grows_with_the_corpus() {
    // the same keys in a corpus of 1M documents: the automatic budget (2%, 20,000) lets both
    // find candidates through the index in the first round; a budget set to 2,000 does not
    let run_with = |budget: i32| {
        let mut f = Fake::new(vec![items(0, 30, 1), items(1, 0, 1)]);
        f.df = [("שכירות".to_string(), 3000u64), ("חוזה".to_string(), 2500)].into_iter().collect();
        f.documents = 1_000_000;
        let mut a = args("lexical");
        a.k = 20;
        let rows = run(&mut f, a, Config { bm25_candidate_budget: budget, ..Config::default() }).unwrap();
        assert_eq!(rows.len(), 20);
        let limits: Vec<i64> = f.branch_calls().iter().filter(|c| c.0 == 0).map(|c| c.2).collect();
        (limits, f.calls.iter().any(|c| matches!(c, Call::Champions(_))))
    };
    assert_eq!(run_with(-1), (vec![80], false));
    assert_eq!(run_with(0), (vec![80], false), "below 1 is automatic");
    assert_eq!(run_with(2000), (vec![80, 320], true), "a set budget is the bound");
    assert_eq!(run_with(20_000), (vec![80], false));
    assert_eq!(crate::lexical::auto_candidate_budget(0), 2000);
    assert_eq!(crate::lexical::auto_candidate_budget(100_000), 2000);
    assert_eq!(crate::lexical::auto_candidate_budget(551_000), 11_020);
}

#[test]
fn feedback_learns_from_the_first_fusions_top_and_moves_the_query() {
    let mut f = default_fake();
    let mut a = args("hybrid");
    a.feedback = Some(true);
    let rows = run(&mut f, a, Config::default()).unwrap();
    assert_eq!(rows.len(), 10);
    let fed: Vec<String> = f
        .calls
        .iter()
        .filter_map(|c| match c {
            Call::Feedback(ids) => Some(ids.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(fed.len(), crate::feedback::RM3_DOCS, "the first fusion's top 10 items");
    let vectors: Vec<f32> = f
        .calls
        .iter()
        .filter_map(|c| match c {
            Call::Branch { branch: Branch::Semantic, vector0, .. } => Some(*vector0),
            _ => None,
        })
        .collect();
    assert_eq!(vectors.len(), 4, "two rounds of two sources");
    assert_eq!(vectors[0], vec384()[0]);
    assert_ne!(vectors[2], vectors[0], "the feedback round searches with the moved vector");
    // the expanded query's new keys are looked up once more
    assert_eq!(f.calls.iter().filter(|c| matches!(c, Call::TermStats(_))).count(), 2);
}

#[test]
fn feedback_by_setting_applies_only_where_it_can() {
    let mut f = default_fake();
    let config = Config { hybrid_feedback: true, ..Config::default() };
    run(&mut f, args("semantic"), config.clone()).unwrap();
    assert!(!f.calls.iter().any(|c| matches!(c, Call::Feedback(_))));
    let mut a = args("semantic");
    a.feedback = Some(true);
    let e = run(&mut default_fake(), a, config).unwrap_err();
    assert_eq!(e.state, SqlState::InvalidParameterValue);
}

#[test]
fn bad_arguments_fail_before_any_query_runs() {
    type Mutation = Box<dyn Fn(&mut Args)>;
    let cases: Vec<(Mutation, SqlState)> = vec![
        (Box::new(|a| a.k = 0), SqlState::InvalidParameterValue),
        (Box::new(|a| a.k = 1001), SqlState::InvalidParameterValue),
        (Box::new(|a| a.mode = "fuzzy".into()), SqlState::InvalidParameterValue),
        (Box::new(|a| a.candidates = Some(0)), SqlState::InvalidParameterValue),
        (Box::new(|a| a.rrf_k = -1), SqlState::InvalidParameterValue),
        (Box::new(|a| a.max_per_parent = Some(-2)), SqlState::InvalidParameterValue),
        (Box::new(|a| a.query_vec = Some(vec![0.5; 3])), SqlState::DataException),
        (Box::new(|a| a.query_vec = Some(vec![f32::NAN; 384])), SqlState::DataException),
        (Box::new(|a| a.query_vec = Some(vec![0.0; 384])), SqlState::DataException),
        (Box::new(|a| a.filters = json!({"source_kind": "internal_committee"})), SqlState::InsufficientPrivilege),
        (Box::new(|a| a.filters = json!({"nope": 1})), SqlState::UndefinedColumn),
        (
            Box::new(|a| {
                a.mode = "semantic".into();
                a.query_vec = None;
            }),
            SqlState::NullValueNotAllowed,
        ),
        (
            Box::new(|a| {
                a.mode = "lexical".into();
                a.query_text = Some("   ".into());
            }),
            SqlState::InvalidParameterValue,
        ),
        (
            Box::new(|a| {
                a.query_vec = None;
                a.query_text = None;
            }),
            SqlState::InvalidParameterValue,
        ),
    ];
    for (i, (change, state)) in cases.into_iter().enumerate() {
        let mut a = args("hybrid");
        change(&mut a);
        let mut f = default_fake();
        let e = run(&mut f, a, Config::default()).unwrap_err();
        assert_eq!(e.state, state, "case {i}: {e}");
        assert!(!e.hint.is_empty(), "case {i}: every error has a hint");
        assert!(f.branch_calls().is_empty(), "case {i}: no subplan ran");
    }
}

/// A vector of the corpus' dimension whose first component is `first` (the fake's boost key).
fn vector_starting(first: f32) -> Vec<f32> {
    let mut v = vec384();
    v[0] = first;
    v
}

fn extra_json(first: f32) -> Value {
    Value::from(vector_starting(first).into_iter().map(f64::from).collect::<Vec<f64>>())
}

#[test]
fn extra_queries_run_their_own_branches_and_are_fused_with_the_original() {
    let mut f = default_fake();
    f.df.insert("rewrite".into(), 20);
    let mut a = args("hybrid");
    a.extra_queries = json!([{"text": "rewrite"}, {"vector": extra_json(7.0), "label": "hyde"}]);
    let rows = run(&mut f, a, Config::default()).unwrap();
    assert_eq!(rows.len(), 10);
    // per source: the original's two branches, the text query's lexical one, the vector query's
    // semantic one; every subplan of a source is the same SQL shape (one builder, one predicate)
    let branches = f.branch_calls();
    let expected = vec![
        (0, Branch::Semantic, 40),
        (0, Branch::Lexical, 40),
        (1, Branch::Semantic, 40),
        (1, Branch::Lexical, 40),
        (0, Branch::Lexical, 40),
        (1, Branch::Lexical, 40),
        (0, Branch::Semantic, 40),
        (1, Branch::Semantic, 40),
    ];
    assert_eq!(branches, expected);
    for c in &f.calls {
        if let Call::Branch { sql, .. } = c {
            assert!(sql.contains("p.\"source_kind\" = "), "every subplan carries the corpus predicate:\n{sql}");
        }
    }
    // one statistics lookup for the keys of every text; one queue lookup per round
    let stats: Vec<&Call> = f.calls.iter().filter(|c| matches!(c, Call::TermStats(_))).collect();
    assert_eq!(stats.len(), 1);
    let Call::TermStats(keys) = stats[0] else { unreachable!() };
    assert!(keys.contains(&"rewrite".to_string()) && keys.contains(&"חוזה".to_string()), "{keys:?}");
    let first_fetch = f.calls.iter().position(|c| matches!(c, Call::Fetch(_))).unwrap();
    assert_eq!(f.calls[..first_fetch].iter().filter(|c| matches!(c, Call::Queued(_))).count(), 1, "one per round");
    // provenance names the queries; the original's columns stay the original's
    for r in &rows {
        let labels: Vec<&str> =
            r.query_ranks.as_array().unwrap().iter().map(|q| q["query"].as_str().unwrap()).collect();
        assert!(labels.iter().all(|l| ["original", "extra_1", "hyde"].contains(l)), "{labels:?}");
        let own =
            r.query_ranks.as_array().unwrap().iter().find(|q| q["query"] == "original" && q["branch"] == "semantic");
        assert_eq!(own.map(|q| q["rank"].as_i64().unwrap() as i32), r.semantic_rank);
    }
}

#[test]
fn an_item_only_an_extra_query_finds_enters_with_that_querys_weight() {
    let target = "100003".to_string(); // the halachot's third item, out of the original's lists
    let search = |weight: f64| {
        let mut f = default_fake();
        f.items[1][2] = Item { distance: 9.0, lexical: None, ..f.items[1][2].clone() };
        f.boost_vector.push((3.0, target.clone()));
        let mut a = args("hybrid");
        a.extra_queries = json!([{"vector": extra_json(3.0), "weight": weight, "label": "hyde"}]);
        run(&mut f, a, Config::default()).unwrap()
    };
    let strong = search(100.0);
    // the heavy query's first two items lead: its best, and the original's best (its second)
    let hit = strong.iter().position(|r| r.item_id == target).expect("a heavy extra query's best item is returned");
    assert!(hit < 2, "at rank {}", hit + 1);
    let hit = &strong[hit];
    assert_eq!((hit.semantic_rank, hit.lexical_rank), (None, None), "the original did not find it");
    assert_eq!(hit.query_ranks, json!([{"query": "hyde", "branch": "semantic", "rank": 1, "distance": 0.0}]));
    assert!((hit.score - 100.0 / 61.0).abs() < 1e-12);
    let weak = search(0.001);
    assert!(weak.iter().all(|r| r.item_id != target), "a light one cannot outrank two original lists");
}

#[test]
fn the_fused_score_is_the_weighted_sum_over_every_list_that_ranked_a_hit() {
    let mut f = default_fake();
    f.boost_vector.push((5.0, "100007".into()));
    f.boost_key.push(("extra".into(), "100009".into()));
    f.df.insert("extra".into(), 5);
    let mut a = args("hybrid");
    a.extra_queries = json!([{"vector": extra_json(5.0), "weight": 0.5}, {"text": "extra", "weight": 2.0}]);
    let rows = run(&mut f, a, Config::default()).unwrap();
    let weight = |label: &str| match label {
        "extra_1" => 0.5,
        "extra_2" => 2.0,
        _ => 1.0,
    };
    for r in &rows {
        let expected: f64 = r
            .query_ranks
            .as_array()
            .unwrap()
            .iter()
            .map(|q| weight(q["query"].as_str().unwrap()) / (60.0 + q["rank"].as_f64().unwrap()))
            .sum();
        assert!((r.score - expected).abs() < 1e-12, "{} vs {expected}: {}", r.score, r.query_ranks);
        assert!(
            r.query_ranks.as_array().unwrap().iter().any(|q| q["query"] != "original")
                || r.semantic_rank.is_some()
                || r.lexical_rank.is_some()
        );
    }
    // the original's best hit of each branch is still there: the original is always fused
    assert!(rows.iter().any(|r| r.semantic_rank == Some(1)) || rows.iter().any(|r| r.lexical_rank == Some(1)));
}

#[test]
fn an_extra_querys_bm25_subplans_run_with_the_bm25_settings() {
    let mut f = default_fake();
    let mut a = args("semantic");
    a.mode = "hybrid".into();
    a.extra_queries = json!([{"text": "שכירות"}]);
    run(&mut f, a, Config::default()).unwrap();
    let lexical: Vec<&Vec<Setting>> = f
        .calls
        .iter()
        .filter_map(|c| match c {
            Call::Branch { branch: Branch::Lexical, settings, .. } => Some(settings),
            _ => None,
        })
        .collect();
    assert_eq!(lexical.len(), 2);
    assert!(lexical.iter().all(|s| s.iter().any(|x| x.name == "random_page_cost")), "{lexical:?}");
}

#[test]
fn extra_queries_of_a_single_branch_mode_use_that_branch_only() {
    let mut f = default_fake();
    let mut a = args("semantic");
    a.extra_queries = json!([{"vector": extra_json(2.0), "text": "ignored here"}]);
    run(&mut f, a, Config::default()).unwrap();
    assert!(f.branch_calls().iter().all(|(_, b, _)| *b == Branch::Semantic));
    assert_eq!(f.branch_calls().len(), 4);
    assert!(!f.calls.iter().any(|c| matches!(c, Call::TermStats(_))), "no lexical side at all");
    let mut f = default_fake();
    let mut a = args("lexical");
    a.extra_queries = json!([{"text": "שכירות"}, {"text": "חוזה", "vector": extra_json(2.0)}]);
    run(&mut f, a, Config::default()).unwrap();
    assert!(f.branch_calls().iter().all(|(_, b, _)| *b == Branch::Lexical));
    assert_eq!(f.branch_calls().len(), 6);
}

#[test]
fn a_text_only_hybrid_search_with_vector_extra_queries_plans_its_semantic_branches() {
    let mut f = default_fake();
    f.slice_rows = vec![50_000.0, 50_000.0];
    let mut a = args("lexical");
    a.mode = "hybrid".into();
    a.extra_queries = json!([{"vector": extra_json(2.0)}]);
    run(&mut f, a, Config::default()).unwrap();
    let strategies: Vec<Strategy> = f
        .calls
        .iter()
        .filter_map(|c| match c {
            Call::Branch { branch: Branch::Semantic, strategy, .. } => Some(*strategy),
            _ => None,
        })
        .collect();
    assert_eq!(strategies, vec![Strategy::Approximate; 2], "a large slice goes through HNSW for an extra vector too");
}

#[test]
fn bad_extra_queries_fail_before_any_query_runs() {
    let v = extra_json(1.0);
    let many: Vec<Value> = (0..17).map(|i| json!({"text": format!("q{i}")})).collect();
    let cases: Vec<(&str, Value, SqlState)> = vec![
        ("hybrid", json!({"text": "x"}), SqlState::InvalidParameterValue),
        ("hybrid", json!("x"), SqlState::InvalidParameterValue),
        ("hybrid", Value::Array(many), SqlState::InvalidParameterValue),
        ("hybrid", json!([1]), SqlState::InvalidParameterValue),
        ("hybrid", json!([{}]), SqlState::InvalidParameterValue),
        ("hybrid", json!([{"text": "  "}]), SqlState::InvalidParameterValue),
        ("hybrid", json!([{"txt": "x"}]), SqlState::InvalidParameterValue),
        ("hybrid", json!([{"text": 5}]), SqlState::InvalidParameterValue),
        ("hybrid", json!([{"vector": "[1,2]"}]), SqlState::InvalidParameterValue),
        ("hybrid", json!([{"vector": [1, "2"]}]), SqlState::InvalidParameterValue),
        ("hybrid", json!([{"vector": [0.5, 0.5, 0.5]}]), SqlState::DataException),
        ("hybrid", json!([{"vector": vec![0; 384]}]), SqlState::DataException),
        ("hybrid", json!([{"vector": vec![1e300; 384]}]), SqlState::DataException),
        ("hybrid", json!([{"text": "x", "weight": 0}]), SqlState::InvalidParameterValue),
        ("hybrid", json!([{"text": "x", "weight": -1}]), SqlState::InvalidParameterValue),
        ("hybrid", json!([{"text": "x", "weight": 101}]), SqlState::InvalidParameterValue),
        ("hybrid", json!([{"text": "x", "weight": "1"}]), SqlState::InvalidParameterValue),
        ("hybrid", json!([{"text": "x", "label": "original"}]), SqlState::InvalidParameterValue),
        ("hybrid", json!([{"text": "x", "label": "feedback"}]), SqlState::InvalidParameterValue),
        ("hybrid", json!([{"text": "x", "label": "a"}, {"text": "y", "label": "a"}]), SqlState::InvalidParameterValue),
        ("hybrid", json!([{"text": "x", "label": ""}]), SqlState::InvalidParameterValue),
        ("hybrid", json!([{"text": "x", "label": 3}]), SqlState::InvalidParameterValue),
        ("semantic", json!([{"text": "x"}]), SqlState::InvalidParameterValue),
        ("lexical", json!([{"vector": v}]), SqlState::InvalidParameterValue),
    ];
    for (i, (mode, extra, state)) in cases.into_iter().enumerate() {
        let mut a = args(mode);
        a.extra_queries = extra;
        let mut f = default_fake();
        let e = run(&mut f, a, Config::default()).unwrap_err();
        assert_eq!(e.state, state, "case {i}: {e}");
        assert!(!e.hint.is_empty(), "case {i}: every error has a hint");
        assert!(f.calls.is_empty(), "case {i}: nothing ran: {:?}", f.calls);
    }
    // extra queries never stand in for the original query
    let mut a = args("hybrid");
    a.query_vec = None;
    a.query_text = None;
    a.extra_queries = json!([{"text": "x"}]);
    let e = run(&mut default_fake(), a, Config::default()).unwrap_err();
    assert_eq!(e.state, SqlState::InvalidParameterValue);
    assert!(e.hint.contains("do not replace"), "{}", e.hint);
}

fn similar(source: &str, id: &str, mode: &str, exclude_parent: bool) -> SimilarArgs {
    SimilarArgs {
        source: source.into(),
        item_id: id.into(),
        exclude_parent,
        args: Args { query_vec: None, query_text: None, mode: mode.into(), max_per_parent: Some(0), ..Args::default() },
    }
}

#[test]
fn find_similar_searches_by_the_items_own_vector_and_text_and_never_returns_it() {
    let mut f = default_fake();
    // the seed is the nearest item to its own vector and the best match of its own text
    f.boost_vector.push((9.0, "12".into()));
    f.boost_key.push(("חוזה".into(), "12".into()));
    let rows = find_similar(corpus(), similar("chunks", "12", "hybrid", false), Config::default(), &mut f).unwrap().0;
    assert_eq!(rows.len(), 10);
    assert!(rows.iter().all(|r| !(r.source == "chunks" && r.item_id == "12")), "the item itself is left out");
    assert_eq!(f.calls[0], Call::Seed(0), "the item is looked up first");
    let vectors: Vec<f32> = f
        .calls
        .iter()
        .filter_map(|c| match c {
            Call::Branch { branch: Branch::Semantic, vector0, .. } => Some(*vector0),
            _ => None,
        })
        .collect();
    assert!(!vectors.is_empty() && vectors.iter().all(|&v| v == 9.0), "its own vector: {vectors:?}");
    assert!(f.branch_calls().iter().any(|(_, b, _)| *b == Branch::Lexical), "and its text");
    // its parent's other items are left out too when asked: item 12 is in parent 1 (ids 11-20),
    // and its siblings 13 and 14 are near it
    let siblings = || {
        let mut f = default_fake();
        for id in ["12", "13", "14"] {
            f.boost_vector.push((9.0, id.to_string()));
            f.boost_key.push(("חוזה".into(), id.to_string()));
        }
        f
    };
    let rows =
        find_similar(corpus(), similar("chunks", "12", "hybrid", false), Config::default(), &mut siblings()).unwrap().0;
    let found: Vec<&str> = rows.iter().map(|r| r.item_id.as_str()).collect();
    assert!(found.contains(&"13") && found.contains(&"14") && !found.contains(&"12"), "{found:?}");
    let rows =
        find_similar(corpus(), similar("chunks", "12", "hybrid", true), Config::default(), &mut siblings()).unwrap().0;
    assert_eq!(rows.len(), 10, "still k rows");
    assert!(rows.iter().all(|r| r.parent_id != "1"), "{:?}", rows.iter().map(|r| &r.parent_id).collect::<Vec<_>>());
}

#[test]
fn find_similar_refuses_an_item_outside_the_corpus_without_saying_more() {
    let cases = [("chunks", "999999"), ("chunks", "not-a-number"), ("chunks", "1e3"), ("halachot", "12")];
    let mut messages = Vec::new();
    for (source, id) in cases {
        let mut f = default_fake();
        let e = find_similar(corpus(), similar(source, id, "hybrid", false), Config::default(), &mut f).unwrap_err();
        assert_eq!(e.state, SqlState::UndefinedObject, "{source} {id}: {e}");
        assert!(!e.hint.is_empty());
        assert!(f.branch_calls().is_empty(), "no search ran");
        messages.push(e.message.replace(id, "ID").replace(source, "SRC"));
    }
    assert!(messages.windows(2).all(|w| w[0] == w[1]), "one message for every kind of absence: {messages:?}");
    let e = find_similar(corpus(), similar("nope", "1", "hybrid", false), Config::default(), &mut default_fake())
        .unwrap_err();
    assert_eq!(e.state, SqlState::UndefinedObject);
    assert!(e.hint.contains("'chunks'") && e.hint.contains("'halachot'"), "{}", e.hint);
}

#[test]
fn find_similar_never_uses_a_stale_embedding_unless_asked() {
    let mut f = default_fake();
    f.stale.push("12".into());
    let e = find_similar(corpus(), similar("chunks", "12", "semantic", false), Config::default(), &mut f).unwrap_err();
    assert_eq!(e.state, SqlState::ObjectNotInPrerequisiteState);
    let mut f = default_fake();
    f.stale.push("12".into());
    let rows = find_similar(corpus(), similar("chunks", "12", "hybrid", false), Config::default(), &mut f).unwrap().0;
    assert_eq!(rows.len(), 10);
    assert!(f.branch_calls().iter().all(|(_, b, _)| *b == Branch::Lexical), "a hybrid search by its text alone");
    let mut f = default_fake();
    f.stale.push("12".into());
    let mut sim = similar("chunks", "12", "semantic", false);
    sim.args.include_stale = true;
    find_similar(corpus(), sim, Config::default(), &mut f).unwrap();
    assert!(f.branch_calls().iter().all(|(_, b, _)| *b == Branch::Semantic));
}

#[test]
fn a_lenient_search_runs_with_the_valid_conditions_only() {
    let mut a = args("hybrid");
    a.filters = json!({"court": "עליון", "judge": "x", "page_number": "five"});
    let e = run(&mut default_fake(), a.clone(), Config::default()).unwrap_err();
    assert_eq!(e.state, SqlState::UndefinedColumn, "strict is the default: the first bad field is the error");
    a.filter_mode = "lenient".into();
    let mut f = default_fake();
    let config = Config::default();
    let checked = a.check(&config).unwrap();
    let req = Request::prepare(validate(corpus(), a.clone(), checked, config.clone()).unwrap(), &mut f).unwrap();
    assert_eq!(req.conds.len(), 1);
    assert_eq!(req.conds[0].field, "court");
    let dropped: Vec<&str> = req.rejected_filters.iter().map(|r| r.field.as_str()).collect();
    assert_eq!(dropped, vec!["judge", "page_number"]);
    assert_eq!(search(&req, &mut f).unwrap().len(), 10);
    for c in &f.calls {
        if let Call::Branch { sql, .. } = c {
            assert!(sql.contains("p.\"court\" = ") && !sql.contains("page_number"), "{sql}");
        }
    }
    // the isolation column is never lenient
    a.filters = json!({"court": "עליון", "source_kind": "internal_committee"});
    assert_eq!(
        run(&mut default_fake(), a.clone(), Config::default()).unwrap_err().state,
        SqlState::InsufficientPrivilege
    );
    a.filter_mode = "sloppy".into();
    assert_eq!(run(&mut default_fake(), a, Config::default()).unwrap_err().state, SqlState::InvalidParameterValue);
}

fn pages_corpus() -> Arc<Corpus> {
    Arc::new(crate::definition::resolve(&serde_json::from_value(crate::testing::with_pages_def()).unwrap()).unwrap())
}

fn pages_fake() -> Fake {
    let mut f = Fake::new(vec![items(0, 500, 10), items(1, 500, 10), items(2, 500, 10)]);
    f.df = [("חוזה".to_string(), 10u64), ("שכירות".to_string(), 40)].into_iter().collect();
    f
}

fn run_pages(f: &mut Fake, a: Args) -> Result<Vec<SearchRow>> {
    let config = Config::default();
    let checked = a.check(&config)?;
    let req = Request::prepare(validate(pages_corpus(), a, checked, config)?, f)?;
    search(&req, f)
}

fn semantic_calls(f: &Fake) -> Vec<(usize, usize)> {
    f.calls
        .iter()
        .filter_map(|c| match c {
            Call::Branch { source, branch: Branch::Semantic, sql, .. } => {
                Some((*source, sql.matches("page_images").count()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn each_embedding_space_is_searched_with_its_own_vector_and_fused_with_its_weight() {
    // query_vec alone: the page images (another model) are not searched semantically
    let mut f = pages_fake();
    run_pages(&mut f, args("hybrid")).unwrap();
    assert_eq!(semantic_calls(&f).iter().map(|c| c.0).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(f.branch_calls().iter().filter(|c| c.1 == Branch::Lexical).count(), 3);
    // with the page space's vector: its sources' subplan, with that vector
    let mut f = pages_fake();
    f.boost_vector.push((0.25, "200005".into()));
    let mut a = args("hybrid");
    let mut page_vec = vec![0.5f32; 8];
    page_vec[0] = 0.25;
    a.query_vectors = json!({"page_image": page_vec});
    let rows = run_pages(&mut f, Args { k: 100, max_per_parent: Some(0), ..a.clone() }).unwrap();
    let calls: Vec<(usize, f32)> = f
        .calls
        .iter()
        .filter_map(|c| match c {
            Call::Branch { source, branch: Branch::Semantic, vector0, .. } => Some((*source, *vector0)),
            _ => None,
        })
        .collect();
    assert_eq!(calls.iter().map(|c| c.0).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert_eq!(calls[2].1, 0.25, "the page source is searched with the page vector");
    assert!(calls[0].1 != 0.25 && calls[1].1 != 0.25);
    // a page's semantic rank is within its space's list, weighted 0.5
    let p = rows.iter().find(|r| r.item_id == "200005").expect("the page nearest to the page vector is a hit");
    let sem = p.query_ranks.as_array().unwrap().iter().find(|q| q["branch"] == "semantic").unwrap();
    assert_eq!((sem["rank"].as_i64(), sem["space"].as_str()), (Some(1), Some("page_image")));
    assert_eq!(p.semantic_rank, Some(1), "its rank within its own space's list");
    let mut f = pages_fake();
    f.boost_vector.push((0.25, "200005".into()));
    let mut b = a.clone();
    b.mode = "semantic".into();
    b.query_vec = None;
    let rows = run_pages(&mut f, b).unwrap();
    assert_eq!(semantic_calls(&f).iter().map(|c| c.0).collect::<Vec<_>>(), vec![2], "only the page space has a vector");
    assert_eq!(rows[0].item_id, "200005");
    assert!((rows[0].score - 0.5 / 61.0).abs() < 1e-12, "{}", rows[0].score);
    // mistakes
    for (qv, state) in [
        (json!({"page_image": [1.0, 2.0]}), SqlState::DataException),
        (json!({"audio": [1.0]}), SqlState::InvalidParameterValue),
        (json!({"default": vec384()}), SqlState::InvalidParameterValue),
        (json!({"page_image": "x"}), SqlState::InvalidParameterValue),
        (json!([1]), SqlState::InvalidParameterValue),
        (json!({"page_image": [1e39, 0, 0, 0, 0, 0, 0, 0]}), SqlState::InvalidParameterValue),
    ] {
        let mut a = args("hybrid");
        a.query_vectors = qv.clone();
        let mut f = pages_fake();
        let e = run_pages(&mut f, a).unwrap_err();
        assert_eq!(e.state, state, "{qv}: {e}");
        assert!(f.branch_calls().is_empty() && !e.hint.is_empty());
    }
    // explain says which sources are not searched semantically
    let mut f = pages_fake();
    let a = args("hybrid");
    let config = Config::default();
    let checked = a.check(&config).unwrap();
    let req = Request::prepare(validate(pages_corpus(), a, checked, config).unwrap(), &mut f).unwrap();
    let rows = explain(&req, &mut f).unwrap();
    let none: Vec<(&str, &str)> =
        rows.iter().filter(|r| r.strategy == "no_query_vector").map(|r| (r.source.as_str(), r.branch)).collect();
    assert_eq!(none, vec![("pages", "semantic")]);
}

#[test]
fn an_executor_error_stops_the_search_with_that_error() {
    let boom = CoreError::new(SqlState::ObjectNotInPrerequisiteState, "boom", "h");
    for n in 0..12 {
        let mut f = default_fake();
        f.fail_at = Some((n, boom.clone()));
        let r = run(&mut f, args("hybrid"), Config::default());
        if n < f.calls.len() {
            assert_eq!(r.unwrap_err(), boom, "failing call {n} is the search's error");
            assert_eq!(f.calls.len(), n + 1, "nothing runs after a failed call");
        }
    }
}

#[test]
fn an_item_the_fetch_no_longer_returns_is_left_out_and_ranks_stay_dense() {
    let mut f = default_fake();
    let first = run(&mut default_fake(), args("hybrid"), Config::default()).unwrap();
    f.vanished = vec![first[0].item_id.clone()];
    let rows = run(&mut f, args("hybrid"), Config::default()).unwrap();
    assert_eq!(rows.len(), 9);
    assert!(rows.iter().all(|r| r.item_id != first[0].item_id));
    assert_eq!(rows.iter().map(|r| r.rank).collect::<Vec<_>>(), (1..=9).collect::<Vec<_>>());
}

#[test]
fn stale_embeddings_are_dropped_from_the_semantic_branch_only_and_flagged() {
    let mut f = default_fake();
    let nearest: Vec<String> = f.items[0].iter().take(5).map(|i| i.id.clone()).collect();
    f.stale = nearest.clone();
    let mut a = args("hybrid");
    a.max_per_parent = Some(0);
    a.k = 200;
    let rows = run(&mut f, a.clone(), Config::default()).unwrap();
    assert!(rows.iter().any(|r| r.embedding_stale), "the stale items are found by their text");
    for r in &rows {
        let stale = nearest.contains(&r.item_id);
        assert_eq!(r.embedding_stale, stale, "{r:?}");
        if stale {
            assert!(r.semantic_rank.is_none() && r.lexical_rank.is_some(), "found by its text only");
        }
    }
    // one lookup per round and one for the final rows the semantic branch did not vouch for
    let lookups: Vec<usize> = f
        .calls
        .iter()
        .filter_map(|c| match c {
            Call::Queued(n) => Some(*n),
            _ => None,
        })
        .collect();
    let lexical_only = rows.iter().filter(|r| r.semantic_rank.is_none()).count();
    assert_eq!(lookups, vec![1600, lexical_only], "the round's 2 x 800 semantic hits, then the lexical-only rows");
    a.include_stale = true;
    let mut f2 = default_fake();
    f2.stale = nearest.clone();
    let rows = run(&mut f2, a, Config::default()).unwrap();
    assert!(rows.iter().any(|r| nearest.contains(&r.item_id) && r.semantic_rank == Some(1) && r.embedding_stale));
    assert_eq!(f2.calls.iter().filter(|c| matches!(c, Call::Queued(_))).count(), 1, "only the final rows");
}

#[test]
fn dropping_stale_embeddings_still_fills_k_rows() {
    // 45 items of one source, the 40 nearest stale: the first window's semantic list keeps none
    let mut f = Fake::new(vec![items(0, 45, 1), items(1, 0, 1)]);
    f.stale = f.items[0].iter().take(40).map(|i| i.id.clone()).collect();
    let rows = run(&mut f, args("semantic"), Config::default()).unwrap();
    assert_eq!(rows.len(), 5, "the 5 fresh items, found by widening");
    assert!(rows.iter().all(|r| !r.embedding_stale));
    let limits: Vec<i64> = f.branch_calls().iter().filter(|c| c.0 == 0).map(|c| c.2).collect();
    assert_eq!(limits, vec![40, 160]);
}

#[test]
fn a_corpus_with_many_parents_checks_its_predicate_after_ranking() {
    // 47.5% of a table: 47,500 parents (the estimate) make joining them dearer than scoring
    // the other corpus' matches; 4,750 do not
    for (parents, after_ranking) in [(47_500.0, true), (4_750.0, false)] {
        let mut f = default_fake();
        f.df = [("חוזה".to_string(), 1500u64), ("שכירות".to_string(), 400_000)].into_iter().collect();
        f.documents = 475_000;
        f.table_rows = vec![1_000_000.0, 1_000_000.0];
        f.parent_rows = parents;
        run(&mut f, args("lexical"), Config::default()).unwrap();
        let sql = f
            .calls
            .iter()
            .find_map(|c| match c {
                Call::Branch { branch: Branch::Lexical, sql, .. } => Some(sql.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(sql.contains("WHERE EXISTS (SELECT 1"), after_ranking, "{parents} parents: {sql}");
    }
}

#[test]
fn an_empty_slice_is_probed_and_runs_no_subplan() {
    for mode in ["hybrid", "semantic", "lexical"] {
        let mut f = Fake::new(vec![items(0, 0, 1), items(1, 0, 1)]);
        let rows = run(&mut f, args(mode), Config::default()).unwrap();
        assert!(rows.is_empty());
        assert!(f.branch_calls().is_empty(), "{mode}: no subplan for an empty corpus");
        assert_eq!(f.calls.iter().filter(|c| matches!(c, Call::Probe(_))).count(), 2);
    }
    // a slice estimated at one row that holds items is searched
    let mut f = default_fake();
    f.slice_rows = vec![1.0, 1.0];
    let rows = run(&mut f, args("hybrid"), Config::default()).unwrap();
    assert_eq!(rows.len(), 10);
    assert_eq!(f.branch_calls().len(), 4);
    // larger estimates are not probed
    let mut f = default_fake();
    run(&mut f, args("hybrid"), Config::default()).unwrap();
    assert!(!f.calls.iter().any(|c| matches!(c, Call::Probe(_))));
    // an isolation value the parents' statistics do not know (estimated at one parent) is
    // probed, though its items are estimated at ten per parent
    let mut f = Fake::new(vec![items(0, 0, 1), items(1, 0, 1)]);
    f.slice_rows = vec![10.0, 2.0];
    f.parent_rows = 1.0;
    assert!(run(&mut f, args("hybrid"), Config::default()).unwrap().is_empty());
    assert!(f.branch_calls().is_empty());
    // ... by one probe of the parents for both sources, which share them; no source probe
    // and no slice estimate follow
    let probes = |f: &Fake| {
        (
            f.calls.iter().filter(|c| matches!(c, Call::ParentProbe)).count(),
            f.calls.iter().filter(|c| matches!(c, Call::Probe(_))).count(),
        )
    };
    assert_eq!(probes(&f), (1, 0));
    let a = args("semantic");
    let checked = a.check(&Config::default()).unwrap();
    let mut g = Fake::new(vec![items(0, 0, 1), items(1, 0, 1)]);
    g.parent_rows = 1.0;
    let req = Request::prepare(validate(corpus(), a, checked, Config::default()).unwrap(), &mut g).unwrap();
    let estimates = g.calls.iter().filter(|c| matches!(c, Call::Estimate)).count();
    let sem = semantic_plans(&req, &mut g).unwrap();
    assert!(sem.iter().all(|s| s.empty == Some(SliceOf::Parents)), "{sem:?}");
    assert_eq!(g.calls.iter().filter(|c| matches!(c, Call::Estimate)).count() - estimates, 2, "the parents' only");
    let rows = explain(&req, &mut g).unwrap();
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!((r.branch, r.strategy), ("none", "empty_slice"));
        assert!(r.sql.starts_with("SELECT 1 FROM \"public\".\"case_law\" AS p\nWHERE"), "{}", r.sql);
    }
    // parents in the corpus but one source without items: each source is probed after the
    // parents, and the other one is searched
    let mut f = Fake::new(vec![items(0, 50, 1), items(1, 0, 1)]);
    f.parent_rows = 1.0;
    let rows = run(&mut f, args("hybrid"), Config::default()).unwrap();
    assert_eq!(rows.len(), 10);
    assert_eq!(probes(&f), (1, 2));
    assert!(f.branch_calls().iter().all(|c| c.0 == 0));
    // explain shows the probe of an empty source
    let mut f = Fake::new(vec![items(0, 50, 1), items(1, 0, 1)]);
    let a = args("hybrid");
    let checked = a.check(&Config::default()).unwrap();
    let req = Request::prepare(validate(corpus(), a, checked, Config::default()).unwrap(), &mut f).unwrap();
    let rows = explain(&req, &mut f).unwrap();
    let shown: Vec<(&str, &str, &str)> = rows.iter().map(|r| (r.source.as_str(), r.branch, r.strategy)).collect();
    assert_eq!(
        shown,
        vec![("chunks", "semantic", "exact"), ("chunks", "lexical", "text_match"), ("halachot", "none", "empty_slice")]
    );
    assert!(rows[2].sql.starts_with("SELECT 1\nFROM \"public\".\"halachot\""), "{}", rows[2].sql);
}

#[test]
fn the_ts_rank_cd_scorer_reads_no_statistics() {
    let mut f = default_fake();
    let config = Config { scorer: Scorer::TsRankCd, ..Config::default() };
    let rows = run(&mut f, args("lexical"), config).unwrap();
    assert_eq!(rows.len(), 10);
    assert!(!f.calls.iter().any(|c| matches!(c, Call::TermStats(_))));
    let settings: Vec<&Vec<Setting>> = f
        .calls
        .iter()
        .filter_map(|c| match c {
            Call::Branch { settings, .. } => Some(settings),
            _ => None,
        })
        .collect();
    assert!(settings.iter().all(|s| s.is_empty()), "ts_rank_cd subplans run with the session's settings");
}

#[test]
fn explain_shows_the_first_rounds_subplans_with_their_settings() {
    let mut f = default_fake();
    f.slice_rows = vec![50_000.0, 50_000.0];
    let a = args("hybrid");
    let config = Config::default();
    let checked = a.check(&config).unwrap();
    let req = Request::prepare(validate(corpus(), a, checked, config).unwrap(), &mut f).unwrap();
    let rows = explain(&req, &mut f).unwrap();
    assert_eq!(rows.len(), 4);
    assert!(f.branch_calls().is_empty(), "explain runs no subplan");
    let sem = &rows[0];
    assert_eq!((sem.branch, sem.strategy), ("semantic", "hnsw_iterative"));
    assert!(sem.sql.starts_with("SET LOCAL hnsw.ef_search = 40;\nSET LOCAL hnsw.iterative_scan = relaxed_order;\n"));
    assert_eq!(sem.params[0], Value::String("<query vector, 384 dimensions>".into()));
    let lex = &rows[1];
    assert_eq!(lex.branch, "lexical");
    assert!(lex.sql.starts_with("SET LOCAL random_page_cost = 1.1;\n"), "{}", lex.sql);
    // a session below 1.1 keeps its own
    let a = args("lexical");
    let config = Config { random_page_cost: 0.5, ..Config::default() };
    let checked = a.check(&config).unwrap();
    let req = Request::prepare(validate(corpus(), a, checked, config).unwrap(), &mut f).unwrap();
    assert!(explain(&req, &mut f).unwrap()[0].sql.starts_with("SET LOCAL random_page_cost = 0.5;\n"));
}

/// The rows one can get from all eligible items: fused over the full lists, capped.
fn achievable(all: &[Vec<Item>], max_per_parent: Option<usize>) -> usize {
    let mut per_parent: HashMap<&str, usize> = HashMap::new();
    let mut n = 0;
    for list in all {
        for i in list {
            let c = per_parent.entry(i.parent.as_str()).or_default();
            if max_per_parent.is_none_or(|m| *c < m) {
                *c += 1;
                n += 1;
            }
        }
    }
    n
}

proptest! {
    /// Whatever the items and their parents, a search returns min(k, what the cap allows) rows
    /// when the window may grow to every item, at most max_per_parent per parent, ranked
    /// 1..n by non-increasing score.
    #[test]
    fn a_search_fills_k_rows_whenever_they_exist(
        sizes in (0usize..300, 0usize..300),
        per_parent in (1usize..60, 1usize..60),
        k in 1i32..60,
        cap in prop::option::of(1i32..5),
        mode in prop::sample::select(vec!["hybrid", "semantic", "lexical"]),
    ) {
        let all = vec![items(0, sizes.0, per_parent.0), items(1, sizes.1, per_parent.1)];
        let mut f = Fake::new(all.clone());
        f.df = [("חוזה".to_string(), 10u64), ("שכירות".to_string(), 40)].into_iter().collect();
        let mut a = args(mode);
        a.k = k;
        a.max_per_parent = cap;
        let rows = run(&mut f, a, Config::default()).unwrap();
        let want = (k as usize).min(achievable(&all, cap.map(|c| c as usize)));
        prop_assert_eq!(rows.len(), want);
        let mut per_parent_count: HashMap<&str, usize> = HashMap::new();
        for (i, r) in rows.iter().enumerate() {
            prop_assert_eq!(r.rank as usize, i + 1);
            let c = per_parent_count.entry(r.parent_id.as_str()).or_default();
            *c += 1;
            if let Some(m) = cap {
                prop_assert!(*c <= m as usize);
            }
        }
        prop_assert!(rows.windows(2).all(|w| w[0].score >= w[1].score));
    }
}

// ----------------------------------------------------------------------------------------------
// The evidence filter
// ----------------------------------------------------------------------------------------------

fn evidence_corpus(cfg: Value) -> Arc<Corpus> {
    let mut c = legal();
    c.evidence = crate::evidence::parse(&cfg, &c.spaces).unwrap();
    Arc::new(c)
}

fn run_on(corpus: Arc<Corpus>, fake: &mut Fake, a: Args) -> Result<Vec<SearchRow>> {
    let config = Config::default();
    let checked = a.check(&config)?;
    let req = Request::prepare(validate(corpus, a, checked, config)?, fake)?;
    search(&req, fake)
}

fn evidence_args(max_per_parent: Option<i32>) -> Args {
    Args { evidence: Some(true), max_per_parent, ..args("hybrid") }
}

#[test]
fn the_evidence_filter_keeps_near_hits_and_rare_word_hits_only() {
    let c = evidence_corpus(json!({"vector": {"default": {"max_distance": 0.105, "max_gap": 0.003}}}));
    let mut f = default_fake();
    // a far item that holds both (rare) query words
    f.terms.insert("100021".into(), vec!["חוזה".into(), "שכירות".into()]);
    // one that holds only one of the two: half the query is not more than half
    f.terms.insert("30".into(), vec!["שכירות".into()]);
    let rows = run_on(c, &mut f, evidence_args(None)).unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r.item_id.as_str()).collect();
    // distance <= min(0.105, best 0.1 + 0.003): items 1..4 of chunks, 100001..100003 of halachot
    let mut expected = vec!["1", "2", "3", "4", "100001", "100002", "100003", "100021"];
    let mut got = ids.clone();
    expected.sort();
    got.sort();
    assert_eq!(got, expected, "{rows:?}");
    for r in &rows {
        let ev = r.evidence.as_ref().expect("every hit says why it was admitted");
        if r.item_id == "100021" {
            assert_eq!(ev["rare_words"]["coverage"], json!(1.0), "{ev}");
            assert!(ev.get("near_vector").is_none());
        } else {
            assert!(ev["near_vector"]["distance"].as_f64().unwrap() <= 0.103 + 1e-12, "{ev}");
        }
    }
    // the list ends had no evidence: one round
    assert!(f.branch_calls().iter().all(|&(_, _, limit)| limit == 40), "{:?}", f.branch_calls());
}

#[test]
fn nothing_with_evidence_is_an_empty_answer_after_one_round() {
    let c = evidence_corpus(json!({"vector": {"default": {"max_distance": 0.05, "max_gap": 0.01}}}));
    let mut f = default_fake();
    let rows = run_on(c, &mut f, evidence_args(Some(3))).unwrap();
    assert!(rows.is_empty(), "{rows:?}");
    assert!(f.branch_calls().iter().all(|&(_, _, limit)| limit == 40));
    assert!(!f.calls.iter().any(|c| matches!(c, Call::Fetch(_))), "nothing to fetch");
}

#[test]
fn the_window_widens_while_the_end_of_a_list_still_has_evidence() {
    // every item up to distance 0.2 is near: the semantic lists' ends (0.139) still are, and
    // one hit per parent leaves fewer than k rows from 40 candidates
    let c = evidence_corpus(json!({"vector": {"default": {"max_distance": 0.2, "max_gap": 0.2}}}));
    let mut f = default_fake();
    let rows = run_on(c, &mut f, evidence_args(Some(1))).unwrap();
    assert_eq!(rows.len(), 10);
    assert!(f.branch_calls().iter().any(|&(_, _, limit)| limit == 160), "{:?}", f.branch_calls());
    // ends beyond the threshold: no widening, fewer rows
    let c = evidence_corpus(json!({"vector": {"default": {"max_distance": 0.125, "max_gap": 0.2}}}));
    let mut f = default_fake();
    let rows = run_on(c, &mut f, evidence_args(Some(1))).unwrap();
    assert!(rows.len() < 10 && !rows.is_empty(), "{rows:?}");
    assert!(f.branch_calls().iter().all(|&(_, _, limit)| limit == 40));
}

#[test]
fn the_evidence_filter_needs_its_thresholds_and_statistics() {
    let mut f = default_fake();
    let e = run_on(evidence_corpus(json!({})), &mut f, evidence_args(None)).unwrap_err();
    assert_eq!(e.state, SqlState::ObjectNotInPrerequisiteState);
    assert!(e.hint.contains("corpus_calibrate_evidence"), "{e:?}");
    // a lexical search needs no vector thresholds, but statistics
    let mut f = default_fake();
    f.documents = 0;
    let a = Args { evidence: Some(true), ..args("lexical") };
    let e = run_on(evidence_corpus(json!({})), &mut f, a).unwrap_err();
    assert_eq!(e.state, SqlState::ObjectNotInPrerequisiteState);
    assert!(e.hint.contains("corpus_refresh_lexical_stats"), "{e:?}");
    // enabled by the corpus, turned off by the call
    let c = evidence_corpus(json!({"enabled": true}));
    let mut f = default_fake();
    assert!(run_on(c.clone(), &mut f, args("hybrid")).is_err());
    let rows = run_on(c, &mut f, Args { evidence: Some(false), ..args("hybrid") }).unwrap();
    assert_eq!(rows.len(), 10);
    assert!(rows.iter().all(|r| r.evidence.is_none()));
}

// ----------------------------------------------------------------------------------------------
// Must-include classes and graph expansion
// ----------------------------------------------------------------------------------------------

#[test]
fn a_must_include_class_is_always_among_the_rows() {
    let mut c = legal();
    c.must_include =
        crate::augment::parse_must_include(&json!([{"name": "rules", "source": "halachot", "top": 2}]), &c).unwrap();
    let c = Arc::new(c);
    let mut f = default_fake();
    // halachot are far from the query and hold none of its words: the search ranks them last
    for i in f.items[1].iter_mut() {
        i.distance += 5.0;
        i.lexical = None;
    }
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
fn expansion_adds_the_seeds_forward_neighbours_within_its_limits() {
    let mut f = default_fake();
    // halachot are far: only the graph brings them in
    for i in f.items[1].iter_mut() {
        i.distance += 5.0;
        i.lexical = None;
    }
    for seed in 1..=8u32 {
        let cited: Vec<(String, String)> =
            (0..5).map(|j| (format!("{}", 100_000 + seed * 10 + j), "77".into())).collect();
        f.cites.insert(seed.to_string(), cited);
    }
    let a = Args { expand: Some(true), max_per_parent: None, k: 30, ..args("hybrid") };
    let rows = run_on(graph_corpus(), &mut f, a).unwrap();
    let added: Vec<&SearchRow> = rows.iter().filter(|r| r.origin.is_some()).collect();
    assert_eq!(added.len(), 15, "at most 15 added: {rows:?}");
    let seeds: Vec<String> = rows.iter().filter(|r| r.origin.is_none()).take(5).map(|r| r.item_id.clone()).collect();
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
fn a_distributed_source_is_planned_by_a_count_and_looked_up_by_its_parents() {
    let mut f = default_fake();
    let nearest: Vec<String> = f.items[0].iter().take(3).map(|i| i.id.clone()).collect();
    f.stale = nearest.clone();
    f.slice_rows = vec![3000.0, 20_000.0];
    let rows = run_in(distributed_corpus(), &mut f, args("hybrid"), Config::default()).unwrap();
    assert_eq!(rows.len(), 10);
    // counted, never estimated or probed (Citus' estimate is a constant)
    assert_eq!(f.calls.iter().filter(|c| matches!(c, Call::Count)).count(), 2);
    assert!(!f
        .calls
        .iter()
        .any(|c| matches!(c, Call::Estimate | Call::Probe(_) | Call::ParentProbe | Call::Partial(_))));
    let sems: Vec<(Strategy, String)> = f
        .calls
        .iter()
        .filter_map(|c| match c {
            Call::Branch { branch: Branch::Semantic, strategy, sql, .. } => Some((*strategy, sql.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(sems.iter().map(|s| s.0).collect::<Vec<_>>(), vec![Strategy::Exact, Strategy::Approximate]);
    for (_, sql) in &sems {
        assert!(!sql.contains("OFFSET 0"), "no fence Citus would pull to the coordinator: {sql}");
        assert!(sql.contains(", i.\"id\"::text\nLIMIT"), "ids break distance ties: {sql}");
    }
    // stale items never come from the semantic branch, and the lookup went through the items
    assert!(rows.iter().all(|r| !nearest.contains(&r.item_id) || r.semantic_rank.is_none()));
    assert!(f.calls.iter().any(|c| matches!(c, Call::Queued(n) if *n > 0)));
    for c in &f.calls {
        if let Call::Branch { branch: Branch::Lexical, sql, .. } = c {
            assert!(!sql.contains("OFFSET 0"), "scored and cut on the shards: {sql}");
        }
    }
}
