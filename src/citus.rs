//! Statements pg_corpus runs on the other nodes of a Citus cluster: the fan-out every
//! Citus-aware function uses (the rest of the Citus glue is SQL: sql/catalog.sql).

use pg_corpus_core::sql::literal;
use pg_corpus_core::{CoreError, SqlState};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;

use crate::error::{raise_as, OrRaise};
use crate::spi;

/// One node's answer to a fan-out statement.
struct Answer {
    node: String,
    success: bool,
    result: Option<String>,
}

/// Run a statement (one column, one row) on these nodes, one after the other, each in its own
/// transaction (Citus' master_run_on_worker, as the current user): each node's answer. A
/// node's error is raised here with its SQLSTATE, message, detail and hint, naming the node; a
/// node that cannot be reached is 08006.
#[pg_extern(volatile, parallel_unsafe)]
fn _citus_on_nodes(
    names: Option<Vec<Option<String>>>,
    ports: Option<Vec<Option<i32>>>,
    command: Option<&str>,
) -> SetOfIterator<'static, Option<String>> {
    let names: Vec<String> = names.unwrap_or_default().into_iter().map(Option::unwrap_or_default).collect();
    let ports: Vec<i32> = ports.unwrap_or_default().into_iter().map(Option::unwrap_or_default).collect();
    SetOfIterator::new(on_nodes(names, ports, command.unwrap_or("")))
}

/// [`_citus_on_nodes`] on every other active primary node of the cluster (none without Citus).
#[pg_extern(volatile, parallel_unsafe)]
fn _citus_on_other_nodes(command: Option<&str>) -> SetOfIterator<'static, Option<String>> {
    let (names, ports) = spi::pinned_search_path(|| {
        spi::write(
            "SELECT n.node_name, n.node_port FROM corpus._citus_other_nodes() WITH ORDINALITY AS n(node_name, node_port, o)
              ORDER BY n.o",
            &[],
            |t| {
                let (mut names, mut ports) = (Vec::new(), Vec::new());
                for row in t {
                    names.push(row.get::<String>(1)?.unwrap_or_default());
                    ports.push(row.get::<i32>(2)?.unwrap_or_default());
                }
                Ok((names, ports))
            },
        )
    })
    .or_raise();
    SetOfIterator::new(on_nodes(names, ports, command.unwrap_or("")))
}

fn on_nodes(names: Vec<String>, ports: Vec<i32>, command: &str) -> Vec<Option<String>> {
    if names.is_empty() {
        return Vec::new();
    }
    let run_here = format!("SELECT corpus._citus_run_here({})", literal(command));
    let answers = spi::pinned_search_path(|| {
        spi::write(
            "SELECT m.node_name::text || ':' || m.node_port::text, m.success, m.result
               FROM pg_catalog.master_run_on_worker($1, $2, $3, false) AS m",
            &[
                DatumWithOid::from(names.clone()),
                DatumWithOid::from(ports),
                DatumWithOid::from(vec![run_here; names.len()]),
            ],
            |t| {
                let mut out = Vec::new();
                for row in t {
                    out.push(Answer {
                        node: row.get::<String>(1)?.unwrap_or_default(),
                        success: row.get::<bool>(2)?.unwrap_or(false),
                        result: row.get::<String>(3)?,
                    });
                }
                Ok(out)
            },
        )
    })
    .or_raise();
    let mut results = Vec::with_capacity(answers.len());
    for a in answers {
        let text = a.result.unwrap_or_default();
        if !a.success {
            crate::error::raise(CoreError::new(
                SqlState::ConnectionFailure,
                format!("pg_corpus could not run its statement on Citus node {}: {text}", a.node),
                "Every node needs the pg_corpus extension and the caller's role; see README \"Scaling out\".",
            ));
        }
        let answer: serde_json::Value = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
        if let Some(e) = answer.get("error") {
            let field =
                |k: &str| e.get(k).and_then(serde_json::Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
            raise_as(
                &field("sqlstate").unwrap_or_default(),
                format!("on Citus node {}: {}", a.node, field("message").unwrap_or_default()),
                field("detail"),
                field("hint"),
            );
        }
        results.push(answer.get("result").and_then(serde_json::Value::as_str).map(str::to_string));
    }
    results
}
