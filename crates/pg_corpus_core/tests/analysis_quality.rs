//! The analyser on real words, with floors: measured values (docs/analysis.md) minus a
//! margin. Fixtures: tests/fixtures (see derive_fixtures.py there for their provenance).
//! `cargo test -p pg_corpus_core --test analysis_quality -- --nocapture` prints the values.

mod common;

use std::collections::{BTreeSet, HashSet};

use common::lemma::{conflation, keys, read_pairs, Conflation};
use pg_corpus_core::analysis::{Analyzer, Options, Stopwords};
use pg_corpus_core::model::Language;

fn analyzer(lang: Language) -> Analyzer {
    let mut o = Options::for_language(lang);
    o.stopwords = Stopwords::Off; // measure stemming, not stopping
    Analyzer::with_options(lang, o)
}

fn measure(name: &str, lang: Language, pairs: &[(String, String)]) -> Conflation {
    let c = conflation(&analyzer(lang), pairs);
    println!(
        "{name}: {} pairs, {} lemmas: meet {:.4}, meet incl. fallback {:.4}; random collisions {:.6} \
         (incl. fallback {:.6}); neighbour collisions {:.4} (incl. fallback {:.4})",
        c.pairs,
        c.lemmas,
        c.meet,
        c.meet_any,
        c.random_collisions,
        c.random_collisions_any,
        c.neighbour_collisions,
        c.neighbour_collisions_any
    );
    c
}

fn check(c: &Conflation, meet: f64, meet_any: f64, random: f64, random_any: f64, neighbour: f64, neighbour_any: f64) {
    assert!(c.meet >= meet, "meet {} < floor {meet}", c.meet);
    assert!(c.meet_any >= meet_any, "meet incl. fallback {} < floor {meet_any}", c.meet_any);
    assert!(c.random_collisions <= random, "random collisions {} > ceiling {random}", c.random_collisions);
    assert!(
        c.random_collisions_any <= random_any,
        "random collisions incl. fallback {} > ceiling {random_any}",
        c.random_collisions_any
    );
    assert!(c.neighbour_collisions <= neighbour, "neighbour collisions {} > {neighbour}", c.neighbour_collisions);
    assert!(
        c.neighbour_collisions_any <= neighbour_any,
        "neighbour collisions incl. fallback {} > {neighbour_any}",
        c.neighbour_collisions_any
    );
}

#[test]
fn czech_lemmas() {
    let pairs = read_pairs(include_str!("fixtures/cs_lemmas.tsv"));
    assert_eq!(pairs.len(), 3000);
    let all = measure("czech, all", Language::Czech, &pairs);
    check(&all, 0.63, 0.76, 0.00005, 0.0002, 0.04, 0.13);
    // Nouns, adjectives, names (lemma not a verb infinitive): what a light stemmer is for.
    let nominal: Vec<(String, String)> =
        pairs.iter().filter(|(_, l)| !l.ends_with('t') && !l.ends_with("ci")).cloned().collect();
    let nom = measure("czech, non-verbs", Language::Czech, &nominal);
    check(&nom, 0.90, 0.91, 0.00007, 0.0002, 0.045, 0.11);
    // Without stemming almost nothing meets: the floors above are the stemmer's doing.
    let simple = measure("czech as simple", Language::Simple, &pairs);
    assert!(simple.meet < 0.01);
}

#[test]
fn german_lemmas() {
    let pairs = read_pairs(include_str!("fixtures/de_lemmas.tsv"));
    let c = measure("german", Language::German, &pairs);
    check(&c, 0.73, 0.73, 0.00004, 0.00004, 0.045, 0.045);
    // Umlaut and ß spelled out or folded meet the same key.
    let a = analyzer(Language::German);
    assert_eq!(keys(&a, "Straße").0, keys(&a, "STRASSE").0);
    assert_eq!(keys(&a, "Häuser").0, keys(&a, "Hauser").0);
}

#[test]
fn english_lemmas() {
    let pairs = read_pairs(include_str!("fixtures/en_lemmas.tsv"));
    let c = measure("english", Language::English, &pairs);
    check(&c, 0.88, 0.88, 0.00003, 0.00003, 0.035, 0.035);
}

/// Verses of Genesis with full niqqud and cantillation give exactly the keys of the same
/// verses stripped by an independent implementation (python-hebrew's raw_text).
#[test]
fn hebrew_niqqud_and_cantillation() {
    let text = include_str!("fixtures/he_niqqud.tsv");
    let mut verses = 0;
    for lang in [Language::Hebrew, Language::Simple] {
        let a = Analyzer::new(lang);
        for line in text.lines() {
            let (pointed, plain) = line.split_once('\t').expect("two columns");
            assert_eq!(a.surface_tokens(pointed), a.surface_tokens(plain), "{lang}: {pointed}");
            assert_eq!(a.document_terms(pointed), a.document_terms(plain));
            verses += 1;
        }
    }
    assert_eq!(verses, 240);
}

/// HeQ words: pairs (prefix letters + word, word) both found in HeQ meet; unrelated words
/// rarely do.
#[test]
fn hebrew_prefixes_on_heq_words() {
    let words: Vec<&str> = include_str!("fixtures/he_heq_words.txt").lines().collect();
    assert_eq!(words.len(), 4000);
    let set: HashSet<&str> = words.iter().copied().collect();
    // Candidate pairs found without the analyser's grammar: 1-3 leading letters of ו ה ב כ ל
    // מ ש, the rest (at least 2 letters) also a HeQ word. With one letter they are nearly
    // always true prefix relations (הבית / בית); with two or three letters many are not
    // (המשפט is ה + משפט, not המ + שפט), and the grammar rejects those.
    let prefix_letters = ['ו', 'ה', 'ב', 'כ', 'ל', 'מ', 'ש'];
    let mut one: Vec<(&str, &str)> = Vec::new();
    let mut more: Vec<(&str, &str)> = Vec::new();
    for w in &words {
        let chars: Vec<(usize, char)> = w.char_indices().collect();
        for k in 1..=3.min(chars.len().saturating_sub(2)) {
            if !chars[..k].iter().all(|(_, c)| prefix_letters.contains(c)) {
                break;
            }
            let rest = &w[chars[k].0..];
            if let Some(r) = set.get(rest) {
                if k == 1 {
                    one.push((w, r))
                } else {
                    more.push((w, r))
                }
            }
        }
    }
    let he = Analyzer::new(Language::Hebrew);
    let simple = Analyzer::new(Language::Simple);
    let all_keys =
        |a: &Analyzer, w: &str| -> BTreeSet<String> { a.document_terms(w).into_iter().map(|t| t.key).collect() };
    // stop words (של, הוא, ...) have no keys at all, by design: pairs whose word without its
    // prefix is one are no evidence about prefix handling
    let content = |w: &str| !all_keys(&he, w).is_empty();
    one.retain(|(w, r)| content(w) && content(r));
    more.retain(|(w, r)| content(w) && content(r));
    let share = |a: &Analyzer, pairs: &[(&str, &str)]| {
        let meets = pairs.iter().filter(|(x, y)| all_keys(a, x).intersection(&all_keys(a, y)).next().is_some()).count();
        meets as f64 / pairs.len().max(1) as f64
    };
    let meet_one = share(&he, &one);
    let meet_more = share(&he, &more);
    let meet_simple = share(&simple, &one);
    // Unrelated words: every pair of distinct words of the list (exact count through the key
    // index), excluding the candidate pairs above.
    let related: HashSet<(&str, &str)> = one.iter().chain(&more).flat_map(|&(a, b)| [(a, b), (b, a)]).collect();
    let keys_of: Vec<BTreeSet<String>> = words.iter().map(|w| all_keys(&he, w)).collect();
    let mut by_key: std::collections::HashMap<&str, Vec<usize>> = std::collections::HashMap::new();
    for (i, ks) in keys_of.iter().enumerate() {
        for k in ks {
            by_key.entry(k.as_str()).or_default().push(i);
        }
    }
    let mut colliding: HashSet<(usize, usize)> = HashSet::new();
    for ids in by_key.values() {
        for (x, &i) in ids.iter().enumerate() {
            for &j in &ids[x + 1..] {
                if !related.contains(&(words[i], words[j])) {
                    colliding.insert((i.min(j), i.max(j)));
                }
            }
        }
    }
    let n = words.len();
    let total_pairs = n * (n - 1) / 2 - related.len() / 2;
    let collisions = colliding.len() as f64 / total_pairs as f64;
    // Words that meet at least one other word of the list that is not a candidate pair of
    // theirs: siblings (לבית / בבית, both with בית) count here, so this bounds the harm from
    // above.
    let mut touched: HashSet<usize> = HashSet::new();
    for &(i, j) in &colliding {
        touched.insert(i);
        touched.insert(j);
    }
    let words_touched = touched.len() as f64 / n as f64;
    println!(
        "hebrew HeQ words: {} one-letter prefix pairs, meet {meet_one:.4} (simple {meet_simple:.4}); \
         {} two/three-letter candidate pairs, meet {meet_more:.4}; unrelated pairs colliding \
         {collisions:.6}; words meeting some non-candidate word {words_touched:.4}",
        one.len(),
        more.len()
    );
    assert!(one.len() > 900, "{} one-letter pairs of content words", one.len());
    assert!(meet_one >= 0.99, "meet {meet_one}");
    assert!(meet_simple < 0.01);
    assert!(collisions <= 0.0003, "collisions {collisions}");
    assert!(words_touched <= 0.25, "words meeting a non-candidate word {words_touched}");
}

/// Spellings of the same abbreviation and the same word meet; the forms of the issue meet.
#[test]
fn hebrew_spelling_variants() {
    let a = Analyzer::new(Language::Hebrew);
    let k = |s: &str| a.surface_tokens(s);
    for v in ["רשב\"י", "רשב״י", "רשב”י", "רשבי", "רַשְׁבִּ\"י"] {
        assert_eq!(k(v), k("רשב״י"), "{v}");
    }
    for v in ["ע\"מ", "ע״מ", "ע”מ", "עמ"] {
        assert_eq!(k(v), k("ע״מ"), "{v}");
    }
    assert_eq!(k("ר' שמעון"), k("ר׳ שמעון"));
    // Final letters: the same key wherever the letter stands.
    assert_eq!(k("מלך"), k("מלכ"));
    assert_eq!(k("שלום"), k("שלומ"));
    // Attached prefixes.
    let terms = |s: &str| -> BTreeSet<String> { a.document_terms(s).into_iter().map(|t| t.key).collect() };
    for (x, y) in [("העוגיות", "בעוגיות"), ("וכשהילד", "ילד"), ("לבית", "הבית"), ("שבמערה", "במערה")]
    {
        assert!(terms(x).intersection(&terms(y)).next().is_some(), "{x} / {y}");
    }
}

/// Latin words inside Hebrew text are folded and English-stemmed; Hebrew words inside English
/// text get the Hebrew treatment.
#[test]
fn foreign_script_words() {
    let he = Analyzer::new(Language::Hebrew);
    let t = he.surface_tokens("לפי סעיף Contracts ו-Courts");
    assert!(t.contains(&"contract".to_string()), "{t:?}");
    assert!(t.contains(&"court".to_string()), "{t:?}");
    let en = Analyzer::new(Language::English);
    assert_eq!(en.surface_tokens("the שָׁלוֹם court"), vec!["שלומ", "court"]);
}
