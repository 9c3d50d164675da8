//! Dump pg_corpus' lexical keys for documents and queries (offline study, bench/study).
//!
//!     keydump IN.json LANGUAGE OUT.json
//!
//! IN.json: {"docs": [text...], "queries": [text...]} (texts as loaded by scripts/load_beir.py).
//! OUT.json: {"docs": [{"len": surface length, "tf": {key: npos}}], "queries": [{key: weight}]}
//! Documents follow lexical::document_tsvector exactly (one position per surface word, extra
//! keys at the same position, at most one entry per position, at most 255 positions per key);
//! queries follow lexical::query_keys (weight = analyser weight x count).
use std::collections::BTreeMap;

use pg_corpus_core::analysis::{Analyzer, KeyKind, Language};
use pg_corpus_core::lexical::query_keys;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let input: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&args[1]).unwrap()).unwrap();
    let lang = Language::parse(&args[2]).unwrap();
    let a = Analyzer::new(lang);
    let mut docs = Vec::new();
    for t in input["docs"].as_array().unwrap() {
        let text = t.as_str().unwrap();
        let mut keys: BTreeMap<String, Vec<(u32, bool)>> = BTreeMap::new();
        let mut position = 0u32;
        a.for_each_key(text, |key, _w, kind| {
            if kind == KeyKind::Surface {
                position = (position + 1).min(16383);
            }
            let pos = position.max(1);
            match keys.get_mut(key) {
                Some(list) => {
                    if list.len() < 255 && list.last().is_none_or(|(p, _)| *p < pos) {
                        list.push((pos, kind == KeyKind::Extra));
                    }
                }
                None => {
                    keys.insert(key.to_string(), vec![(pos, kind == KeyKind::Extra)]);
                }
            }
        });
        // tsvector surface_length: the stored positions not labelled as extra
        let len: usize = keys.values().map(|v| v.iter().filter(|(_, e)| !*e).count()).sum();
        let tf: serde_json::Map<String, serde_json::Value> =
            keys.into_iter().map(|(k, v)| (k, serde_json::json!(v.len()))).collect();
        docs.push(serde_json::json!({"len": len, "tf": tf}));
    }
    let mut queries = Vec::new();
    for t in input["queries"].as_array().unwrap() {
        let m: serde_json::Map<String, serde_json::Value> = query_keys(t.as_str().unwrap(), lang)
            .into_iter()
            .map(|k| (k.key, serde_json::json!(k.weight)))
            .collect();
        queries.push(serde_json::Value::Object(m));
    }
    std::fs::write(&args[3], serde_json::json!({"docs": docs, "queries": queries}).to_string()).unwrap();
}
