//! Fixtures shared by the core's unit tests: the legal test schema's corpus as the catalog
//! describes it, and resolved.

use serde_json::{json, Value};

use crate::definition::resolve;
use crate::model::Corpus;

pub fn col(ty: &str, typname: &str, cat: &str, typmod: i32) -> Value {
    json!({"type": ty, "typname": typname, "category": cat, "typmod": typmod, "not_null": false})
}

/// The legal test schema's external_precedents corpus, as the catalog would describe it.
pub fn legal_def() -> Value {
    let case_law = json!({"oid": 100, "schema": "public", "name": "case_law", "kind": "r", "columns": {
        "id": col("bigint", "int8", "N", -1),
        "case_number": col("text", "text", "S", -1),
        "case_name": col("text", "text", "S", -1),
        "court": col("text", "text", "S", -1),
        "source_kind": col("text", "text", "S", -1),
        "practice_area": col("text", "text", "S", -1),
        "tags": col("text[]", "_text", "A", -1),
    }});
    let chunks = json!({"oid": 101, "schema": "public", "name": "precedent_chunks", "kind": "r", "columns": {
        "id": col("bigint", "int8", "N", -1),
        "case_law_id": col("bigint", "int8", "N", -1),
        "chunk_index": col("integer", "int4", "N", -1),
        "page_number": col("integer", "int4", "N", -1),
        "content": col("text", "text", "S", -1),
        "content_tsv": col("tsvector", "tsvector", "U", -1),
        "embedding": col("public.vector(384)", "vector", "U", 384),
    }});
    let halachot = json!({"oid": 102, "schema": "public", "name": "halachot", "kind": "r", "columns": {
        "id": col("bigint", "int8", "N", -1),
        "case_law_id": col("bigint", "int8", "N", -1),
        "rule": col("text", "text", "S", -1),
        "supporting_quote": col("text", "text", "S", -1),
        "page_number": col("integer", "int4", "N", -1),
        "review_status": col("text", "text", "S", -1),
        "rule_tsv": col("tsvector", "tsvector", "U", -1),
        "embedding": col("public.vector(384)", "vector", "U", 384),
    }});
    let src = |name: &str, item: &Value, text: &str, tsv: &str, rule: Value, locator: Value| {
        json!({"name": name, "item": item, "item_oid": item["oid"], "id_column": "id",
               "text_column": text, "tsv_column": tsv, "embedding_column": "embedding", "embedding_inputs": [text],
               "distance": "cosine", "parent": case_law, "parent_oid": 100,
               "parent_fk": "case_law_id", "parent_key": "id",
               "parent_required": ["case_number", "case_name"], "rule": rule,
               "locator": locator, "metadata": {"court": "parent.court"},
               "min_length": 50, "ts_config": 3748, "semantic_weight": 1.0, "lexical_weight": 1.0})
    };
    json!({
        "name": "external_precedents", "description": null,
        "isolation": {"source_kind": "external_upload"},
        "required_filters": [], "filter_fields": {"court": "text", "page_number": "integer"},
        "vector_schema": "public",
        // the engine's tests follow the window's mechanics from a floor of 20 (k 10: 40)
        "ranking": {"window": 20},
        "sources": [
            src("chunks", &chunks, "content", "content_tsv", json!({}),
                json!({"case_number": "parent.case_number", "page": "page_number"})),
            src("halachot", &halachot, "rule", "rule_tsv", json!({"review_status": "approved"}),
                json!({"case_number": "parent.case_number", "quote": "supporting_quote"})),
        ]
    })
}

pub fn legal() -> Corpus {
    resolve(&serde_json::from_value(legal_def()).unwrap()).unwrap()
}

/// The legal corpus with a third source, page images embedded by another model (8-d) in
/// space "page_image" (weight 0.5).
pub fn with_pages_def() -> Value {
    let mut d = legal_def();
    let mut pages = d["sources"][1].clone();
    pages["name"] = json!("pages");
    pages["item"]["oid"] = json!(103);
    pages["item_oid"] = json!(103);
    pages["item"]["name"] = json!("page_images");
    pages["item"]["columns"]["embedding"]["typmod"] = json!(8);
    pages["rule"] = json!({});
    pages["space"] = json!("page_image");
    d["sources"].as_array_mut().unwrap().push(pages);
    d["spaces"] = json!({"page_image": {"dimensions": 8, "model": "clip-tiny", "weight": 0.5}});
    d
}
