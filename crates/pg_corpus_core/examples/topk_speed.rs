//! In-memory cost of the top k by Block-Max WAND and by MaxScore against exhaustive scoring of
//! the same block postings:
//! a synthetic collection (Zipf vocabulary, 30–120 words per document), queries of 1, 2, 3, 5
//! and 8 terms drawn from the same distribution, top 10; both answers compared for each query.
//!
//!   cargo run --release -p pg_corpus_core --example topk_speed [documents] [queries]
//!
//! Prints one markdown table: per query length, the median time of each method, exhaustive
//! over the faster of the two, and the median share of the postings each scored.

use std::collections::BTreeMap;
use std::time::Instant;

use pg_corpus_core::bm25::{idf, Bm25Params};
use pg_corpus_core::postings::{Posting, TermPostings};
use pg_corpus_core::topk::{block_max_wand, exhaustive, max_score, over_docs, QueryTerm, Scoring};

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let n_docs = args.first().copied().unwrap_or(200_000);
    let queries = args.get(1).copied().unwrap_or(50);
    let vocab = 50_000usize;
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let zipf = move |next: &mut dyn FnMut() -> u64| {
        let r = (next() % 1_000_000) as f64 / 1_000_000.0;
        ((vocab as f64).powf(r) as usize).saturating_sub(1).min(vocab - 1)
    };
    let mut per: Vec<Vec<Posting>> = vec![Vec::new(); vocab];
    let mut total_len = 0u64;
    for d in 0..n_docs as u64 {
        let len = 30 + (next() % 91) as u32;
        total_len += u64::from(len);
        let mut tf: BTreeMap<usize, u32> = BTreeMap::new();
        for _ in 0..len {
            *tf.entry(zipf(&mut next)).or_insert(0) += 1;
        }
        for (t, f) in tf {
            per[t].push(Posting { doc: d, tf: f, len });
        }
    }
    let index: Vec<TermPostings> = per.iter().map(|p| TermPostings::build(p)).collect();
    let scoring = Scoring { avg_doc_len: total_len as f64 / n_docs as f64, params: Bm25Params::default() };
    println!("{n_docs} documents, {queries} queries per length, top 10\n");
    println!("| terms | block-max WAND p50 ms | MaxScore p50 ms | exhaustive p50 ms | exhaustive / best | postings scored, WAND / MaxScore (p50) |");
    println!("|---:|---:|---:|---:|---:|---:|");
    let mut drawn: Vec<(usize, Vec<usize>)> = Vec::new();
    for len in [1usize, 2, 3, 5, 8] {
        let (mut fast, mut ms, mut slow, mut share, mut ms_share) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..queries {
            let mut picked: Vec<usize> = Vec::new();
            while picked.len() < len {
                let t = zipf(&mut next);
                if !picked.contains(&t) && !index[t].blocks.is_empty() {
                    picked.push(t);
                }
            }
            drawn.push((len, picked.clone()));
            let terms: Vec<QueryTerm<'_>> = picked
                .iter()
                .map(|&t| QueryTerm { factor: idf(n_docs as u64, index[t].postings() as u64), postings: &index[t] })
                .collect();
            let t0 = Instant::now();
            let (hits, work) = block_max_wand(&terms, &scoring, 10, |_| true, |d| d);
            fast.push(t0.elapsed().as_secs_f64() * 1e3);
            let t0 = Instant::now();
            let (by_max_score, ms_work) = max_score(&terms, &scoring, 10, |_| true, |d| d);
            ms.push(t0.elapsed().as_secs_f64() * 1e3);
            let t0 = Instant::now();
            let want = exhaustive(&terms, &scoring, 10, |_| true, |d| d);
            slow.push(t0.elapsed().as_secs_f64() * 1e3);
            assert_eq!(hits, want, "the block-max answer differs for terms {picked:?}");
            assert_eq!(by_max_score, want, "the MaxScore answer differs for terms {picked:?}");
            let postings: usize = terms.iter().map(|t| t.postings.postings()).sum();
            share.push(work.docs_scored as f64 / postings.max(1) as f64);
            ms_share.push(ms_work.docs_scored as f64 / postings.max(1) as f64);
        }
        let med = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (f, m, s) = (med(&mut fast), med(&mut ms), med(&mut slow));
        let (sh, msh) = (med(&mut share), med(&mut ms_share));
        println!(
            "| {len} | {f:.3} | {m:.3} | {s:.3} | {:.1}× | {:.1}% / {:.1}% |",
            s / f.min(m).max(1e-9),
            100.0 * sh,
            100.0 * msh
        );
    }
    // a corpus that is a slice of the table: MaxScore asking each candidate, against scoring
    // the slice's documents only
    println!("\n| slice | terms | MaxScore with a check p50 ms | the slice's documents p50 ms |");
    println!("|---:|---:|---:|---:|");
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for every in [20u64, 100, 1000] {
        let slice: Vec<u64> = (0..n_docs as u64).filter(|d| d.is_multiple_of(every)).collect();
        for len in [1usize, 3, 8] {
            let (mut checked, mut scanned) = (Vec::new(), Vec::new());
            for (_, picked) in drawn.iter().filter(|(l, _)| *l == len) {
                let terms: Vec<QueryTerm<'_>> = picked
                    .iter()
                    .map(|&t| QueryTerm { factor: idf(n_docs as u64, index[t].postings() as u64), postings: &index[t] })
                    .collect();
                let t0 = Instant::now();
                let (a, _) = max_score(&terms, &scoring, 10, |d| d.is_multiple_of(every), |d| d);
                checked.push(t0.elapsed().as_secs_f64() * 1e3);
                let t0 = Instant::now();
                let (b, _) = over_docs(&terms, &scoring, 10, &slice, |d| d);
                scanned.push(t0.elapsed().as_secs_f64() * 1e3);
                assert_eq!(a, b, "the slice answers differ for terms {picked:?}");
            }
            println!("| {:.1}% | {len} | {:.3} | {:.3} |", 100.0 / every as f64, med(&mut checked), med(&mut scanned));
        }
    }
}
