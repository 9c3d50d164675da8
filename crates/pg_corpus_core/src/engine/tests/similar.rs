//! `find_similar`'s tests against the fake executor.

use crate::engine::tests::fake::*;
use crate::engine::{find_similar, Args, Config, SimilarArgs};
use crate::error::SqlState;
use crate::model::Branch;

fn similar(source: &str, id: &str, mode: &str, exclude_parent: bool) -> SimilarArgs {
    SimilarArgs {
        source: source.into(),
        item_id: id.into(),
        exclude_parent,
        args: Args { query_vec: None, query_text: None, mode: mode.into(), max_per_parent: Some(0), ..Args::default() },
    }
}

#[test]
fn find_similar_searches_by_the_items_own_vector_and_text_and_never_returns_it() {
    let mut f = default_fake();
    // the seed is the nearest item to its own vector and the best match of its own text
    f.boost_vector.push((9.0, "12".into()));
    f.boost_key.push(("חוזה".into(), "12".into()));
    let rows = find_similar(corpus(), similar("chunks", "12", "hybrid", false), Config::default(), &mut f).unwrap().0;
    assert_eq!(rows.len(), 10);
    assert!(rows.iter().all(|r| !(r.source == "chunks" && r.item_id == "12")), "the item itself is left out");
    assert_eq!(f.calls[0], Call::Seed(0), "the item is looked up first");
    let vectors = f.semantic_vectors();
    assert!(!vectors.is_empty() && vectors.iter().all(|&v| v == 9.0), "its own vector: {vectors:?}");
    assert!(f.branch_calls().iter().any(|(_, b, _)| *b == Branch::Lexical), "and its text");
    // its parent's other items are left out too when asked: item 12 is in parent 1 (ids 11-20),
    // and its siblings 13 and 14 are near it
    let siblings = || {
        let mut f = default_fake();
        for id in ["12", "13", "14"] {
            f.boost_vector.push((9.0, id.to_string()));
            f.boost_key.push(("חוזה".into(), id.to_string()));
        }
        f
    };
    let rows =
        find_similar(corpus(), similar("chunks", "12", "hybrid", false), Config::default(), &mut siblings()).unwrap().0;
    let found: Vec<&str> = rows.iter().map(|r| r.item_id.as_str()).collect();
    assert!(found.contains(&"13") && found.contains(&"14") && !found.contains(&"12"), "{found:?}");
    let rows =
        find_similar(corpus(), similar("chunks", "12", "hybrid", true), Config::default(), &mut siblings()).unwrap().0;
    assert_eq!(rows.len(), 10, "still k rows");
    assert!(rows.iter().all(|r| r.parent_id != "1"), "{:?}", rows.iter().map(|r| &r.parent_id).collect::<Vec<_>>());
}

#[test]
fn find_similar_refuses_an_item_outside_the_corpus_without_saying_more() {
    let cases = [("chunks", "999999"), ("chunks", "not-a-number"), ("chunks", "1e3"), ("halachot", "12")];
    let mut messages = Vec::new();
    for (source, id) in cases {
        let mut f = default_fake();
        let e = find_similar(corpus(), similar(source, id, "hybrid", false), Config::default(), &mut f).unwrap_err();
        assert_eq!(e.state, SqlState::UndefinedObject, "{source} {id}: {e}");
        assert!(!e.hint.is_empty());
        assert!(f.branch_calls().is_empty(), "no search ran");
        messages.push(e.message.replace(id, "ID").replace(source, "SRC"));
    }
    assert!(messages.windows(2).all(|w| w[0] == w[1]), "one message for every kind of absence: {messages:?}");
    let e = find_similar(corpus(), similar("nope", "1", "hybrid", false), Config::default(), &mut default_fake())
        .unwrap_err();
    assert_eq!(e.state, SqlState::UndefinedObject);
    assert!(e.hint.contains("'chunks'") && e.hint.contains("'halachot'"), "{}", e.hint);
}

#[test]
fn find_similar_never_uses_a_stale_embedding_unless_asked() {
    let mut f = default_fake();
    f.stale.push("12".into());
    let e = find_similar(corpus(), similar("chunks", "12", "semantic", false), Config::default(), &mut f).unwrap_err();
    assert_eq!(e.state, SqlState::ObjectNotInPrerequisiteState);
    let mut f = default_fake();
    f.stale.push("12".into());
    let rows = find_similar(corpus(), similar("chunks", "12", "hybrid", false), Config::default(), &mut f).unwrap().0;
    assert_eq!(rows.len(), 10);
    assert!(f.branch_calls().iter().all(|(_, b, _)| *b == Branch::Lexical), "a hybrid search by its text alone");
    let mut f = default_fake();
    f.stale.push("12".into());
    let mut sim = similar("chunks", "12", "semantic", false);
    sim.args.include_stale = true;
    find_similar(corpus(), sim, Config::default(), &mut f).unwrap();
    assert!(f.branch_calls().iter().all(|(_, b, _)| *b == Branch::Semantic));
}

#[test]
fn find_similar_from_an_item_of_another_space_searches_that_space_only() {
    let mut f = pages_fake();
    let mut page = vec![0.5f32; 8];
    page[0] = 0.75;
    f.seed_vectors.insert(2, page);
    f.boost_vector.push((0.75, "200004".into()));
    let rows = find_similar(pages_corpus(), similar("pages", "200003", "semantic", false), Config::default(), &mut f)
        .unwrap()
        .0;
    assert!(!rows.is_empty() && rows.iter().all(|r| r.source == "pages"), "{rows:?}");
    assert!(rows.iter().all(|r| r.item_id != "200003"), "the item itself is left out");
    assert_eq!(rows[0].item_id, "200004", "the nearest page to its vector");
    let searched: Vec<(usize, Branch, i64)> = f.branch_calls();
    assert!(searched.iter().all(|&(source, branch, _)| source == 2 && branch == Branch::Semantic), "{searched:?}");
    assert!(f.semantic_vectors().iter().all(|&v| v == 0.75), "by the page's own vector");
}

#[test]
fn find_similar_checks_its_arguments_before_it_looks_the_item_up() {
    let mut d = crate::testing::legal_def();
    d["required_filters"] = serde_json::json!(["court"]);
    let scoped = std::sync::Arc::new(crate::definition::resolve(&serde_json::from_value(d).unwrap()).unwrap());
    type Mutation = Box<dyn Fn(&mut SimilarArgs)>;
    let cases: Vec<(Mutation, SqlState, &str)> = vec![
        (Box::new(|s| s.args.k = 0), SqlState::InvalidParameterValue, "k must be"),
        (Box::new(|s| s.args.mode = "fuzzy".into()), SqlState::InvalidParameterValue, "fuzzy"),
        (
            Box::new(|s| s.args.filters = serde_json::json!({"source_kind": "internal_committee"})),
            SqlState::InsufficientPrivilege,
            "source_kind",
        ),
        (Box::new(|s| s.source = "nope".into()), SqlState::UndefinedObject, "no source"),
    ];
    for (change, state, words) in cases {
        let mut sim = similar("chunks", "12", "hybrid", false);
        change(&mut sim);
        let mut f = default_fake();
        let e = find_similar(corpus(), sim, Config::default(), &mut f).unwrap_err();
        assert_eq!(e.state, state, "{e}");
        assert!(e.message.contains(words) && !e.hint.is_empty(), "{e:?}");
        assert!(f.calls.is_empty(), "nothing was looked up: {:?}", f.calls);
    }
    // without its required scope filter, the same error whether or not the item exists
    for id in ["12", "987654321"] {
        let mut f = default_fake();
        let e = find_similar(scoped.clone(), similar("chunks", id, "hybrid", false), Config::default(), &mut f)
            .unwrap_err();
        assert_eq!(e.state, SqlState::InvalidParameterValue);
        assert!(e.message.contains("court"), "{e}");
        assert!(f.calls.is_empty(), "the item is not looked up: {:?}", f.calls);
    }
}

#[test]
fn find_similar_by_vector_is_the_search_of_the_items_vector_without_the_item() {
    let fake = || {
        let mut f = default_fake();
        // the item's stored vector (the fake's seeds start with 9.0) finds the item first, and
        // an item far down the list of any other vector next
        f.boost_vector.push((9.0, "12".into()));
        f.boost_vector.push((9.0, "4000".into()));
        f
    };
    let own = Args { query_vec: Some(vector_starting(9.0)), k: 11, max_per_parent: Some(0), ..args("semantic") };
    let own = run(&mut fake(), own, Config::default()).unwrap();
    assert_eq!((own[0].source.as_str(), own[0].item_id.as_str()), ("chunks", "12"), "its own nearest item is itself");
    let mut sim = similar("chunks", "12", "semantic", false);
    sim.args.k = 10;
    let got = find_similar(corpus(), sim, Config::default(), &mut fake()).unwrap().0;
    assert_eq!(got[0].item_id, "4000");
    let key = |r: &crate::model::SearchRow| (r.source.clone(), r.item_id.clone(), r.semantic_distance);
    assert_eq!(got.iter().map(key).collect::<Vec<_>>(), own[1..].iter().map(key).collect::<Vec<_>>());
}
