//! Text analysis: text → index terms, one code path for documents and queries.
//!
//! The pipeline (docs/analysis.md explains each choice and the measurements behind it):
//!
//! 1. **Text-wide pass**: Unicode NFKC (compatibility forms such as ligatures, full-width
//!    letters and Hebrew presentation forms become ordinary letters), invisible format
//!    characters removed (bidi marks, soft hyphen, zero-width joiners, BOM, variation
//!    selectors), zero-width space made a space, and Hebrew abbreviation marks made uniform
//!    (`"`, `״`, `”` between Hebrew letters → gershayim; `'`, `׳`, `’` after a Hebrew letter
//!    → geresh).
//! 2. **Words**: UAX #29 word boundaries (`unicode-segmentation`), keeping the segments that
//!    contain a letter or digit. Inside a word, `_ : · ‧` split it further.
//! 3. **Per word**: lower case (full Unicode mapping, final sigma → σ); Hebrew points and
//!    cantillation removed, final letters ך ם ן ף ץ → כ מ נ פ צ, geresh and gershayim removed
//!    (ע"מ = ע״מ = עמ); abbreviation dots removed (u.s.a → usa). A word is cut to
//!    [`MAX_TOKEN_CHARS`] characters; a cut word is not stemmed.
//! 4. **Language of the word**: the declared language if the word is in its script, else the
//!    usual language of the word's script (Latin → English, Cyrillic → Russian, Hebrew →
//!    Hebrew, ...) unless [`ForeignScript::Fold`]; `simple` never stems.
//! 5. **Stem and fold**: Snowball (`rust-stemmers`) on the lower-cased word, then diacritics
//!    folded (NFD, combining diacritics removed, ß → ss, ø → o, ...); English folds first
//!    (its stemmer is ASCII-only). Stop words of the word's language are dropped before
//!    stemming (`stopwords.rs`: NLTK's English list, Snowball's lists, Czech and Hebrew lists
//!    of their own); Hebrew forms without prefix letters that are stop words too. Czech folds
//!    first, uses the light stemmer of `czech.rs` and adds a half-weight prefix key
//!    (`pavla*`). Hebrew keeps the surface form and adds, at half weight, the forms without
//!    attached prefix letters.
//!
//! A [`Term`] is a key with its weight and count; the document length BM25 uses is the
//! number of *surface* tokens ([`Analysis::length`]): one per word kept, whatever extra keys
//! (Hebrew prefix-less forms, Czech prefix keys) it adds. Analysis is deterministic, never
//! panics, and runs in time linear in the input.

mod czech;
mod hebrew;
mod normalize;
mod stopwords;

use std::collections::HashMap;
use std::str::FromStr;

use rust_stemmers::{Algorithm, Stemmer};
use unicode_segmentation::UnicodeSegmentation;

use crate::error::{CoreError, SqlState};
use crate::model::{Language, LANGUAGES};

pub use stopwords::{stopwords_of, Stopwords};

/// Bumped whenever the keys produced for some text change: stored terms and statistics made
/// by another version must be rebuilt.
pub const ANALYZER_VERSION: u32 = 2;

/// Longest word, in characters after folding, that is analysed; longer words are cut to this
/// length and not stemmed.
pub const MAX_TOKEN_CHARS: usize = 64;

/// Weight of fallback keys: Czech prefix keys and Hebrew forms without prefix letters.
pub const FALLBACK_WEIGHT: f64 = 0.5;

/// Czech prefix keys end with this character, which no other key contains, so that they
/// only ever match other prefix keys.
pub const FALLBACK_MARK: char = '*';

impl Language {
    /// Parse a language name: the canonical name (PostgreSQL's text search configuration
    /// names: "simple", "english", "german", ...) or the ISO 639-1 code ("en", "de", "he",
    /// "cs", ...), case-insensitive, surrounding white space ignored. Also "iw" (old code of
    /// Hebrew), "nb" (Norwegian Bokmål), "cz".
    pub fn parse(name: &str) -> crate::error::Result<Language> {
        let n = name.trim().to_ascii_lowercase();
        let alias = match n.as_str() {
            "iw" => Some(Language::Hebrew),
            "nb" | "bokmal" => Some(Language::Norwegian),
            "cz" => Some(Language::Czech),
            _ => None,
        };
        if let Some(l) = alias {
            return Ok(l);
        }
        LANGUAGES.iter().find(|(_, full, code)| *full == n || *code == n).map(|(l, _, _)| *l).ok_or_else(|| {
            CoreError::new(
                SqlState::InvalidParameterValue,
                format!("unknown text analysis language \"{}\"", name.trim()),
                format!("Use one of: {}.", LANGUAGES.iter().map(|(_, f, _)| *f).collect::<Vec<_>>().join(", ")),
            )
        })
    }

    fn script(self) -> Option<Script> {
        Some(match self {
            Language::Simple => return None,
            Language::Arabic => Script::Arabic,
            Language::Greek => Script::Greek,
            Language::Hebrew => Script::Hebrew,
            Language::Russian => Script::Cyrillic,
            Language::Tamil => Script::Tamil,
            _ => Script::Latin,
        })
    }

    fn snowball(self) -> Option<Algorithm> {
        Some(match self {
            Language::Arabic => Algorithm::Arabic,
            Language::Danish => Algorithm::Danish,
            Language::Dutch => Algorithm::Dutch,
            Language::English => Algorithm::English,
            Language::Finnish => Algorithm::Finnish,
            Language::French => Algorithm::French,
            Language::German => Algorithm::German,
            Language::Greek => Algorithm::Greek,
            Language::Hungarian => Algorithm::Hungarian,
            Language::Italian => Algorithm::Italian,
            Language::Norwegian => Algorithm::Norwegian,
            Language::Portuguese => Algorithm::Portuguese,
            Language::Romanian => Algorithm::Romanian,
            Language::Russian => Algorithm::Russian,
            Language::Spanish => Algorithm::Spanish,
            Language::Swedish => Algorithm::Swedish,
            Language::Tamil => Algorithm::Tamil,
            Language::Turkish => Algorithm::Turkish,
            Language::Simple | Language::Czech | Language::Hebrew => return None,
        })
    }
}

impl FromStr for Language {
    type Err = CoreError;
    fn from_str(s: &str) -> crate::error::Result<Language> {
        Language::parse(s)
    }
}

/// The script of a word, from its first letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Script {
    Latin,
    Greek,
    Cyrillic,
    Hebrew,
    Arabic,
    Tamil,
    Other,
}

fn script_of(c: char) -> Script {
    match c {
        'a'..='z'
        | 'A'..='Z'
        | '\u{00C0}'..='\u{024F}'
        | '\u{1E00}'..='\u{1EFF}'
        | '\u{2C60}'..='\u{2C7F}'
        | '\u{A720}'..='\u{A7FF}'
        | '\u{AB30}'..='\u{AB6F}' => Script::Latin,
        '\u{0370}'..='\u{03FF}' | '\u{1F00}'..='\u{1FFF}' => Script::Greek,
        '\u{0400}'..='\u{052F}' | '\u{1C80}'..='\u{1C8F}' | '\u{2DE0}'..='\u{2DFF}' | '\u{A640}'..='\u{A69F}' => {
            Script::Cyrillic
        }
        '\u{0590}'..='\u{05FF}' | '\u{FB1D}'..='\u{FB4F}' => Script::Hebrew,
        '\u{0600}'..='\u{06FF}'
        | '\u{0750}'..='\u{077F}'
        | '\u{08A0}'..='\u{08FF}'
        | '\u{FB50}'..='\u{FDFF}'
        | '\u{FE70}'..='\u{FEFF}' => Script::Arabic,
        '\u{0B80}'..='\u{0BFF}' => Script::Tamil,
        _ => Script::Other,
    }
}

fn default_language(script: Script) -> Language {
    match script {
        Script::Latin => Language::English,
        Script::Greek => Language::Greek,
        Script::Cyrillic => Language::Russian,
        Script::Hebrew => Language::Hebrew,
        Script::Arabic => Language::Arabic,
        Script::Tamil => Language::Tamil,
        Script::Other => Language::Simple,
    }
}

/// How words in another script than the declared language's are analysed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForeignScript {
    /// With the usual language of their script: Latin → English, Cyrillic → Russian,
    /// Greek → Greek, Hebrew → Hebrew, Arabic → Arabic, Tamil → Tamil, others → simple.
    Native,
    /// Folded only (as `simple`).
    Fold,
}

/// Czech prefix (fallback) keys: the first `len` characters of a stem longer than `len`,
/// followed by [`FALLBACK_MARK`], with weight `weight`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrefixKeys {
    pub len: usize,
    pub weight: f64,
}

/// Analyser settings. [`Options::for_language`] gives the defaults every SQL function uses;
/// the other settings exist to measure alternatives (examples/lexical_eval.rs).
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Fold diacritics (háčky, čárky, umlauts, ß → ss, ...). Default true.
    pub fold_diacritics: bool,
    /// Stem (Snowball, the Czech light stemmer). Default true; `simple` never stems.
    pub stem: bool,
    /// Stop words removed (every language with a list). Default [`Stopwords::Full`].
    pub stopwords: Stopwords,
    /// Add Hebrew forms without attached prefix letters. Default true (not for `simple`).
    pub hebrew_prefixes: bool,
    /// Fewest letters a Hebrew form without prefix must keep. Default 2.
    pub hebrew_prefix_min_rest: usize,
    /// Weight of the Hebrew forms without prefix. Default [`FALLBACK_WEIGHT`].
    pub hebrew_prefix_weight: f64,
    /// Add the Hebrew form without plural / feminine ending (experimental). Default false.
    pub hebrew_suffixes: bool,
    /// Shortest stem the Czech stemmer leaves. Default 2.
    pub czech_min_stem: usize,
    /// Czech prefix keys. Default `len` 5, weight [`FALLBACK_WEIGHT`].
    pub prefix_keys: Option<PrefixKeys>,
    /// Words in a foreign script. Default [`ForeignScript::Native`].
    pub foreign_script: ForeignScript,
}

impl Options {
    /// The defaults of `lang` (what [`document_terms`] and [`query_terms`] use).
    pub fn for_language(lang: Language) -> Options {
        let simple = lang == Language::Simple;
        Options {
            fold_diacritics: true,
            stem: !simple,
            stopwords: if simple { Stopwords::Off } else { Stopwords::Full },
            hebrew_prefixes: !simple,
            hebrew_prefix_min_rest: 2,
            hebrew_prefix_weight: FALLBACK_WEIGHT,
            hebrew_suffixes: false,
            czech_min_stem: 2,
            prefix_keys: if simple { None } else { Some(PrefixKeys { len: 5, weight: FALLBACK_WEIGHT }) },
            foreign_script: ForeignScript::Native,
        }
    }
}

/// One index or query term.
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    /// The key: what is stored in the index and looked up.
    pub key: String,
    /// The weight the key enters a BM25 score with (see [`crate::bm25`]): 1.0 for a word's
    /// own key, [`FALLBACK_WEIGHT`] for fallback keys (Czech prefix keys, Hebrew forms
    /// without prefix letters). When a text yields the same key in both roles, the mean over
    /// its occurrences, so that `weight × count` is always the sum of the occurrences' weights.
    pub weight: f64,
    /// How many times the text yields the key.
    pub count: u32,
}

/// The analysis of one text.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Analysis {
    /// Distinct keys, sorted by key.
    pub terms: Vec<Term>,
    /// Document length for BM25: the number of surface tokens (one per word kept; stop words
    /// not counted; extra keys not counted).
    pub length: u32,
}

/// Where one emitted key comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// The word's own key (counts towards the document length).
    Surface,
    /// An extra key of the same word (Hebrew form without prefix, Czech prefix key).
    Extra,
}

/// An analyser: a language and its options. Cheap to create.
#[derive(Debug, Clone)]
pub struct Analyzer {
    lang: Language,
    opts: Options,
}

impl Analyzer {
    pub fn new(lang: Language) -> Analyzer {
        Analyzer { lang, opts: Options::for_language(lang) }
    }

    pub fn with_options(lang: Language, opts: Options) -> Analyzer {
        Analyzer { lang, opts }
    }

    pub fn language(&self) -> Language {
        self.lang
    }

    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// Call `sink(key, weight, kind)` for every key of `text`, in text order.
    pub fn for_each_key(&self, text: &str, mut sink: impl FnMut(&str, f64, KeyKind)) {
        let prepared = normalize::prepare(text);
        for word in prepared.unicode_words() {
            self.word(word, &mut sink);
        }
    }

    /// Terms and length of `text`.
    pub fn analyze(&self, text: &str) -> Analysis {
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut terms: Vec<Term> = Vec::new();
        let mut length: u32 = 0;
        self.for_each_key(text, |key, weight, kind| {
            if kind == KeyKind::Surface {
                length = length.saturating_add(1);
            }
            match index.get(key) {
                Some(&i) => {
                    let t = &mut terms[i];
                    t.count = t.count.saturating_add(1);
                    // Running sum of the weights; divided by the count below.
                    t.weight += weight;
                }
                None => {
                    index.insert(key.to_string(), terms.len());
                    terms.push(Term { key: key.to_string(), weight, count: 1 });
                }
            }
        });
        for t in &mut terms {
            t.weight /= t.count as f64;
        }
        terms.sort_by(|a, b| a.key.cmp(&b.key));
        Analysis { terms, length }
    }

    /// The terms to index for a document.
    pub fn document_terms(&self, text: &str) -> Vec<Term> {
        self.analyze(text).terms
    }

    /// The terms to look up for a query: the same keys, counts and weights as
    /// [`Analyzer::document_terms`] of the same text (one code path), so the query terms of
    /// a text are always among its document terms.
    pub fn query_terms(&self, text: &str) -> Vec<Term> {
        self.analyze(text).terms
    }

    /// The surface keys of `text` in order (one per word kept): what BM25 counts as the
    /// document length.
    pub fn surface_tokens(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.for_each_key(text, |k, _, kind| {
            if kind == KeyKind::Surface {
                out.push(k.to_string())
            }
        });
        out
    }

    fn effective_language(&self, script: Script) -> Language {
        if self.lang == Language::Simple {
            return Language::Simple;
        }
        if self.lang.script() == Some(script) {
            return self.lang;
        }
        match self.opts.foreign_script {
            ForeignScript::Fold => Language::Simple,
            ForeignScript::Native => default_language(script),
        }
    }
}

/// Every key goes out through here: cut to [`MAX_TOKEN_CHARS`] characters (folding and
/// stemming can lengthen a word: ß → ss), fallback mark kept.
fn emit(sink: &mut impl FnMut(&str, f64, KeyKind), key: &str, weight: f64, kind: KeyKind) {
    if key.is_empty() {
        return;
    }
    let body = key.strip_suffix(FALLBACK_MARK).unwrap_or(key);
    match body.char_indices().nth(MAX_TOKEN_CHARS) {
        None => sink(key, weight, kind),
        Some((cut, _)) => {
            let mut k = body[..cut].to_string();
            if body.len() != key.len() {
                k.push(FALLBACK_MARK);
            }
            sink(&k, weight, kind)
        }
    }
}

impl Analyzer {
    /// One UAX #29 word: lower-case, Hebrew fold, split at inner separators, cap length.
    fn word(&self, word: &str, sink: &mut impl FnMut(&str, f64, KeyKind)) {
        let mut piece = String::new();
        let mut chars = 0usize;
        let mut cut = false;
        for c in word.chars() {
            for lc in c.to_lowercase() {
                if normalize::is_hebrew_mark(lc) {
                    continue;
                }
                let keep = lc.is_alphanumeric()
                    || unicode_normalization::char::is_combining_mark(lc)
                    || normalize::is_apostrophe(lc)
                    || lc == '.'
                    || lc == ','
                    || lc == '\u{FF0E}';
                if !keep {
                    // `_`, `:`, `·`, `‧` and anything else UAX #29 keeps inside a word.
                    self.piece(&piece, cut, sink);
                    piece.clear();
                    chars = 0;
                    cut = false;
                    continue;
                }
                if chars >= MAX_TOKEN_CHARS {
                    cut = true;
                    continue;
                }
                let lc = if lc == 'ς' { 'σ' } else { lc };
                match normalize::hebrew_letter_fold(lc) {
                    Some(s) => piece.push_str(s),
                    None => piece.push(lc),
                }
                chars += 1;
            }
        }
        self.piece(&piece, cut, sink);
    }

    /// One piece of a word (lower-cased, Hebrew-folded, at most MAX_TOKEN_CHARS + 1 chars).
    fn piece(&self, piece: &str, cut: bool, sink: &mut impl FnMut(&str, f64, KeyKind)) {
        let piece = piece.trim_matches(|c: char| !c.is_alphanumeric());
        if piece.is_empty() {
            return;
        }
        if piece.chars().any(|c| c.is_numeric()) {
            // Numbers and codes (1.5, 3,000, b737, e5): kept whole, never stemmed.
            let key: String = piece.chars().filter(|&c| !normalize::is_apostrophe(c)).collect();
            let key = self.fold(&key);
            if !key.is_empty() {
                emit(sink, &key, 1.0, KeyKind::Surface);
            }
            return;
        }
        let script = piece.chars().find(|c| c.is_alphabetic()).map_or(Script::Other, script_of);
        let lang = self.effective_language(script);
        let has_apostrophe = piece.chars().any(normalize::is_apostrophe);
        if has_apostrophe && script == Script::Latin && lang != Language::English {
            // Elision (l'homme, dell'arte): the parts are words of their own.
            for part in piece.split(normalize::is_apostrophe) {
                self.letters(part, lang, cut, sink);
            }
            return;
        }
        if lang == Language::English {
            // The English stemmer handles the possessive 's itself.
            let p: String = piece
                .chars()
                .filter(|&c| c != '.' && c != '\u{FF0E}')
                .map(|c| if normalize::is_apostrophe(c) { '\'' } else { c })
                .collect();
            self.letters(&p, lang, cut, sink);
        } else {
            let p: String =
                piece.chars().filter(|&c| !normalize::is_apostrophe(c) && c != '.' && c != '\u{FF0E}').collect();
            self.letters(&p, lang, cut, sink);
        }
    }

    fn fold(&self, s: &str) -> String {
        if self.opts.fold_diacritics {
            normalize::fold_diacritics(s)
        } else {
            s.to_string()
        }
    }

    /// A word of letters (apostrophes only for English), analysed as `lang`.
    fn letters(&self, w: &str, lang: Language, cut: bool, sink: &mut impl FnMut(&str, f64, KeyKind)) {
        let w = w.trim_matches(|c: char| !c.is_alphanumeric());
        if w.is_empty() {
            return;
        }
        if stopwords::is_stopword(self.opts.stopwords, lang, w) {
            return;
        }
        let strip_apostrophes = |s: &str| -> String { s.chars().filter(|&c| c != '\'').collect() };
        if cut || lang == Language::Simple || !self.opts.stem && lang != Language::Hebrew {
            let key = self.fold(&strip_apostrophes(w));
            if !key.is_empty() {
                emit(sink, &key, 1.0, KeyKind::Surface);
            }
            return;
        }
        match lang {
            Language::Hebrew => {
                let key = self.fold(w);
                if key.is_empty() {
                    return;
                }
                emit(sink, &key, 1.0, KeyKind::Surface);
                if self.opts.hebrew_prefixes {
                    let mut variants = hebrew::prefix_variants(&key, self.opts.hebrew_prefix_min_rest);
                    if self.opts.hebrew_suffixes {
                        let mut more = Vec::new();
                        for v in std::iter::once(&key).chain(variants.iter()) {
                            if let Some(s) = hebrew::suffix_variant(v, self.opts.hebrew_prefix_min_rest) {
                                if s != key && !variants.contains(&s) && !more.contains(&s) {
                                    more.push(s);
                                }
                            }
                        }
                        variants.extend(more);
                    }
                    // a function word behind prefix letters (ושל, שהוא) adds no form of its own
                    for v in variants.into_iter().filter(|v| !stopwords::is_stopword(self.opts.stopwords, lang, v)) {
                        emit(sink, &v, self.opts.hebrew_prefix_weight, KeyKind::Extra);
                    }
                }
            }
            Language::Czech => {
                let folded = normalize::fold_diacritics(w);
                let stem = czech::stem(&folded, self.opts.czech_min_stem);
                if stem.is_empty() {
                    return;
                }
                emit(sink, &stem, 1.0, KeyKind::Surface);
                if let Some(pk) = self.opts.prefix_keys {
                    if pk.len > 0 && stem.chars().count() > pk.len {
                        let mut key: String = stem.chars().take(pk.len).collect();
                        key.push(FALLBACK_MARK);
                        emit(sink, &key, pk.weight, KeyKind::Extra);
                    }
                }
            }
            _ => {
                let Some(alg) = lang.snowball() else {
                    let key = self.fold(w);
                    emit(sink, &key, 1.0, KeyKind::Surface);
                    return;
                };
                let stemmer = Stemmer::create(alg);
                let key = if lang == Language::English {
                    let folded = self.fold(w);
                    strip_apostrophes(&stemmer.stem(&folded))
                } else {
                    self.fold(&stemmer.stem(w))
                };
                if !key.is_empty() {
                    emit(sink, &key, 1.0, KeyKind::Surface);
                }
            }
        }
    }
}

/// Analysis of `text` with the defaults of `lang`.
pub fn analyze(text: &str, lang: Language) -> Analysis {
    Analyzer::new(lang).analyze(text)
}

/// The terms to index for a document written in `lang`.
pub fn document_terms(text: &str, lang: Language) -> Vec<Term> {
    Analyzer::new(lang).document_terms(text)
}

/// The terms to look up for a query against documents analysed as `lang`.
pub fn query_terms(text: &str, lang: Language) -> Vec<Term> {
    Analyzer::new(lang).query_terms(text)
}

/// The BM25 document length of `text` (see [`Analysis::length`]).
pub fn document_length(text: &str, lang: Language) -> u32 {
    Analyzer::new(lang).analyze(text).length
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str, lang: Language) -> Vec<String> {
        let mut v = Vec::new();
        Analyzer::new(lang).for_each_key(text, |k, _, _| v.push(k.to_string()));
        v
    }

    #[test]
    fn parse_languages() {
        assert_eq!(Language::parse(" English ").unwrap(), Language::English);
        assert_eq!(Language::parse("he").unwrap(), Language::Hebrew);
        assert_eq!(Language::parse("cs").unwrap(), Language::Czech);
        assert_eq!(Language::parse("de").unwrap(), Language::German);
        assert_eq!(Language::parse("simple").unwrap(), Language::Simple);
        let e = Language::parse("klingon").unwrap_err();
        assert_eq!(e.state, SqlState::InvalidParameterValue);
        for l in Language::all() {
            assert_eq!(Language::parse(l.name()).unwrap(), l);
        }
    }

    #[test]
    fn english_stems_and_drops_stopwords() {
        assert_eq!(keys("The students' Running of the tests", Language::English), ["student", "run", "test"]);
        assert_eq!(keys("U.S.A. O'Brien's don't", Language::English), ["usa", "obrien"]);
    }

    #[test]
    fn german_folds_after_stemming() {
        assert_eq!(keys("Straße Strasse", Language::German), ["strass", "strass"]);
        assert_eq!(keys("Häuser Hauser", Language::German), keys("Hauser Hauser", Language::German));
    }

    #[test]
    fn hebrew_normalisation() {
        let a = keys("רשב\"י", Language::Hebrew);
        assert_eq!(a, keys("רשב״י", Language::Hebrew));
        assert_eq!(a, keys("רשבי", Language::Hebrew));
        assert_eq!(keys("שָׁלוֹם", Language::Simple), ["שלומ"]);
        assert_eq!(keys("ע\"מ", Language::Simple), ["עמ"]);
    }

    #[test]
    fn length_counts_surface_tokens() {
        let a = analyze("העוגיות בעוגיות", Language::Hebrew);
        assert_eq!(a.length, 2);
        let t = a.terms.iter().find(|t| t.key == "עוגיות").unwrap();
        assert_eq!(t.count, 2);
    }

    #[test]
    fn long_words_are_cut() {
        let w = "a".repeat(10_000);
        let k = keys(&w, Language::English);
        assert_eq!(k.len(), 1);
        assert_eq!(k[0].chars().count(), MAX_TOKEN_CHARS);
    }
}
