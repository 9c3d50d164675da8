//! The block-max and MaxScore top k against today's scorer: random documents made of real Hebrew and
//! English words, analysed by pg_corpus' analysers, indexed in memory (`bm25::MemoryIndex`,
//! the exhaustive term-at-a-time reference of the lexical branch's formula) and as block
//! postings; every query's top k is the same documents, scores and order every way.

use std::fs;
use std::path::Path;

use pg_corpus_core::analysis::Analyzer;
use pg_corpus_core::bm25::{idf, Bm25Params, MemoryIndex};
use pg_corpus_core::model::Language;
use pg_corpus_core::postings::{Posting, TermPostings};
use pg_corpus_core::topk::{block_max_wand, max_score, QueryTerm, Scoring};
use proptest::prelude::*;

fn words(file: &str, column: usize) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(file);
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| l.split('\t').nth(column).map(str::to_string))
        .filter(|w| !w.is_empty())
        .collect()
}

/// A text of `n` words drawn Zipf-like from `vocab` by the generator `next`.
fn text(vocab: &[String], n: usize, next: &mut impl FnMut() -> u64) -> String {
    (0..n)
        .map(|_| {
            let r = (next() % 1_000_000) as f64 / 1_000_000.0;
            let i = ((vocab.len() as f64).powf(r) as usize).saturating_sub(1).min(vocab.len() - 1);
            vocab[i].as_str()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn check(
    lang: Language,
    vocab: &[String],
    seed: u64,
    n_docs: usize,
    queries: usize,
    k: usize,
) -> Result<(), TestCaseError> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let a = Analyzer::new(lang);
    let mut mem = MemoryIndex::new();
    for _ in 0..n_docs {
        let n = 3 + (next() % 60) as usize;
        mem.add(&a.analyze(&text(vocab, n, &mut next)));
    }
    let p = Bm25Params::default();
    let stats = mem.stats();
    let scoring = Scoring { avg_doc_len: stats.avg_doc_len(), params: p };
    for _ in 0..queries {
        let q = a.query_terms(&text(vocab, 1 + (next() % 8) as usize, &mut next));
        let postings: Vec<TermPostings> = q
            .iter()
            .map(|t| {
                let ps: Vec<Posting> = mem
                    .postings_of(&t.key)
                    .into_iter()
                    .map(|(doc, tf, len)| Posting { doc: u64::from(doc), tf, len })
                    .collect();
                TermPostings::build(&ps)
            })
            .collect();
        let terms: Vec<QueryTerm<'_>> = q
            .iter()
            .zip(&postings)
            .map(|(t, ps)| QueryTerm {
                factor: t.weight * f64::from(t.count) * idf(stats.n_docs, mem.df(&t.key)),
                postings: ps,
            })
            .collect();
        let want = mem.search(&q, p, k);
        for (got, _) in
            [block_max_wand(&terms, &scoring, k, |_| true, |d| d), max_score(&terms, &scoring, k, |_| true, |d| d)]
        {
            let got: Vec<(usize, f64)> =
                got.into_iter().filter(|h| h.score > 0.0).map(|h| (h.doc as usize, h.score)).collect();
            prop_assert_eq!(&got, &want);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]
    #[test]
    fn hebrew_top_k_equals_the_exhaustive_scorer(seed in any::<u64>(), n_docs in 1usize..400, k in 1usize..20) {
        let vocab = words("he_heq_words.txt", 0);
        check(Language::Hebrew, &vocab, seed, n_docs, 25, k)?;
    }

    #[test]
    fn english_top_k_equals_the_exhaustive_scorer(seed in any::<u64>(), n_docs in 1usize..400, k in 1usize..20) {
        let vocab = words("en_lemmas.tsv", 0);
        check(Language::English, &vocab, seed, n_docs, 25, k)?;
    }
}
