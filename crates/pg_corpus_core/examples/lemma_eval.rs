//! Conflation of (form, lemma) pairs by the analyser, for tuning (the tests assert floors on
//! the committed samples):
//!
//!     cargo run -p pg_corpus_core --release --example lemma_eval -- PAIRS.tsv LANGUAGE \
//!         [czech_min_stem=N] [prefix_len=N|prefix=off]
//!
//! PAIRS.tsv: "form<TAB>lemma" per line (tests/fixtures/*_lemmas.tsv, or a whole table made
//! like them). Stop words are off: this measures stemming, not stopping.

#[path = "../tests/common/lemma.rs"]
mod lemma;

use pg_corpus_core::analysis::{Analyzer, Options, PrefixKeys, Stopwords};

use pg_corpus_core::model::Language;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: lemma_eval PAIRS.tsv LANGUAGE [czech_min_stem=N] [prefix_len=N|prefix=off]");
        std::process::exit(2);
    }
    let text = std::fs::read_to_string(&args[1]).expect("read pairs");
    let lang = Language::parse(&args[2]).expect("language");
    let mut o = Options::for_language(lang);
    o.stopwords = Stopwords::Off;
    for a in &args[3..] {
        match a.split_once('=') {
            Some(("czech_min_stem", v)) => o.czech_min_stem = v.parse().expect("number"),
            Some(("prefix_len", v)) => {
                o.prefix_keys = Some(PrefixKeys { len: v.parse().expect("number"), weight: 0.5 })
            }
            Some(("prefix", "off")) => o.prefix_keys = None,
            Some(("stem", "off")) => o.stem = false,
            _ => panic!("unknown option {a}"),
        }
    }
    let pairs = lemma::read_pairs(&text);
    let a = Analyzer::with_options(lang, o);
    let print = |name: &str, pairs: &[(String, String)]| {
        let c = lemma::conflation(&a, pairs);
        println!(
            "{name}: pairs {} lemmas {} | meet {:.4} meet_any {:.4} | random collisions {:.6} any {:.6} | neighbour collisions {:.4} any {:.4}",
            c.pairs, c.lemmas, c.meet, c.meet_any, c.random_collisions, c.random_collisions_any,
            c.neighbour_collisions, c.neighbour_collisions_any
        );
    };
    print("all", &pairs);
    if lang == Language::Czech {
        // Nouns, adjectives, names: lemmas that are not verb infinitives (-t, -ci).
        let nominal: Vec<(String, String)> =
            pairs.iter().filter(|(_, l)| !l.ends_with('t') && !l.ends_with("ci")).cloned().collect();
        print("non-verbs", &nominal);
    }
}
