//! Lexical retrieval quality of the analyser + BM25 on labelled sets (not a CI test: the data
//! lives in /work/shared, outside the repository).
//!
//!     cargo run -p pg_corpus_core --release --example lexical_eval -- [DATA_DIR]
//!
//! DATA_DIR (default /work/shared/data) holds BEIR-layout folders `cranfield` and `heq-val`.
//! Every document is analysed, indexed in a `MemoryIndex`, every query scored exhaustively
//! with BM25 (Lucene variant, k1 1.2, b 0.75 unless the row says otherwise), and the top 10
//! judged with `metrics::evaluate` (trec_eval's nDCG@10). Prints a Markdown table per set;
//! "p vs first" / "p vs default" are paired randomisation tests (metrics::compare, 10,000
//! trials) of the row's per-query nDCG@10 against the set's first row / the default row.

#[path = "common/beir.rs"]
mod beir;

use std::path::PathBuf;

use pg_corpus_core::analysis::{Analyzer, ForeignScript, Options, Stopwords};

use pg_corpus_core::bm25::{Bm25Params, MemoryIndex};
use pg_corpus_core::metrics;
use pg_corpus_core::model::Language;

struct Variant {
    name: String,
    lang: Language,
    opts: Options,
    params: Bm25Params,
}

fn variant(name: &str, lang: Language, f: impl FnOnce(&mut Options)) -> Variant {
    let mut opts = Options::for_language(lang);
    f(&mut opts);
    Variant { name: name.to_string(), lang, opts, params: Bm25Params::default() }
}

struct Outcome {
    ndcg: Vec<f64>,
    mean: metrics::QueryMetrics,
    seconds: f64,
}

fn run(c: &beir::Collection, v: &Variant) -> Outcome {
    let t0 = std::time::Instant::now();
    let a = Analyzer::with_options(v.lang, v.opts.clone());
    let mut ix = MemoryIndex::new();
    for d in &c.docs {
        ix.add(&a.analyze(&d.text));
    }
    let mut per = Vec::new();
    for q in &c.queries {
        let hits = ix.search(&a.query_terms(&q.text), v.params, 10);
        let ranking: Vec<String> = hits.iter().map(|(i, _)| c.docs[*i].id.clone()).collect();
        per.push(metrics::evaluate(&ranking, &c.qrels[&q.id], 10));
    }
    Outcome {
        ndcg: per.iter().map(|m| m.ndcg).collect(),
        mean: metrics::mean(&per),
        seconds: t0.elapsed().as_secs_f64(),
    }
}

fn table(c: &beir::Collection, variants: &[Variant]) {
    println!("\n### {} ({} documents, {} queries)\n", c.name, c.docs.len(), c.queries.len());
    println!("| analyser variant | nDCG@10 | recall@10 | MRR | p vs first | p vs default | seconds |");
    println!("|---|---|---|---|---|---|---|");
    let outcomes: Vec<Outcome> = variants.iter().map(|v| run(c, v)).collect();
    let default = variants.iter().position(|v| v.name.contains("(default)")).unwrap_or(0);
    let p = |a: usize, b: usize| {
        if a == b {
            "—".to_string()
        } else {
            format!("{:.4}", metrics::compare(&outcomes[a].ndcg, &outcomes[b].ndcg, 10_000, 42).p_value)
        }
    };
    for (i, (v, o)) in variants.iter().zip(&outcomes).enumerate() {
        println!(
            "| {} | {:.4} | {:.4} | {:.4} | {} | {} | {:.1} |",
            v.name,
            o.mean.ndcg,
            o.mean.recall,
            o.mean.mrr,
            p(0, i),
            p(default, i),
            o.seconds
        );
    }
}

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "/work/shared/data".into()));
    let k15 = Bm25Params { k1: 1.5, b: 0.75 };

    match beir::load(&dir.join("cranfield")) {
        Ok(c) => {
            let mut v = vec![
                variant("simple (fold case + diacritics)", Language::Simple, |_| {}),
                variant("english, stop words only (no stemming)", Language::English, |o| o.stem = false),
                variant("english, Snowball only", Language::English, |o| o.stopwords = Stopwords::Off),
                variant("english, Snowball + Lucene's 33 stop words", Language::English, |o| {
                    o.stopwords = Stopwords::Short
                }),
                variant("**english (default): Snowball + NLTK's 179 stop words**", Language::English, |_| {}),
            ];
            let mut x = variant("english default, k1 1.5", Language::English, |_| {});
            x.params = k15;
            v.push(x);
            let mut x = variant("simple, k1 1.5", Language::Simple, |_| {});
            x.params = k15;
            v.push(x);
            table(&c, &v);
        }
        Err(e) => eprintln!("cranfield: {e}"),
    }

    match beir::load(&dir.join("heq-val")) {
        Ok(c) => {
            let mut v = vec![
                variant("simple (niqqud, final letters, geresh folded)", Language::Simple, |_| {}),
                variant("hebrew, no prefix handling", Language::Hebrew, |o| o.hebrew_prefixes = false),
                variant("hebrew default without stop words (analyser version 1)", Language::Hebrew, |o| {
                    o.stopwords = Stopwords::Off
                }),
                variant(
                    "**hebrew (default): + prefix-less forms, ≥ 2 letters left, weight 0.5**",
                    Language::Hebrew,
                    |_| {},
                ),
                variant("hebrew, prefix-less forms at weight 1", Language::Hebrew, |o| o.hebrew_prefix_weight = 1.0),
                variant("hebrew, prefix-less forms ≥ 3 letters left (weight 0.5)", Language::Hebrew, |o| {
                    o.hebrew_prefix_min_rest = 3
                }),
                variant("hebrew, prefix-less forms at weight 0.3", Language::Hebrew, |o| o.hebrew_prefix_weight = 0.3),
                variant("hebrew, prefix-less forms at weight 0.7", Language::Hebrew, |o| o.hebrew_prefix_weight = 0.7),
                variant("hebrew default + plural/feminine suffix forms", Language::Hebrew, |o| {
                    o.hebrew_suffixes = true
                }),
                variant("hebrew default, Latin words folded only (not English-stemmed)", Language::Hebrew, |o| {
                    o.foreign_script = ForeignScript::Fold
                }),
            ];
            let mut x = variant("hebrew default, k1 1.5", Language::Hebrew, |_| {});
            x.params = k15;
            v.push(x);
            let mut x = variant("simple, k1 1.5", Language::Simple, |_| {});
            x.params = k15;
            v.push(x);
            table(&c, &v);
        }
        Err(e) => eprintln!("heq-val: {e}"),
    }
}
