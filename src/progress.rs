//! The progress of long operations — registration, statistics refresh, health check, model
//! change — in the spirit of `pg_stat_progress_*`: each phase is written to a small file of this
//! backend in `pg_stat_tmp` (the data directory's statistics scratch space), which
//! `corpus.progress` reads from any session, and, once the operation has run for a second, said
//! in a NOTICE with its counts. The file goes when the operation ends, on error too; a file
//! whose backend is gone is never shown.

use std::cell::RefCell;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pgrx::pg_sys;
use pgrx::prelude::*;
use serde::{Deserialize, Serialize};

/// The directory the files are in (relative to the data directory, a backend's working
/// directory) and their name's prefix.
const DIR: &str = "pg_stat_tmp";
const PREFIX: &str = "pg_corpus_progress.";
/// Operations shorter than this report their phases in the file only.
const NOTICE_AFTER: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Serialize, Deserialize)]
struct State {
    /// Reported by a procedure over several transactions ([`_progress_report`]), not by a
    /// [`Progress`] guard.
    #[serde(default, skip_serializing)]
    procedure: bool,
    pid: i32,
    role: u32,
    command: String,
    corpus: Option<String>,
    phase: String,
    done: Option<i64>,
    total: Option<i64>,
    started: f64,
    updated: f64,
}

thread_local! {
    /// The operations running in this backend, innermost last (a registration refreshes the
    /// statistics: the file shows the refresh, then the registration again).
    static RUNNING: RefCell<Vec<State>> = const { RefCell::new(Vec::new()) };
}

fn epoch(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

fn path(pid: i32) -> PathBuf {
    PathBuf::from(DIR).join(format!("{PREFIX}{pid}"))
}

/// Write the innermost operation's state (or remove the file when none runs). A file that
/// cannot be written loses the progress, never the operation.
fn publish() {
    // SAFETY: this backend's own pid.
    let pid = unsafe { pg_sys::MyProcPid };
    RUNNING.with(|r| match r.borrow().last() {
        Some(state) => {
            let tmp = PathBuf::from(DIR).join(format!("{PREFIX}{pid}.tmp"));
            if let Ok(json) = serde_json::to_vec(state) {
                if std::fs::write(&tmp, json).is_ok() {
                    let _ = std::fs::rename(&tmp, path(pid));
                }
            }
        }
        None => {
            let _ = std::fs::remove_file(path(pid));
        }
    });
}

/// One long operation; its phases are reported until it is dropped.
pub struct Progress {
    started: Instant,
}

impl Progress {
    pub fn start(command: &str, corpus: Option<&str>) -> Progress {
        let now = epoch(SystemTime::now());
        // SAFETY: this backend's own pid and current role.
        let (pid, role) = unsafe { (pg_sys::MyProcPid, pg_sys::GetUserId().to_u32()) };
        RUNNING.with(|r| {
            r.borrow_mut().push(State {
                procedure: false,
                pid,
                role,
                command: command.to_string(),
                corpus: corpus.map(str::to_string),
                phase: "starting".into(),
                done: None,
                total: None,
                started: now,
                updated: now,
            })
        });
        publish();
        Progress { started: Instant::now() }
    }

    /// Enter `phase`, with `done` of `total` units (items, corpora, statements) when known.
    pub fn phase(&self, phase: &str, done: Option<i64>, total: Option<i64>) {
        let said = RUNNING.with(|r| {
            let mut r = r.borrow_mut();
            let state = r.last_mut()?;
            state.phase = phase.to_string();
            (state.done, state.total) = (done, total);
            state.updated = epoch(SystemTime::now());
            Some(state.clone())
        });
        publish();
        if let Some(s) = said.filter(|_| self.started.elapsed() >= NOTICE_AFTER) {
            let counts = match (s.done, s.total) {
                (Some(d), Some(t)) => format!(" ({d} of {t})"),
                (Some(d), None) => format!(" ({d})"),
                _ => String::new(),
            };
            let scope = s.corpus.as_deref().map(|c| format!(" of corpus \"{c}\"")).unwrap_or_default();
            crate::error::notice(
                format!("{}{scope}: {}{counts}, {:.1} s", s.command, s.phase, self.started.elapsed().as_secs_f64()),
                serde_json::json!({"kind": "progress", "phase": s.phase, "done": s.done, "total": s.total}).to_string(),
                "SELECT * FROM corpus.progress shows the progress of every long pg_corpus operation.",
            );
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        RUNNING.with(|r| {
            r.borrow_mut().pop();
        });
        publish();
    }
}

/// The progress of an operation a procedure runs over several transactions (the model
/// change's batches, each committed): each call sets its phase and counts, reported as any
/// operation's in `corpus.progress`; `command` NULL ends it. An error ends it too: the abort of
/// a transaction that reported removes it (a procedure reports at the start of every
/// transaction it runs).
#[pg_extern(volatile, parallel_unsafe)]
fn _progress_report(
    command: Option<&str>,
    corpus: Option<&str>,
    phase: Option<&str>,
    done: Option<i64>,
    total: Option<i64>,
) {
    let Some(command) = command else {
        end_procedures();
        return;
    };
    let now = epoch(SystemTime::now());
    // SAFETY: this backend's own pid and current role.
    let (pid, role) = unsafe { (pg_sys::MyProcPid, pg_sys::GetUserId().to_u32()) };
    RUNNING.with(|r| {
        let mut r = r.borrow_mut();
        match r.iter_mut().find(|s| s.procedure && s.command == command) {
            Some(s) => {
                s.phase = phase.unwrap_or("running").to_string();
                (s.done, s.total, s.updated) = (done, total, now);
            }
            None => r.push(State {
                procedure: true,
                pid,
                role,
                command: command.to_string(),
                corpus: corpus.map(str::to_string),
                phase: phase.unwrap_or("running").to_string(),
                done,
                total,
                started: now,
                updated: now,
            }),
        }
    });
    publish();
    pgrx::register_xact_callback(pgrx::PgXactCallbackEvent::Abort, end_procedures);
}

/// Forget the operations procedures report (never fails: it runs after an abort too).
fn end_procedures() {
    let changed = RUNNING.with(|r| match r.try_borrow_mut() {
        Ok(mut r) => {
            let before = r.len();
            r.retain(|s| !s.procedure);
            r.len() != before
        }
        Err(_) => false,
    });
    if changed {
        publish();
    }
}

/// Every long operation running now, as the caller may see it: its own role's, or every role's
/// for members of pg_read_all_stats (as `pg_stat_progress_*` shows them).
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_restricted)]
fn _progress() -> TableIterator<
    'static,
    (
        name!(pid, i32),
        name!(role, pg_sys::Oid),
        name!(command, String),
        name!(corpus, Option<String>),
        name!(phase, String),
        name!(done, Option<i64>),
        name!(total, Option<i64>),
        name!(started, f64),
        name!(updated, f64),
    ),
> {
    // SAFETY: role checks of the current user and a look-up of live backends by pid.
    let (me, all) = unsafe {
        let me = pg_sys::GetUserId();
        (me, pg_sys::has_privs_of_role(me, pg_sys::Oid::from(pg_sys::ROLE_PG_READ_ALL_STATS)))
    };
    let mut rows = Vec::new();
    for entry in std::fs::read_dir(DIR).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(PREFIX) || name.ends_with(".tmp") {
            continue;
        }
        let Some(s) = std::fs::read(entry.path()).ok().and_then(|b| serde_json::from_slice::<State>(&b).ok()) else {
            continue;
        };
        // SAFETY: a look-up in the proc array by pid.
        let alive = unsafe { !pg_sys::BackendPidGetProc(s.pid).is_null() };
        if !alive || !(all || s.role == me.to_u32()) {
            continue;
        }
        rows.push((
            s.pid,
            pg_sys::Oid::from(s.role),
            s.command,
            s.corpus,
            s.phase,
            s.done,
            s.total,
            s.started,
            s.updated,
        ));
    }
    rows.sort_by_key(|r| r.0);
    TableIterator::new(rows)
}

pgrx::extension_sql!(
    r#"
-- Every long pg_corpus operation running now (its own role's, or every role's for members of
-- pg_read_all_stats): registration, statistics refresh, health check, model change.
CREATE VIEW corpus.progress AS
SELECT p.pid, p.role::regrole AS role, p.command, p.corpus, p.phase, p.done, p.total,
       pg_catalog.to_timestamp(p.started) AS started, pg_catalog.to_timestamp(p.updated) AS updated
  FROM corpus._progress() AS p;
GRANT SELECT ON corpus.progress TO PUBLIC;
"#,
    name = "progress_view",
    requires = [_progress]
);
