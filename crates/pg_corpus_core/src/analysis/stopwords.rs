//! Stop words: function words that are neither indexed nor looked up, so that a question's
//! "who", "what", "kdo", "מי" never count as words of its subject.
//!
//! - English: [`Stopwords::Full`] (default), the 179 words of NLTK's English list (bm25s ships
//!   it as `STOPWORDS_EN_PLUS`), with the contracted forms ("don't", "it's") — the English
//!   stemmer sees apostrophes, so they match; [`Stopwords::Short`], the 33 words of Lucene's
//!   `EnglishAnalyzer` (bm25s' "en").
//! - Danish, Dutch, Finnish, French, German, Hungarian, Italian, Norwegian, Portuguese,
//!   Russian, Spanish, Swedish, Turkish: the Snowball project's lists (`stopwords/*.txt`).
//! - Czech and Hebrew: the lists in `stopwords/czech.txt` and `stopwords/hebrew.txt`.
//! - Arabic, Greek, Romanian, Tamil and `simple`: none; BM25's idf weighs common words down.
//!
//! A word is checked lower-cased, before stemming and before diacritics are folded (Czech
//! "být" is a stop word, "byt" is not); Hebrew final letters are folded in both the word and
//! the list. docs/analysis.md has the measurements.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::model::Language;

/// Which stop-word list English words are checked against (before stemming).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopwords {
    /// Keep every word.
    Off,
    /// Lucene's 33 English stop words.
    Short,
    /// NLTK's 179 English stop words.
    Full,
}

const ENGLISH_SHORT: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of",
    "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with",
];

const ENGLISH_FULL: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "ain",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "aren",
    "aren't",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "couldn",
    "couldn't",
    "d",
    "did",
    "didn",
    "didn't",
    "do",
    "does",
    "doesn",
    "doesn't",
    "doing",
    "don",
    "don't",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "hadn",
    "hadn't",
    "has",
    "hasn",
    "hasn't",
    "have",
    "haven",
    "haven't",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "isn",
    "isn't",
    "it",
    "it's",
    "its",
    "itself",
    "just",
    "ll",
    "m",
    "ma",
    "me",
    "mightn",
    "mightn't",
    "more",
    "most",
    "mustn",
    "mustn't",
    "my",
    "myself",
    "needn",
    "needn't",
    "no",
    "nor",
    "not",
    "now",
    "o",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "re",
    "s",
    "same",
    "shan",
    "shan't",
    "she",
    "she's",
    "should",
    "should've",
    "shouldn",
    "shouldn't",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "that'll",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "ve",
    "very",
    "was",
    "wasn",
    "wasn't",
    "we",
    "were",
    "weren",
    "weren't",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "won",
    "won't",
    "wouldn",
    "wouldn't",
    "y",
    "you",
    "you'd",
    "you'll",
    "you're",
    "you've",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// The list file of `lang`, if it has one besides English.
fn list_text(lang: Language) -> Option<&'static str> {
    Some(match lang {
        Language::Czech => include_str!("stopwords/czech.txt"),
        Language::Danish => include_str!("stopwords/danish.txt"),
        Language::Dutch => include_str!("stopwords/dutch.txt"),
        Language::Finnish => include_str!("stopwords/finnish.txt"),
        Language::French => include_str!("stopwords/french.txt"),
        Language::German => include_str!("stopwords/german.txt"),
        Language::Hebrew => include_str!("stopwords/hebrew.txt"),
        Language::Hungarian => include_str!("stopwords/hungarian.txt"),
        Language::Italian => include_str!("stopwords/italian.txt"),
        Language::Norwegian => include_str!("stopwords/norwegian.txt"),
        Language::Portuguese => include_str!("stopwords/portuguese.txt"),
        Language::Russian => include_str!("stopwords/russian.txt"),
        Language::Spanish => include_str!("stopwords/spanish.txt"),
        Language::Swedish => include_str!("stopwords/swedish.txt"),
        Language::Turkish => include_str!("stopwords/turkish.txt"),
        _ => return None,
    })
}

/// A list entry as words are compared: lower case, Hebrew final letters folded.
fn comparable(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    for c in word.chars().flat_map(char::to_lowercase) {
        match super::normalize::hebrew_letter_fold(c) {
            Some(r) => out.push_str(r),
            None => out.push(c),
        }
    }
    out
}

/// Every list file, parsed once: one word per line, `#` starts a comment line.
fn lists() -> &'static HashMap<Language, Vec<String>> {
    static LISTS: OnceLock<HashMap<Language, Vec<String>>> = OnceLock::new();
    LISTS.get_or_init(|| {
        crate::model::LANGUAGES
            .iter()
            .filter_map(|&(lang, _, _)| {
                let text = list_text(lang)?;
                let mut words: Vec<String> = text
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(comparable)
                    .collect();
                words.sort();
                words.dedup();
                Some((lang, words))
            })
            .collect()
    })
}

/// Is `word` (lower-cased, before stemming and folding; apostrophes as `'`; Hebrew final
/// letters folded) a stop word of `lang`?
pub(crate) fn is_stopword(list: Stopwords, lang: Language, word: &str) -> bool {
    match (list, lang) {
        (Stopwords::Off, _) => false,
        (Stopwords::Short, Language::English) => ENGLISH_SHORT.binary_search(&word).is_ok(),
        (Stopwords::Full, Language::English) => ENGLISH_FULL.binary_search(&word).is_ok(),
        // (a word with a final letter is folded first; most words need no copy)
        (_, Language::Hebrew) if word.chars().any(|c| super::normalize::hebrew_letter_fold(c).is_some()) => {
            let word = comparable(word);
            lists().get(&Language::Hebrew).is_some_and(|w| w.binary_search(&word).is_ok())
        }
        (_, lang) => lists().get(&lang).is_some_and(|w| w.binary_search_by(|x| x.as_str().cmp(word)).is_ok()),
    }
}

/// The stop words of `lang` (empty without a list), as words are compared.
pub fn stopwords_of(lang: Language) -> Vec<String> {
    match lang {
        Language::English => ENGLISH_FULL.iter().map(|w| w.to_string()).collect(),
        _ => lists().get(&lang).cloned().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn lists_are_sorted_for_binary_search() {
        assert!(super::ENGLISH_SHORT.windows(2).all(|w| w[0] < w[1]));
        assert!(super::ENGLISH_FULL.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(super::ENGLISH_FULL.len(), 179);
    }

    #[test]
    fn every_list_is_read_and_holds_the_question_words() {
        use crate::model::Language::*;
        for lang in [
            Czech, Danish, Dutch, Finnish, French, German, Hebrew, Hungarian, Italian, Norwegian, Portuguese, Russian,
            Spanish, Swedish, Turkish,
        ] {
            let words = super::stopwords_of(lang);
            assert!(words.len() > 50, "{lang:?}: {}", words.len());
            assert!(words.iter().all(|w| !w.is_empty() && !w.contains(char::is_whitespace) && !w.starts_with('#')));
        }
        let stop = |lang, w: &str| super::is_stopword(super::Stopwords::Full, lang, w);
        for w in ["kdo", "kde", "kdy", "co", "je", "to", "být", "že"] {
            assert!(stop(Czech, w), "{w}");
        }
        assert!(!stop(Czech, "byt") && !stop(Czech, "svoboda"));
        // Hebrew: final letters are folded before the check, in the list as in the word
        for w in ["מי", "מה", "של", "הם", "המ", "אין", "איפה"] {
            assert!(stop(Hebrew, w), "{w}");
        }
        assert!(!stop(Hebrew, "שם") && !stop(Hebrew, "חוזה"));
        for w in ["wer", "was", "der", "und", "für"] {
            assert!(stop(German, w), "{w}");
        }
        assert!(stop(Spanish, "quién") && stop(French, "qui") && stop(Russian, "кто"));
        assert!(!stop(Greek, "και") && !stop(Simple, "the"));
        assert!(!super::is_stopword(super::Stopwords::Off, Czech, "kdo"));
    }
}
