//! Property tests of the analyser: any Unicode input, every language — no panic, the same
//! output every time, query terms among document terms, keys well formed; and big inputs
//! in linear time.

use std::collections::BTreeSet;
use std::time::Instant;

use pg_corpus_core::analysis::{analyze, document_terms, query_terms, Analyzer, KeyKind, MAX_TOKEN_CHARS};

use pg_corpus_core::bm25::{Bm25Params, MemoryIndex};
use pg_corpus_core::model::Language;
use proptest::prelude::*;

/// Characters that stress the analyser: Hebrew letters, finals, points, cantillation, geresh
/// and gershayim look-alikes, bidi controls, joiners, combining marks, emoji and their
/// modifiers, digits, Latin/Czech/German letters, Greek final sigma, Cyrillic, Arabic, CJK,
/// Devanagari, separators inside words.
const NASTY: &[char] = &[
    'א',
    'ב',
    'ה',
    'ו',
    'ל',
    'מ',
    'ש',
    'כ',
    'ך',
    'ם',
    'ן',
    'ף',
    'ץ',
    'װ',
    'ײ',
    '\u{05B0}',
    '\u{05B8}',
    '\u{05BC}',
    '\u{05C1}',
    '\u{0591}',
    '\u{05A5}',
    '\u{05BD}',
    '\u{05C7}',
    '\u{05BE}',
    '\u{05C3}',
    '\u{05C0}',
    '\u{FB2A}',
    '\u{FB4F}',
    '"',
    '\'',
    '׳',
    '״',
    '”',
    '“',
    '’',
    '‘',
    '′',
    '″',
    '`',
    '\u{200E}',
    '\u{200F}',
    '\u{202B}',
    '\u{202C}',
    '\u{2067}',
    '\u{2069}',
    '\u{200B}',
    '\u{200C}',
    '\u{200D}',
    '\u{FEFF}',
    '\u{00AD}',
    '\u{0301}',
    '\u{030C}',
    '\u{0308}',
    '\u{0327}',
    '\u{20DD}',
    '\u{034F}',
    '😀',
    '👍',
    '\u{1F3FD}',
    '👨',
    '\u{FE0F}',
    '🇨',
    '🇿',
    '0',
    '1',
    '9',
    '٣',
    '.',
    ',',
    ':',
    '_',
    '-',
    '·',
    ' ',
    '\n',
    '\t',
    'a',
    'Z',
    'ß',
    'ẞ',
    'č',
    'ř',
    'ů',
    'Ě',
    'ä',
    'Ö',
    'ı',
    'İ',
    'ſ',
    'ﬁ',
    'Σ',
    'ς',
    'ά',
    'Ж',
    'ё',
    'й',
    'ع',
    'ة',
    '\u{064E}',
    '中',
    '文',
    'カ',
    'ー',
    'क',
    '\u{093F}',
    '\u{094D}',
    '\u{0E31}',
    'ก',
    '\u{0000}',
    '\u{FFFD}',
    '\u{E000}',
    '\u{10FFFF}',
];

fn nasty_string() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(NASTY), 0..120).prop_map(|v| v.into_iter().collect())
}

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), nasty_string(), "\\PC{0,80}", "[a-zA-Zčřžýáíéůúěšňťďó' .-]{0,80}"]
}

fn languages() -> impl Strategy<Value = Language> {
    prop::sample::select(Language::all())
}

fn check_keys(lang: Language, text: &str) {
    let a = Analyzer::new(lang);
    let mut surface = 0u32;
    a.for_each_key(text, |k, w, kind| {
        let n = k.chars().count();
        assert!((1..=MAX_TOKEN_CHARS + 1).contains(&n), "{lang}: key {k:?} of {n} chars");
        assert!(!k.chars().any(|c| c.is_whitespace() || c.is_control()), "{lang}: key {k:?}");
        assert!(w > 0.0 && w <= 1.0, "weight {w}");
        if kind == KeyKind::Surface {
            surface += 1;
            assert_eq!(w, 1.0);
        }
    });
    assert_eq!(analyze(text, lang).length, surface);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn never_panics_and_keys_are_well_formed(text in any_text(), lang in languages()) {
        check_keys(lang, &text);
    }

    #[test]
    fn deterministic(text in any_text(), lang in languages()) {
        let a = analyze(&text, lang);
        let b = analyze(&text, lang);
        prop_assert_eq!(&a, &b);
        prop_assert_eq!(document_terms(&text, lang), a.terms.clone());
        // A fresh analyser with the same options agrees too.
        prop_assert_eq!(Analyzer::new(lang).analyze(&text), a);
    }

    #[test]
    fn query_terms_are_among_document_terms(text in any_text(), lang in languages()) {
        let d: BTreeSet<String> = document_terms(&text, lang).into_iter().map(|t| t.key).collect();
        for t in query_terms(&text, lang) {
            prop_assert!(d.contains(&t.key), "{:?} not in {:?}", t.key, d);
        }
    }

    /// Analysis is local to words: analysing two texts joined by a space gives the keys of
    /// both (the one exception is a Hebrew quote mark at the junction, which cannot occur
    /// after a space).
    #[test]
    fn concatenation_adds_up(x in any_text(), y in any_text(), lang in languages()) {
        let both = analyze(&format!("{x} {y}"), lang);
        let (ax, ay) = (analyze(&x, lang), analyze(&y, lang));
        prop_assert_eq!(both.length, ax.length + ay.length);
    }

    /// A document always matches itself with a positive score when it has any key.
    #[test]
    fn a_text_finds_itself(text in any_text(), lang in languages()) {
        let a = Analyzer::new(lang);
        let mut ix = MemoryIndex::new();
        let doc = a.analyze(&text);
        ix.add(&doc);
        ix.add(&a.analyze("unrelated filler words"));
        let s = ix.scores(&a.query_terms(&text), Bm25Params::default());
        prop_assert!(s.iter().all(|x| x.is_finite() && *x >= 0.0));
        if doc.terms.iter().any(|t| !["unrel", "fill", "word", "unrelated", "filler", "words"].contains(&t.key.as_str())) {
            prop_assert!(s[0] > 0.0, "{:?}", s);
        }
    }
}

type Shape = (&'static str, Box<dyn Fn(usize) -> String>, Language);

fn timed(label: &str, text: &str, lang: Language) -> f64 {
    let t = Instant::now();
    let a = analyze(text, lang);
    let secs = t.elapsed().as_secs_f64();
    println!("{label}: {} bytes, {} tokens, {} keys, {secs:.3} s", text.len(), a.length, a.terms.len());
    check_keys(lang, &text[..text.floor_char_boundary(20_000)]);
    secs
}

/// One-megabyte inputs of every awkward shape finish, and time grows linearly: 4× the input
/// takes well under 16× the time (a quadratic step would show).
#[test]
fn megabyte_inputs_in_linear_time() {
    let shapes: Vec<Shape> = vec![
        ("one giant word", Box::new(|n| "a".repeat(n)), Language::English),
        ("combining marks on one letter", Box::new(|n| format!("e{}", "\u{0301}".repeat(n / 2))), Language::Czech),
        ("niqqud and cantillation only", Box::new(|n| "\u{05B8}\u{0591}".repeat(n / 4)), Language::Hebrew),
        ("pointed Hebrew words", Box::new(|n| "וְהָאָ֗רֶץ הָיְתָ֥ה תֹ֙הוּ֙ רשב״י ע\"מ ".repeat(n / 80)), Language::Hebrew),
        ("bidi marks and emoji", Box::new(|n| "\u{200F}א😀\u{200D}👍\u{1F3FD} ".repeat(n / 20)), Language::Hebrew),
        (
            "Czech text",
            Box::new(|n| "Panu Novákovi byla schválena dovolená, žluťoučký kůň úpěl. ".repeat(n / 64)),
            Language::Czech,
        ),
        ("quotes between Hebrew letters", Box::new(|n| "ב\"ב'".repeat(n / 8)), Language::Hebrew),
        ("digits and dots", Box::new(|n| "1.".repeat(n / 2)), Language::German),
    ];
    for (label, make, lang) in shapes {
        let small = make(250_000);
        let big = make(1_000_000);
        let t_small = timed(label, &small, lang).max(1e-3);
        let t_big = timed(label, &big, lang);
        assert!(t_big < 16.0 * t_small + 0.5, "{label}: 250 KB {t_small:.3} s, 1 MB {t_big:.3} s");
    }
}
