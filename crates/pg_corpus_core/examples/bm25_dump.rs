//! Dump the analyser's tokens and this crate's BM25 scores for a BEIR collection, for the
//! cross-check against bm25s (examples/bm25s_crosscheck.py):
//!
//!     cargo run -p pg_corpus_core --release --example bm25_dump -- \
//!         /work/shared/data/cranfield english /tmp/cranfield_dump.json
//!     /work/main/.venv/bin/python crates/pg_corpus_core/examples/bm25s_crosscheck.py \
//!         /tmp/cranfield_dump.json
//!
//! Output: one JSON object: `k1`, `b`, `docs` (id, surface tokens), `queries` (id, surface
//! tokens, and `scores`: [doc number, score] for every document with a positive score).
//! Only languages whose keys are all surface keys (one per word: english, simple, german,
//! ...) can be cross-checked this way: bm25s takes a document's length from its token list,
//! and extra keys (Hebrew forms without prefixes, Czech prefix keys) do not count towards
//! pg_corpus' document length. A fourth argument "weights" gives every query term a weight
//! (1.0, 0.5, 0.25 in turn) to check that weights multiply the term's contribution.

#[path = "common/beir.rs"]
mod beir;

use std::io::Write;
use std::path::PathBuf;

use pg_corpus_core::analysis::Analyzer;

use pg_corpus_core::bm25::{Bm25Params, MemoryIndex};
use pg_corpus_core::model::Language;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: bm25_dump DATA_DIR LANGUAGE OUT.json [weights]");
        std::process::exit(2);
    }
    let c = beir::load(&PathBuf::from(&args[1])).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let lang = Language::parse(&args[2]).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let weights = args.get(4).is_some_and(|a| a == "weights");
    let a = Analyzer::new(lang);
    let p = Bm25Params::default();
    let mut ix = MemoryIndex::new();
    let mut docs = Vec::new();
    for d in &c.docs {
        let an = a.analyze(&d.text);
        let toks = a.surface_tokens(&d.text);
        assert_eq!(toks.len() as u32, an.length);
        ix.add(&an);
        docs.push(serde_json::json!({"id": d.id, "tokens": toks}));
    }
    let mut queries = Vec::new();
    for q in &c.queries {
        let mut terms = a.query_terms(&q.text);
        if weights {
            for (i, t) in terms.iter_mut().enumerate() {
                t.weight = [1.0, 0.5, 0.25][i % 3];
            }
        }
        let scores: Vec<(usize, f64)> =
            ix.scores(&terms, p).into_iter().enumerate().filter(|(_, s)| *s > 0.0).collect();
        let w: Vec<serde_json::Value> = terms.iter().map(|t| serde_json::json!([t.key, t.weight, t.count])).collect();
        queries.push(serde_json::json!({
            "id": q.id, "tokens": a.surface_tokens(&q.text), "terms": w, "scores": scores,
        }));
    }
    let out = serde_json::json!({
        "collection": c.name, "language": lang.name(), "k1": p.k1, "b": p.b,
        "docs": docs, "queries": queries,
    });
    let mut f = std::fs::File::create(&args[3]).expect("create output");
    f.write_all(out.to_string().as_bytes()).expect("write output");
    eprintln!("wrote {} docs, {} queries to {}", c.docs.len(), c.queries.len(), args[3]);
}
