//! Snippets: the passage of a text that best answers a query, with the query's words marked,
//! found with the same analyser as the BM25 column (so a word matches in the snippet exactly
//! when it matches in the index: `בבית` marks for the query `בית`, `Svobodovi` for `Svoboda`).
//!
//! The text is cut into words at Unicode word boundaries, each word analysed alone; a word is
//! a hit when one of its keys is a key of the query. The passage is the window of at most
//! `max_chars` characters, starting and ending on words, that holds the most distinct query
//! keys (each counted by its best weight: a fallback key counts half), then the most hits, then
//! comes first. Without any hit the snippet is the text's beginning. Characters outside the
//! passage are replaced by `…`; the passage keeps the text's own spelling.

use std::collections::HashMap;

use unicode_segmentation::UnicodeSegmentation;

use crate::analysis::Analyzer;
use crate::error::{CoreError, Result, SqlState};
use crate::model::{Corpus, Language};

/// Shortest and longest passage a caller may ask for, in characters.
pub const MIN_CHARS: i32 = 20;
pub const MAX_CHARS: i32 = 10_000;
/// The passage length when the caller does not say.
pub const DEFAULT_CHARS: i32 = 240;

/// Marks that wrap the query's words, and the passage's length.
#[derive(Debug, Clone, PartialEq)]
pub struct SnippetOptions {
    pub max_chars: i32,
    pub start: String,
    pub stop: String,
}

impl SnippetOptions {
    /// Checked options: `max_chars` within [`MIN_CHARS`]..=[`MAX_CHARS`], marks of at most 64
    /// characters.
    pub fn new(max_chars: i32, start: &str, stop: &str) -> Result<SnippetOptions> {
        if !(MIN_CHARS..=MAX_CHARS).contains(&max_chars) {
            return Err(CoreError::new(
                SqlState::InvalidParameterValue,
                format!("max_chars must be between {MIN_CHARS} and {MAX_CHARS}, got {max_chars}"),
                format!("Pass max_chars => {DEFAULT_CHARS} (the default) or another length in that range."),
            ));
        }
        for (name, mark) in [("start_mark", start), ("stop_mark", stop)] {
            if mark.chars().count() > 64 {
                return Err(CoreError::new(
                    SqlState::InvalidParameterValue,
                    format!("{name} is longer than 64 characters"),
                    "Marks wrap each matched word: use short ones such as '<b>' and '</b>', or '**' and '**'.",
                ));
            }
        }
        Ok(SnippetOptions { max_chars, start: start.to_string(), stop: stop.to_string() })
    }
}

/// The snippet of `text` for `query` in source `source` of `corpus`, analysed as the source's
/// BM25 column is (`simple` for a source without pg_corpus' analyser); 42704 for a source the
/// corpus does not have.
pub fn for_source(corpus: &Corpus, source: &str, text: &str, query: &str, opts: &SnippetOptions) -> Result<String> {
    let idx = crate::engine::source_index(corpus, source)?;
    let lang = corpus.sources[idx].language.unwrap_or(Language::Simple);
    Ok(snippet(&Analyzer::new(lang), text, query, opts))
}

/// One word of the text: its byte span, character span, and the query key it matches (its
/// best weight), if any.
struct Word {
    bytes: (usize, usize),
    chars: (usize, usize),
    hit: Option<(usize, f64)>,
}

/// The snippet of `text` for `query`, analysed by `analyzer`.
pub fn snippet(analyzer: &Analyzer, text: &str, query: &str, opts: &SnippetOptions) -> String {
    let mut keys: HashMap<String, (usize, f64)> = HashMap::new();
    for t in analyzer.query_terms(query) {
        let n = keys.len();
        keys.entry(t.key).or_insert((n, t.weight));
    }
    let words = words(analyzer, text, &keys);
    let (Some(first), Some(last)) = best_window(&words, keys.len(), opts.max_chars as usize) else {
        return if text.is_empty() { String::new() } else { "…".to_string() };
    };
    // what precedes the first word and follows the last (punctuation, spaces) is kept when the
    // passage reaches the text's start or end and the passage stays within max_chars
    let total = text.chars().count();
    let mut room = (opts.max_chars as usize).saturating_sub(words[last].chars.1 - words[first].chars.0);
    let from = if first == 0 && words[0].chars.0 <= room {
        room -= words[0].chars.0;
        0
    } else {
        words[first].bytes.0
    };
    let to =
        if last + 1 == words.len() && total - words[last].chars.1 <= room { text.len() } else { words[last].bytes.1 };
    let mut out = String::new();
    if from > 0 {
        out.push('…');
    }
    let mut at = from;
    for w in &words[first..=last] {
        out.push_str(&text[at..w.bytes.0]);
        let word = &text[w.bytes.0..w.bytes.1];
        if w.hit.is_some() {
            out.push_str(&opts.start);
            out.push_str(word);
            out.push_str(&opts.stop);
        } else {
            out.push_str(word);
        }
        at = w.bytes.1;
    }
    out.push_str(&text[at..to]);
    if to < text.len() {
        out.push('…');
    }
    out
}

fn words(analyzer: &Analyzer, text: &str, keys: &HashMap<String, (usize, f64)>) -> Vec<Word> {
    let mut out = Vec::new();
    let mut chars = 0usize;
    let mut last_byte = 0usize;
    for (at, seg) in text.split_word_bound_indices() {
        chars += text[last_byte..at].chars().count();
        last_byte = at;
        if !seg.chars().any(char::is_alphanumeric) {
            continue;
        }
        let mut hit: Option<(usize, f64)> = None;
        if !keys.is_empty() {
            analyzer.for_each_key(seg, |k, weight, _| {
                if let Some(&(idx, qw)) = keys.get(k) {
                    let w = weight.min(qw);
                    if hit.is_none_or(|(_, best)| w > best) {
                        hit = Some((idx, w));
                    }
                }
            });
        }
        let len = seg.chars().count();
        out.push(Word { bytes: (at, at + seg.len()), chars: (chars, chars + len), hit });
    }
    out
}

/// The first and last word of the passage: the window of words spanning at most `max`
/// characters with the most distinct query keys (by weight), then the most hits, then the
/// earliest. None when the text has no word.
fn best_window(words: &[Word], n_keys: usize, max: usize) -> (Option<usize>, Option<usize>) {
    if words.is_empty() {
        return (None, None);
    }
    let mut best: Option<(f64, usize, usize, usize)> = None; // (distinct weight, hits, first, last)
    let mut weight_of = vec![0.0f64; n_keys];
    let mut count_of = vec![0usize; n_keys];
    let mut last = 0usize;
    let mut hits = 0usize;
    let mut consider = |first: usize, last: usize, weight_of: &[f64], hits: usize| {
        let distinct: f64 = weight_of.iter().sum();
        let better = match best {
            None => true,
            Some((d, h, _, _)) => distinct > d + 1e-12 || ((distinct - d).abs() <= 1e-12 && hits > h),
        };
        if better {
            best = Some((distinct, hits, first, last));
        }
    };
    let add = |w: &Word, weight_of: &mut [f64], count_of: &mut [usize], hits: &mut usize| {
        if let Some((k, wt)) = w.hit {
            count_of[k] += 1;
            *hits += 1;
            weight_of[k] = weight_of[k].max(wt);
        }
    };
    // the window [first, last] grows at its end while it fits, then drops its first word
    add(&words[0], &mut weight_of, &mut count_of, &mut hits);
    for first in 0..words.len() {
        if last < first {
            last = first;
            add(&words[first], &mut weight_of, &mut count_of, &mut hits);
        }
        while last + 1 < words.len() && words[last + 1].chars.1 - words[first].chars.0 <= max {
            last += 1;
            add(&words[last], &mut weight_of, &mut count_of, &mut hits);
        }
        consider(first, last, &weight_of, hits);
        if let Some((k, _)) = words[first].hit {
            count_of[k] -= 1;
            hits -= 1;
            if count_of[k] == 0 {
                weight_of[k] = 0.0;
            } else {
                // the best weight among the key's remaining hits in the window
                weight_of[k] = words[first + 1..=last]
                    .iter()
                    .filter_map(|w| w.hit.filter(|(kk, _)| *kk == k).map(|(_, wt)| wt))
                    .fold(0.0, f64::max);
            }
        }
    }
    match best {
        // no hit anywhere: the text's beginning
        Some((d, _, _, _)) if d <= 0.0 => {
            let mut l = 0;
            while l + 1 < words.len() && words[l + 1].chars.1 <= max {
                l += 1;
            }
            (Some(0), Some(l))
        }
        Some((_, _, f, l)) => (Some(f), Some(l)),
        None => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(max: i32) -> SnippetOptions {
        SnippetOptions::new(max, "[", "]").unwrap()
    }

    #[test]
    fn the_query_words_are_marked_in_the_texts_own_spelling() {
        let a = Analyzer::new(Language::Czech);
        let s = snippet(&a, "Klíče byly předány panu Svobodovi v pondělí.", "Kdo je Svoboda?", &opts(240));
        assert_eq!(s, "Klíče byly předány panu [Svobodovi] v pondělí.");
        let a = Analyzer::new(Language::Hebrew);
        let s = snippet(&a, "המפתחות נמסרו בבית המשפט ביום שני.", "בית משפט", &opts(240));
        assert_eq!(s, "המפתחות נמסרו [בבית] [המשפט] ביום שני.");
        let a = Analyzer::new(Language::English);
        let s = snippet(&a, "The tenants' running costs rose.", "tenant run cost", &opts(240));
        assert_eq!(s, "The [tenants]' [running] [costs] rose.");
    }

    #[test]
    fn the_passage_with_most_distinct_query_words_wins() {
        let a = Analyzer::new(Language::English);
        let filler = "lorem ipsum dolor sit amet ".repeat(20);
        let text = format!("{filler}lease lease lease {filler}the lease deposit was returned {filler}");
        let s = snippet(&a, &text, "lease deposit", &opts(60));
        assert!(s.contains("[lease] [deposit]"), "{s}");
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.chars().count() <= 62 + 2 * 4, "{s}");
    }

    #[test]
    fn without_a_hit_the_beginning_of_the_text() {
        let a = Analyzer::new(Language::English);
        let text = "one two three four five six seven eight nine ten eleven twelve";
        assert_eq!(snippet(&a, text, "zebra", &opts(20)), "one two three four…");
        assert_eq!(snippet(&a, text, "", &opts(20)), "one two three four…");
        assert_eq!(snippet(&a, "", "zebra", &opts(20)), "");
        assert_eq!(snippet(&a, "short", "zebra", &opts(20)), "short");
    }

    #[test]
    fn a_source_is_analysed_as_its_bm25_column() {
        let mut c = crate::testing::legal();
        c.sources[0].language = Some(Language::Hebrew);
        c.sources[1].language = None;
        let text = "ובבית המשפט";
        assert_eq!(for_source(&c, "chunks", text, "בית", &opts(240)).unwrap(), "[ובבית] המשפט");
        assert_eq!(for_source(&c, "halachot", text, "בית", &opts(240)).unwrap(), "ובבית המשפט");
        let e = for_source(&c, "nope", text, "בית", &opts(240)).unwrap_err();
        assert_eq!(e.state, SqlState::UndefinedObject);
        assert!(e.hint.contains("'chunks'"), "{e:?}");
    }

    #[test]
    fn options_are_checked() {
        for bad in [0, 19, 10_001, -5] {
            let e = SnippetOptions::new(bad, "<b>", "</b>").unwrap_err();
            assert_eq!(e.state, SqlState::InvalidParameterValue);
            assert!(!e.hint.is_empty());
        }
        assert!(SnippetOptions::new(240, &"x".repeat(65), "").is_err());
        assert!(SnippetOptions::new(20, "", "").is_ok());
    }

    mod props {
        use proptest::prelude::*;

        use super::super::*;
        use crate::model::Language;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(200))]
            #[test]
            fn a_snippet_is_the_text_with_marks_and_ellipses(text in "\\PC{0,400}", query in "\\PC{0,40}", max in 20i32..200) {
                for lang in [Language::English, Language::Hebrew, Language::Czech, Language::Simple] {
                    let s = snippet(&Analyzer::new(lang), &text, &query, &SnippetOptions::new(max, "\u{1}", "\u{2}").unwrap());
                    let plain: String = s.chars().filter(|&c| c != '\u{1}' && c != '\u{2}').collect();
                    let inner = plain.strip_prefix('…').unwrap_or(&plain);
                    let inner = inner.strip_suffix('…').unwrap_or(inner);
                    prop_assert!(text.contains(inner), "{:?} not in {:?}", inner, text);
                    // one over-long word may exceed the length; a window of several words never does
                    if inner.split_whitespace().count() > 1 {
                        prop_assert!(inner.chars().count() <= max as usize, "{} > {}", inner.chars().count(), max);
                    }
                }
            }
        }
    }
}
