//! Reading a BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels.tsv), shared by the
//! examples.

use std::collections::HashMap;
use std::path::Path;

pub struct Doc {
    pub id: String,
    /// Title and text as indexed: "title. text", or the text alone when it already starts
    /// with the title (how the collection's e5 vectors were made, see its SOURCE.md).
    pub text: String,
}

pub struct Query {
    pub id: String,
    pub text: String,
}

#[allow(dead_code)]
pub struct Collection {
    pub name: String,
    pub docs: Vec<Doc>,
    /// Queries that have at least one judgment, in file order.
    pub queries: Vec<Query>,
    pub qrels: HashMap<String, HashMap<String, i32>>,
}

fn field(v: &serde_json::Value, name: &str) -> String {
    v.get(name).and_then(|x| x.as_str()).unwrap_or("").to_string()
}

pub fn load(dir: &Path) -> Result<Collection, String> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).map_err(|e| format!("{}: {e}", dir.join(f).display()));
    let mut docs = Vec::new();
    for line in read("corpus.jsonl")?.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
        let (title, text) = (field(&v, "title"), field(&v, "text"));
        let text = if title.is_empty() || text.starts_with(title.trim_end_matches(['.', ' '])) {
            text
        } else {
            format!("{title}. {text}")
        };
        docs.push(Doc { id: field(&v, "_id"), text });
    }
    let mut qrels: HashMap<String, HashMap<String, i32>> = HashMap::new();
    for (i, line) in read("qrels.tsv")?.lines().enumerate() {
        let cols: Vec<&str> = line.split('\t').collect();
        if i == 0 || cols.len() < 3 {
            continue;
        }
        let grade: i32 = cols[2].trim().parse().map_err(|e| format!("qrels line {}: {e}", i + 1))?;
        qrels.entry(cols[0].to_string()).or_default().insert(cols[1].to_string(), grade);
    }
    let mut queries = Vec::new();
    for line in read("queries.jsonl")?.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
        let q = Query { id: field(&v, "_id"), text: field(&v, "text") };
        if qrels.contains_key(&q.id) {
            queries.push(q);
        }
    }
    let name = dir.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(Collection { name, docs, queries, qrels })
}
