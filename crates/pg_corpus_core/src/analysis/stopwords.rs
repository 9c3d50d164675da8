//! Stop words. Only English has a list: the 33 words of Lucene's `EnglishAnalyzer` (the list
//! bm25s calls "en"), which the Cranfield measurement in docs/analysis.md uses. Other
//! languages rely on BM25's idf.

const ENGLISH: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// Is `word` (lower-cased, before stemming) a stop word of `lang`?
pub(crate) fn is_stopword(lang: super::Language, word: &str) -> bool {
    match lang {
        super::Language::English => ENGLISH.binary_search(&word).is_ok(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn list_is_sorted_for_binary_search() {
        assert!(super::ENGLISH.windows(2).all(|w| w[0] < w[1]));
    }
}
