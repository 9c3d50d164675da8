//! Dump pg_corpus' lexical keys for documents and queries (offline study, bench/study).
//!
//!     keydump IN.json LANGUAGE OUT.json
//!
//! IN.json: {"docs": [text...], "queries": [text...]} (texts as loaded by scripts/load_beir.py).
//! OUT.json: {"docs": [{"len": surface length, "tf": {key: npos}}], "queries": [{key: weight}]}
//! Documents are analysed by lexical::document_tsvector itself and its tsvector text is parsed
//! back (tf = positions of a key, length = positions not labelled as extra keys); queries follow
//! lexical::query_keys (weight = analyser weight x count).
use pg_corpus_core::analysis::Language;
use pg_corpus_core::lexical::{document_tsvector, query_keys};

/// `document_tsvector`'s text (`'key':1,4 'other':2C ...`, keys quoted as by
/// `tsvector::quote_lexeme`) as (surface length, key -> number of positions).
fn parse_tsvector(text: &str) -> (usize, serde_json::Map<String, serde_json::Value>) {
    let mut tf = serde_json::Map::new();
    let mut len = 0usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\'' {
            continue; // the space between entries
        }
        let mut key = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => key.extend(chars.next()),
                '\'' if chars.peek() == Some(&'\'') => {
                    chars.next();
                    key.push('\'');
                }
                '\'' => break,
                c => key.push(c),
            }
        }
        assert_eq!(chars.next(), Some(':'), "position list expected after {key:?}");
        let mut positions = String::new();
        while let Some(c) = chars.next_if(|c| *c != ' ') {
            positions.push(c);
        }
        let list: Vec<&str> = positions.split(',').collect();
        len += list.iter().filter(|p| !p.ends_with('C')).count();
        tf.insert(key, serde_json::json!(list.len()));
    }
    (len, tf)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let input: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&args[1]).unwrap()).unwrap();
    let lang = Language::parse(&args[2]).unwrap();
    let mut docs = Vec::new();
    for t in input["docs"].as_array().unwrap() {
        let (len, tf) = parse_tsvector(&document_tsvector(t.as_str().unwrap(), lang));
        docs.push(serde_json::json!({"len": len, "tf": tf}));
    }
    let mut queries = Vec::new();
    for t in input["queries"].as_array().unwrap() {
        let m: serde_json::Map<String, serde_json::Value> =
            query_keys(t.as_str().unwrap(), lang).into_iter().map(|k| (k.key, serde_json::json!(k.weight))).collect();
        queries.push(serde_json::Value::Object(m));
    }
    std::fs::write(&args[3], serde_json::json!({"docs": docs, "queries": queries}).to_string()).unwrap();
}
