//! `corpus_health_check(corpus)`: a DBA's view of everything that can silently go wrong, as
//! rows (check, corpus, source, status, count, detail, hint), modelled on amcheck and ParadeDB's
//! verify_index. The SQL and the judging rules are in `pg_corpus_core::health`; this module reads
//! the facts they judge (through `crate::spi`), runs the isolation probes (through the real
//! search path) and turns the core's verdicts into rows.

use std::collections::{BTreeMap, HashMap};

use pg_corpus_core::health::{
    self, AuditDepth, CheckRow, ContractFigures, IndexInfo, IsolationFacts, Probing, Sampling,
};
use pg_corpus_core::model::Corpus;
use pg_corpus_core::CoreError;
use pgrx::prelude::*;
use pgrx::JsonB;
use serde_json::{json, Value};

use crate::error::OrRaise;
use crate::search;
use crate::spi;
use pg_corpus_core::engine::{Args, Call};

use crate::spi::health::first_row;

/// Installed extension version vs the loaded library; pgvector's known-vulnerable versions.
fn version_check() -> Result<CheckRow, CoreError> {
    let v = first_row(&health::version_query())?;
    let installed = v.get("installed").and_then(Value::as_str).unwrap_or("");
    let pgvector = v.get("pgvector").and_then(Value::as_str).unwrap_or("");
    Ok(health::judge_version(installed, env!("CARGO_PKG_VERSION"), pgvector))
}

/// Whether this node is the coordinator of a Citus cluster (the `citus` row is its).
fn on_citus_coordinator() -> Result<bool, CoreError> {
    // (false in a database still at an older release)
    Ok(spi::has_function("corpus._citus_coordinator()") && spi::select_bool("SELECT corpus._citus_coordinator()", &[]))
}

/// Who may create in the extension's schema and write its tables: table- and column-level
/// write grants (relacl and attacl) to PUBLIC anywhere, or to other non-superuser roles on the
/// definitions.
fn privileges_check() -> Result<CheckRow, CoreError> {
    let v = first_row(&health::privileges_query())?;
    let public_create = v.get("public_create").and_then(Value::as_bool).unwrap_or(false);
    let writers = v.get("writers").cloned().unwrap_or(json!([]));
    Ok(health::judge_privileges(public_create, writers))
}

/// One value per required filter field, taken from the corpus' own searchable items, so that
/// probe searches of corpora with required scope filters can run.
fn required_filter_values(corpus: &Corpus) -> Result<Option<Value>, CoreError> {
    let mut filters = serde_json::Map::new();
    for field in &corpus.required_filters {
        let mut found = None;
        for src in &corpus.sources {
            let Some(q) = health::required_value_query(src, field) else { continue };
            if let Some(v) = first_row(&q)?.get("v").filter(|v| !v.is_null()) {
                found = Some(v.clone());
                break;
            }
        }
        match found {
            Some(v) => {
                filters.insert(field.clone(), v);
            }
            None => return Ok(None),
        }
    }
    Ok(Some(Value::Object(filters)))
}

/// Probe searches through the very code path of corpus_hybrid_search, with query vectors and
/// words of the items the corpus must NOT see, plus the static check of every subplan.
fn isolation_audit(corpus: &std::sync::Arc<Corpus>, depth: &AuditDepth) -> Result<CheckRow, CoreError> {
    let (static_checked, static_failures) = health::static_isolation_audit(corpus);
    // Dynamic: probes from the other corpora's items.
    let filters = required_filter_values(corpus)?;
    let mut probes = 0;
    let mut searches = 0;
    let mut hits_checked = 0;
    let mut leaks: Vec<Value> = Vec::new();
    let mut hits: HashMap<String, Vec<(String, &str)>> = HashMap::new();
    let probing = if corpus.sources.iter().all(|s| s.isolation.is_empty()) {
        Probing::NoIsolation
    } else if let Some(filters) = filters {
        for idx in 0..corpus.sources.len() {
            let Some(q) = health::foreign_probes_sql(corpus, idx, depth.probes) else { continue };
            // a probe's vector is a query vector of its source's embedding space
            let space = corpus.spaces.get(corpus.sources[idx].space).map(|s| s.name.clone());
            for probe in spi::health::rows(&q)? {
                probes += 1;
                let probe_vector: Option<Vec<f32>> = serde_json::from_value(probe["embedding"].clone()).ok();
                let (vector, query_vectors) = match (&space, probe_vector) {
                    (Some(name), Some(v)) if corpus.sources[idx].space != 0 => (None, json!({ name.as_str(): v })),
                    (_, v) => (v, serde_json::Value::Null),
                };
                let has_vector = vector.is_some() || !query_vectors.is_null();
                let words = health::probe_words(probe["content"].as_str().unwrap_or(""));
                for &mode in depth.modes {
                    let text = if words.is_empty() { None } else { Some(words.as_str()) };
                    if !health::probe_runs(mode, text.is_some(), has_vector) {
                        continue;
                    }
                    let args = Args {
                        query_vec: vector.clone(),
                        query_text: text.map(str::to_string),
                        k: 20,
                        offset: 0,
                        filters: filters.clone(),
                        mode: mode.to_string(),
                        max_per_parent: Some(0),
                        candidates: None,
                        rrf_k: None,
                        source_weights: None,
                        query_model: None,
                        feedback_params: None,
                        include_stale: true,
                        feedback: None,
                        extra_queries: serde_json::Value::Null,
                        filter_mode: "strict".into(),
                        query_vectors: query_vectors.clone(),
                        // every hit is checked, so the evidence filter would only hide some;
                        // expansion's and must-include's additions are audited too
                        evidence: Some(false),
                        expand: Some(!corpus.edges.is_empty()),
                        must_include: true,
                    };
                    searches += 1;
                    // (the definition loaded once for all probes: a table's invalidation during the
                    // check, e.g. by autovacuum, must not make every probe resolve it again)
                    let rows = search::run_of(&corpus.name, corpus.clone(), Call::Search(args))?.rows;
                    for r in rows {
                        hits.entry(r.source).or_default().push((r.item_id, mode));
                    }
                }
            }
        }
        // every hit checked against its parent's isolation values, read without the planner's
        // predicate: one lookup per source for all the probes' hits
        for (source, found) in hits {
            let Some(src) = corpus.sources.iter().find(|s| s.name == source) else { continue };
            hits_checked += found.len();
            let mut ids: Vec<String> = found.iter().map(|(id, _)| id.clone()).collect();
            ids.sort();
            ids.dedup();
            let mut values: HashMap<String, Value> = HashMap::new();
            for hit in spi::health::rows(&health::isolation_values_sql(src, ids))? {
                if let Some(id) = hit["item_id"].as_str() {
                    values.insert(id.to_string(), hit.clone());
                }
            }
            leaks.extend(health::audit_hits(src, found, &values));
        }
        Probing::Ran
    } else {
        Probing::NoFilterValues
    };
    let facts = IsolationFacts { static_checked, static_failures, probing, probes, searches, hits_checked, leaks };
    Ok(health::judge_isolation(&corpus.name, depth, facts))
}

/// BM25 statistics: refreshed at all, and not too many rows changed since.
fn lexical_statistics(corpus: &Corpus) -> Result<CheckRow, CoreError> {
    let tables: Vec<i64> = corpus
        .sources
        .iter()
        .flat_map(|s| std::iter::once(s.item.oid).chain(s.parent.as_ref().map(|p| p.oid)))
        .collect();
    if !spi::stats::reads_corpus_in_full(&corpus.name)? {
        return Ok(health::lexical_unreadable(&corpus.name));
    }
    let facts = spi::stats::lexical_state(&corpus.name, &tables)?;
    // SAFETY: reads the recovery state of this server.
    let in_recovery = unsafe { pgrx::pg_sys::RecoveryInProgress() };
    Ok(health::judge_lexical_statistics(&corpus.name, &facts, in_recovery))
}

/// The corpus' damaged corpus_bm25 indexes (each read back once): OID -> (name, damage).
fn bm25_damage(corpus: &Corpus) -> Result<BTreeMap<i64, (String, String)>, CoreError> {
    let mut out = BTreeMap::new();
    let mut seen = std::collections::HashSet::new();
    for src in &corpus.sources {
        let indexes: Vec<IndexInfo> = spi::health::table_rows(&health::indexes_sql(src.item.oid))?
            .into_iter()
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect();
        for x in indexes.iter().filter(|x| x.am == "corpus_bm25" && x.valid) {
            if !seen.insert(x.oid) {
                continue;
            }
            // a partitioned index's pages are its leaf partitions' indexes
            let parts: Vec<(i64, Option<String>)> = spi::health::rows(&health::index_partitions_sql(x.oid))?
                .iter()
                .filter_map(|p| Some((p.get("oid")?.as_i64()?, Some(p.get("name")?.as_str()?.to_string()))))
                .collect();
            let targets = if parts.is_empty() { vec![(x.oid, None)] } else { parts };
            for (oid, part) in targets {
                if let Err(e) = crate::bm25_index::verify_pages(oid) {
                    let damage = match part {
                        Some(name) => format!("its partition's index {name}: {}", e.message),
                        None => e.message,
                    };
                    out.insert(x.oid, (x.name.clone(), damage));
                    break;
                }
            }
        }
    }
    Ok(out)
}

/// Up to five ids of the items of each finding the figures count, read as the caller reads
/// the table (a finding none has is not looked up).
fn sample_ids(
    corpus: &Corpus,
    idx: usize,
    figures: &ContractFigures,
) -> Result<Vec<(health::Finding, &'static str, Vec<String>)>, CoreError> {
    let mut out = Vec::new();
    for (finding, name) in health::Finding::FIXABLE {
        if figures.count(finding) <= 0 {
            continue;
        }
        let ids = spi::health::table_rows(&health::sample_ids_sql(corpus, idx, finding, 5))?
            .into_iter()
            .filter_map(|v| v.get("item_id").and_then(Value::as_str).map(str::to_string))
            .collect();
        out.push((finding, name, ids));
    }
    Ok(out)
}

fn source_checks(
    corpus: &Corpus,
    idx: usize,
    damage: &BTreeMap<i64, (String, String)>,
    out: &mut Vec<CheckRow>,
) -> Result<(), CoreError> {
    let src = &corpus.sources[idx];
    let total = spi::search::reltuples(&[src.item.oid])?[0];
    let sampling = Sampling::of(total);
    let sample = sampling.percent;
    let figures = ContractFigures::from_row(&first_row(&health::contract_sql(corpus, idx, sample))?, &sampling);

    let samples = sample_ids(corpus, idx, &figures)?;
    let of_row = |row: &str| -> Vec<(&str, Vec<String>)> {
        samples.iter().filter(|(f, _, _)| health::finding_row(*f) == row).map(|(_, n, ids)| (*n, ids.clone())).collect()
    };
    let mut embeddings = health::judge_embeddings(corpus, idx, &figures, &sampling);
    health::judge_builds(&mut embeddings, corpus, idx, &spi::health::table_rows(&health::builds_query(src))?, total);
    health::add_sample_ids(&mut embeddings, &of_row("embeddings"));
    out.push(embeddings);

    let orphans = match health::orphans_sql(src, sample) {
        Some(q) => {
            sampling.estimate(&spi::health::table_rows(&q)?.into_iter().next().unwrap_or(Value::Null), "orphans")
        }
        None => 0,
    };
    let mut contract = health::judge_searchable_contract(corpus, idx, &figures, orphans, &sampling);
    health::add_sample_ids(&mut contract, &of_row("searchable_contract"));
    out.push(contract);

    // indexes
    let indexes: Vec<IndexInfo> = spi::health::table_rows(&health::indexes_sql(src.item.oid))?
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect();
    let searchable = figures.searchable;
    // does a partial HNSW index already serve the corpus? ask the planner (as the search does)
    let served = health::small_slice(src, searchable, total) && {
        let (p, settings) = pg_corpus_core::engine::partial_index_probe(
            corpus,
            idx,
            &[],
            40,
            searchable as f64 / total.max(1.0),
            i32::MAX,
        );
        pg_corpus_core::engine::Executor::served_by_partial_index(
            &mut spi::search::SpiExecutor::new(&corpus.name),
            &p,
            &settings,
        )?
    };
    let mut ix = health::judge_indexes(&corpus.name, src, &indexes);
    for x in &indexes {
        if let Some((_, d)) = damage.get(&x.oid) {
            health::judge_bm25_damage(&mut ix, x, d);
        }
    }
    let ix = health::judge_slice_index(ix, src, searchable, total, served);
    out.push(health::judge_bm25_key_columns(ix, src, &indexes, searchable, total));

    // re-embed queue: counts of this corpus' items; ages and the trigger are per table
    let queue =
        spi::health::table_rows(&health::queue_query(src, spi::has_function("corpus._queue_figures(regclass,name)")))?
            .into_iter()
            .next()
            .unwrap_or(Value::Null);
    out.push(health::judge_queue(corpus, idx, queue, figures.queued, figures.dead_letters, &sampling));
    out.push(analysis_check(corpus, idx)?);
    Ok(())
}

/// Whether a BM25 column generated by `corpus.bm25_document` holds what the installed
/// analyser makes of its rows' text.
fn analysis_check(corpus: &Corpus, idx: usize) -> Result<CheckRow, CoreError> {
    let src = &corpus.sources[idx];
    let how = crate::reanalyze::analysis_language(src)?;
    let sample = match how {
        Ok(lang) => {
            let r = spi::health::table_rows(&health::analysis_sample_query(src, lang))?.into_iter().next();
            let r = r.unwrap_or(Value::Null);
            (r["sampled"].as_i64().unwrap_or(0), r["differ"].as_i64().unwrap_or(0))
        }
        Err(_) => (0, 0),
    };
    Ok(health::judge_analysis(&corpus.name, src, how, sample))
}

/// The audit log of a corpus that keeps one: how many rows, their time range (for a role that
/// may read the log), and the searches this backend could not log (standby, read-only).
fn audit_log(c: &Corpus) -> Result<CheckRow, CoreError> {
    let skipped = spi::audit::skipped();
    Ok(health::judge_audit_log(c, skipped, spi::audit::summary(&c.name)?))
}

/// Everything that can silently go wrong, one row per check and corpus/source.
#[pg_extern(stable, parallel_restricted)]
fn corpus_health_check(
    corpus: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(check, String),
        name!(corpus, Option<String>),
        name!(source, Option<String>),
        name!(status, String),
        name!(count, i64),
        name!(detail, JsonB),
        name!(hint, Option<String>),
    ),
> {
    let rows = spi::pinned_search_path(|| {
        spi::with_table_memo(|| -> Result<Vec<CheckRow>, CoreError> {
            // an unknown corpus is the usual 42704
            let names = spi::catalog::load_corpus_names(corpus)?;
            let mut out = vec![version_check()?, privileges_check()?];
            if on_citus_coordinator()? {
                out.push(health::judge_citus(&first_row(&health::citus_query())?));
            }
            let progress = crate::progress::Progress::start("corpus_health_check", corpus);
            let n = names.len() as i64;
            for (i, name) in names.into_iter().enumerate() {
                progress.phase(&format!("corpus {name}"), Some(i as i64), Some(n));
                match spi::catalog::load_corpus(&name) {
                    Err(e) => {
                        out.push(health::judge_unloadable(&name, &e));
                        // the sources that still resolve are judged as usual; the searches of
                        // the isolation audit cannot run on a corpus that does not load
                        if let Ok((c, _)) = spi::catalog::load_corpus_available(&name) {
                            if !c.sources.is_empty() {
                                out.push(health::judge_evidence(&c));
                                out.push(health::judge_audit_unloadable(&c.name, &e.message));
                                out.push(lexical_statistics(&c)?);
                                let damage = bm25_damage(&c)?;
                                for idx in 0..c.sources.len() {
                                    source_checks(&c, idx, &damage, &mut out)?;
                                }
                            }
                        }
                    }
                    Ok(c) => {
                        out.push(health::judge_drift(&c));
                        out.push(health::judge_evidence(&c));
                        // the audit searches: through a damaged BM25 index it could not
                        let damage = bm25_damage(&c)?;
                        match damage.values().next() {
                            Some((index, d)) => {
                                out.push(health::judge_audit_blocked(&c.name, &format!("{index}: {d}")))
                            }
                            None => out.push(isolation_audit(&c, health::audit_depth(corpus.is_some()))?),
                        }
                        out.push(lexical_statistics(&c)?);
                        if c.audit.enabled {
                            out.push(audit_log(&c)?);
                        }
                        for idx in 0..c.sources.len() {
                            source_checks(&c, idx, &damage, &mut out)?;
                        }
                    }
                }
            }
            Ok(out)
        })
    })
    .or_raise();
    TableIterator::new(rows.into_iter().map(|r| {
        (
            r.check.to_string(),
            r.corpus,
            r.source,
            r.status.name().to_string(),
            r.count,
            JsonB(r.detail),
            if r.hint.is_empty() { None } else { Some(r.hint) },
        )
    }))
}
