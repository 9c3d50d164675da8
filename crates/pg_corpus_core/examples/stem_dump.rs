//! Print "word<TAB>keys" for every line of standard input (a debugging aid):
//!
//!     echo "Novákovi psa" | cargo run -p pg_corpus_core --example stem_dump -- czech

use std::io::BufRead;

use pg_corpus_core::analysis::Analyzer;

use pg_corpus_core::model::Language;

fn main() {
    let lang = Language::parse(&std::env::args().nth(1).unwrap_or_else(|| "simple".into())).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let a = Analyzer::new(lang);
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("read stdin");
        let keys: Vec<String> = a
            .document_terms(&line)
            .iter()
            .map(|t| if t.weight == 1.0 { t.key.clone() } else { format!("{}@{}", t.key, t.weight) })
            .collect();
        println!("{line}\t{}", keys.join(" "));
    }
}
