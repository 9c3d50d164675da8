//! Query vectors matched to the model of the embeddings they are compared with. Vectors of two
//! models are not comparable (their distances rank nothing), yet both have the same type and
//! often the same dimension: a search that says which model embedded its query is refused
//! wherever a source it would rank semantically holds another model's embeddings.

use super::io::Executor;
use crate::error::{CoreError, Result, SqlState};
use crate::model::Corpus;
use crate::sql::{literal, qualified};

/// The models of the embedding column a source ranks by: its own (None: not recorded), and
/// those of the table's other embedding columns (built beside it), as (column, model).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SlotModels {
    pub model: Option<String>,
    pub others: Vec<(String, Option<String>)>,
}

/// Refuse a search whose declared query models (`declared[space]`: the model of that space's
/// query vector, None when the caller declared none or the space gets no vector) differ from
/// the model of a source of that space. Sources without a recorded model are not judged.
pub(super) fn check_query_models(corpus: &Corpus, declared: &[Option<String>], exec: &mut dyn Executor) -> Result<()> {
    let asked: Vec<usize> = (0..corpus.sources.len())
        .filter(|&i| declared.get(corpus.sources[i].space).is_some_and(Option::is_some))
        .collect();
    if asked.is_empty() {
        return Ok(());
    }
    let columns: Vec<(i64, String)> =
        asked.iter().map(|&i| (corpus.sources[i].item.oid, corpus.sources[i].embedding.column.clone())).collect();
    let found = exec.embedding_models(&columns)?;
    for (&i, slot) in asked.iter().zip(&found) {
        let query = declared[corpus.sources[i].space].as_deref().unwrap_or_default();
        if let Some(e) = mismatch(corpus, i, query, slot) {
            return Err(e);
        }
    }
    Ok(())
}

/// The error for a query vector of model `query` compared with source `source`'s embeddings,
/// or None when their models agree (or the source's is not recorded).
pub fn mismatch(corpus: &Corpus, source: usize, query: &str, slot: &SlotModels) -> Option<CoreError> {
    let src = &corpus.sources[source];
    let current = slot.model.as_deref()?;
    if current == query {
        return None;
    }
    let space = &corpus.spaces[src.space].name;
    let table = qualified(&src.item.schema, &src.item.name);
    let argument = if src.space == 0 { "query_model" } else { "the model of its query_vectors entry" };
    let message = format!(
        "the query vector of space \"{space}\" was embedded with model {}, but source \"{}\" of corpus \"{}\" \
         holds embeddings of model {}",
        literal(query),
        src.name,
        corpus.name,
        literal(current)
    );
    let detail = format!(
        "Source \"{}\" ranks by {table}.{} (model {}); distances between vectors of two models rank nothing.",
        src.name,
        crate::sql::ident(&src.embedding.column),
        literal(current)
    );
    let anyway = format!("or leave {argument} NULL to search with this vector anyway");
    let hint = match slot.others.iter().find(|(_, m)| m.as_deref() == Some(query)) {
        Some((column, _)) => format!(
            "Embeddings of model {} are being built in {table}.{}: until SELECT corpus.corpus_embedding_switch({}, {}, {}) \
             makes them current, embed the query with model {}, {anyway}.",
            literal(query),
            crate::sql::ident(column),
            literal(&table),
            literal(&src.embedding.column),
            literal(column),
            literal(current)
        ),
        None => format!("Embed the query with model {}, {anyway}.", literal(current)),
    };
    Some(CoreError::new(SqlState::InvalidParameterValue, message, hint).with_detail(detail))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::legal;

    fn slot(model: Option<&str>, others: &[(&str, Option<&str>)]) -> SlotModels {
        SlotModels {
            model: model.map(str::to_string),
            others: others.iter().map(|(c, m)| (c.to_string(), m.map(str::to_string))).collect(),
        }
    }

    #[test]
    fn the_same_model_or_an_unrecorded_one_passes() {
        let c = legal();
        assert!(mismatch(&c, 0, "e5", &slot(Some("e5"), &[])).is_none());
        assert!(mismatch(&c, 0, "e5", &slot(None, &[("v2", Some("bge"))])).is_none());
    }

    #[test]
    fn another_model_is_refused_with_the_switch_when_it_is_being_built() {
        let c = legal();
        let e = mismatch(&c, 0, "bge", &slot(Some("e5"), &[("embedding v2", Some("bge"))])).unwrap();
        assert_eq!(e.state, SqlState::InvalidParameterValue);
        assert!(e.message.contains("'bge'") && e.message.contains("'e5'"), "{}", e.message);
        assert!(e.hint.contains("corpus.corpus_embedding_switch(") && e.hint.contains("'embedding v2')"), "{}", e.hint);
        assert!(e.hint.contains("\"embedding v2\"") && e.hint.contains("query_model NULL"), "{}", e.hint);
        let other = mismatch(&c, 0, "clip", &slot(Some("e5"), &[("embedding v2", Some("bge"))])).unwrap();
        assert!(!other.hint.contains("switch") && other.hint.contains("model 'e5'"), "{}", other.hint);
    }

    #[test]
    fn quotes_in_model_names_stay_literals() {
        let c = legal();
        let e = mismatch(&c, 0, "x'); DROP TABLE t; --", &slot(Some("e5"), &[("v2", Some("x'); DROP TABLE t; --"))]))
            .unwrap();
        assert!(e.hint.contains("'x''); DROP TABLE t; --'"), "{}", e.hint);
    }

    mod searches {
        use super::super::SlotModels;
        use crate::engine::tests::fake::{args, default_fake, pages_corpus, pages_fake, run, run_on, vec384, Call};
        use crate::engine::{Args, Config};
        use crate::error::SqlState;
        use serde_json::json;

        fn recorded(model: &str, others: &[(&str, &str)]) -> SlotModels {
            SlotModels {
                model: Some(model.into()),
                others: others.iter().map(|(c, m)| (c.to_string(), Some(m.to_string()))).collect(),
            }
        }

        fn with_models(
            mut f: crate::engine::tests::fake::Fake,
            corpus: &crate::model::Corpus,
            m: &SlotModels,
        ) -> crate::engine::tests::fake::Fake {
            for s in &corpus.sources {
                f.models.insert((s.item.oid, s.embedding.column.clone()), m.clone());
            }
            f
        }

        #[test]
        fn a_declared_model_is_checked_before_any_branch_runs() {
            let c = crate::engine::tests::fake::corpus();
            let m = recorded("e5", &[("embedding_v2", "bge")]);
            let mut f = with_models(default_fake(), &c, &m);
            run(&mut f, Args { query_model: Some("e5".into()), ..args("hybrid") }, Config::default()).unwrap();
            assert!(matches!(&f.calls[..], [Call::Models(cols), ..] if cols.len() == 2));
            let mut f = with_models(default_fake(), &c, &m);
            let e =
                run(&mut f, Args { query_model: Some("bge".into()), ..args("hybrid") }, Config::default()).unwrap_err();
            assert_eq!(e.state, SqlState::InvalidParameterValue);
            assert!(e.hint.contains("corpus_embedding_switch("), "{}", e.hint);
            assert!(f.branch_calls().is_empty(), "refused before any branch ran");
        }

        #[test]
        fn undeclared_or_uncompared_models_are_not_looked_up() {
            let c = crate::engine::tests::fake::corpus();
            let m = recorded("e5", &[]);
            for a in [
                args("hybrid"),
                Args { query_model: Some("bge".into()), ..args("lexical") },
                Args { query_model: Some("bge".into()), query_vec: None, ..args("hybrid") },
            ] {
                let mut f = with_models(default_fake(), &c, &m);
                run(&mut f, a, Config::default()).unwrap();
                assert!(!f.calls.iter().any(|c| matches!(c, Call::Models(_))), "{:?}", f.calls.first());
            }
        }

        #[test]
        fn each_space_is_judged_by_the_model_its_own_entry_names() {
            let c = pages_corpus();
            let mut f = pages_fake();
            for s in &c.sources {
                let model = if s.space == 0 { "e5" } else { "clip" };
                f.models.insert((s.item.oid, s.embedding.column.clone()), recorded(model, &[]));
            }
            let page = |model: &str| json!({"page_image": {"vector": vec![0.5f32; 8], "model": model}});
            let ok = Args { query_model: Some("e5".into()), query_vectors: page("clip"), ..args("hybrid") };
            run_on(c.clone(), &mut f, ok.clone()).unwrap();
            let bad = Args { query_vectors: page("e5"), ..ok.clone() };
            let e = run_on(c.clone(), &mut pages_fake_with(&c), bad).unwrap_err();
            assert!(e.message.contains("space \"page_image\""), "{}", e.message);
            assert!(e.hint.contains("its query_vectors entry"), "{}", e.hint);
            // the entry's fields are checked
            for (entry, state) in [
                (json!({"page_image": {"vector": [0.5], "model": 3}}), SqlState::InvalidParameterValue),
                (json!({"page_image": {"vector": vec![0.5f32; 8], "modle": "clip"}}), SqlState::InvalidParameterValue),
                (json!({"page_image": {"model": "clip"}}), SqlState::InvalidParameterValue),
                (json!({"default": {"vector": vec384(), "model": "e5"}}), SqlState::InvalidParameterValue),
            ] {
                let a = Args { query_vectors: entry.clone(), ..ok.clone() };
                let e = run_on(c.clone(), &mut pages_fake(), a).unwrap_err();
                assert_eq!(e.state, state, "{entry}: {}", e.message);
            }
            let blank = Args { query_model: Some("  ".into()), ..args("hybrid") };
            assert_eq!(run_on(c.clone(), &mut pages_fake(), blank).unwrap_err().state, SqlState::InvalidParameterValue);
        }

        fn pages_fake_with(c: &crate::model::Corpus) -> crate::engine::tests::fake::Fake {
            let mut f = pages_fake();
            for s in &c.sources {
                let model = if s.space == 0 { "e5" } else { "clip" };
                f.models.insert((s.item.oid, s.embedding.column.clone()), recorded(model, &[]));
            }
            f
        }
    }
}
