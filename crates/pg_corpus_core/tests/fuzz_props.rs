//! Fuzzing by property tests: the readers of bytes and text that come from outside —
//! the tsvector reader (a datum's bytes), the bounded JSON reader, lexeme quoting and the
//! query analyser — never panic on arbitrary input, and what they return keeps its invariants.
//! CI runs the default number of cases; `scripts/fuzz.sh` runs many more
//! (PROPTEST_CASES). The filter parser's fuzzing is in src/filters.rs (it needs a resolved
//! corpus).

use pg_corpus_core::model::Language;
use pg_corpus_core::tsvector::{quote_lexeme, TsVector};
use pg_corpus_core::{json, lexical};
use proptest::prelude::*;

/// Bytes that look like a tsvector header often enough to get past the first check.
fn tsvector_like() -> impl Strategy<Value = Vec<u8>> {
    (0u32..64, prop::collection::vec(any::<u8>(), 0..600)).prop_map(|(n, mut body)| {
        let mut v = Vec::with_capacity(8 + body.len());
        v.extend_from_slice(&((8 + body.len()) as u32 * 4).to_ne_bytes());
        v.extend_from_slice(&n.to_ne_bytes());
        v.append(&mut body);
        v
    })
}

fn json_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        prop::collection::vec(
            prop::sample::select(vec!["{", "}", "[", "]", "\"", "\\", ":", ",", "1", "a", " "]),
            0..300
        )
        .prop_map(|v| v.concat()),
    ]
}

proptest! {
    #[test]
    fn the_tsvector_reader_never_reads_out_of_bounds(data in prop_oneof![tsvector_like(), prop::collection::vec(any::<u8>(), 0..64)],
                                                     key in prop::collection::vec(any::<u8>(), 0..12)) {
        if let Some(v) = TsVector::parse(&data) {
            let mut surface = 0u32;
            for i in 0..v.len() {
                let e = v.entry(i).expect("parse validated every entry");
                prop_assert!(e.lexeme.len() <= data.len());
                surface = surface.saturating_add(e.surface);
            }
            prop_assert_eq!(v.surface_length(), surface);
            prop_assert!(v.entry(v.len()).is_none());
            let _ = v.find(&key);
        }
    }

    #[test]
    fn the_json_reader_never_panics_and_bounds_depth(text in json_text()) {
        match json::parse(&text, "x") {
            Ok(_) => prop_assert!(json::depth(&text) <= json::MAX_DEPTH),
            Err(e) => {
                prop_assert!(["54001", "22023"].contains(&e.state.code()));
                prop_assert!(!e.hint.is_empty());
            }
        }
    }

    #[test]
    fn quoted_lexemes_are_single_sql_literals(s in any::<String>()) {
        let q = quote_lexeme(&s);
        prop_assert!(q.len() >= 2 && q.starts_with('\'') && q.ends_with('\''));
        // inside, every quote is doubled: no literal ends early
        let inner = &q[1..q.len() - 1];
        prop_assert!(!inner.replace("''", "").contains('\''));
    }

    #[test]
    fn query_analysis_and_the_ts_rank_cd_bound_never_panic(text in any::<String>(), lang in 0usize..4) {
        let language = [Language::Hebrew, Language::Czech, Language::German, Language::English][lang];
        for k in lexical::query_keys(&text, language) {
            prop_assert!(!k.key.is_empty());
            prop_assert!(k.weight.is_finite() && k.weight > 0.0);
        }
        let kept = lexical::ts_rank_cd_text(&text);
        prop_assert!(text.starts_with(kept));
        prop_assert!(kept.split_whitespace().count() <= lexical::TS_RANK_CD_MAX_WORDS);
    }
}
