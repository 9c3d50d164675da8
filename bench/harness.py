"""The benchmark harness: what every benchmark in bench/ shares.

A benchmark is a small module (bench/<name>.py) that declares a `Spec` — its data, the methods it
compares, its parameters, a tiny `--smoke` size and the files it writes — and calls `main(SPEC)`.
The harness gives it:

* the cluster: `Cluster` starts a private PostgreSQL 15 cluster with scripts/pgcluster.sh (its
  settings through PGCLUSTER_OPTS; a running cluster with other values is restarted) and stops
  it at the end unless `--keep`; `fresh_database` recreates a database with pgvector and
  pg_corpus, `demo_database` loads the demo sample, `recreate_extension` renews pg_corpus in a
  database that keeps its data;
* seeded data: `unit`, `gaussian`, `clustered_embeddings` (topic → parent → item in a
  low-dimensional latent space), `vocabulary` and `zipf_probabilities` (synthetic Zipf text),
  `vec_text`;
* interleaved timing: `interleave` measures every method round-robin, each round in a new
  shuffled order, so that methods compared in one run share the machine's noise;
  `interleave_queries` does so per query after a warm-up pass; `stats` (p50, p95, mean, max)
  and `ratio`;
* the engine's own statements: `explained_subplans` (what corpus_explain prints, ready to run or
  EXPLAIN), `explain_json`, `plan_summary`;
* output: `table` (one markdown table), `figure` (one PNG, matplotlib when installed),
  `write_results_section` (the generated part of a page under docs/), `write_raw` (raw numbers
  to bench/out/raw/, which git ignores), `machine` (what ran it), `command` (how to run it again).

`--smoke` runs a benchmark at its tiny size with its outputs under bench/out/smoke/<name>/: a
check that the script still works, never figures to commit.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"          # committed summaries
OUT = BENCH / "out"                  # git-ignored: raw runs, smoke outputs
PGCLUSTER = ROOT / "scripts" / "pgcluster.sh"
EXT_LIB = Path("/usr/lib/postgresql/15/lib/pg_corpus.so")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# The cluster
# --------------------------------------------------------------------------------------------

def pgcluster(cmd: str, directory: str | Path, settings: Mapping[str, str] | None = None) -> str:
    """scripts/pgcluster.sh CMD DIR with `settings` as server options; the last line it prints
    (the URI for start and uri). Exits the process when the script fails."""
    opts = " ".join(f"-c {k}={v}" for k, v in (settings or {}).items())
    env = {**os.environ, "PGCLUSTER_OPTS": opts} if opts else None
    res = subprocess.run(["bash", str(PGCLUSTER), cmd, str(directory)], capture_output=True,
                         text=True, timeout=300, env=env)
    if res.returncode != 0:
        sys.exit(f"pgcluster.sh {cmd} {directory} failed:\n{res.stdout}{res.stderr}")
    return res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""


def value(conn: psycopg.Connection, query: str, params: Any = None) -> Any:
    """The first column of the first row a statement returns."""
    row = conn.execute(query, params, prepare=False).fetchone()
    if row is None:
        raise LookupError(f"no row: {query}")
    return row[0]


def _settings_hold(uri: str, settings: Mapping[str, str]) -> bool:
    """Whether the running server has these settings (sizes compared in bytes)."""
    with psycopg.connect(uri, autocommit=True) as conn:
        for name, want in settings.items():
            row = conn.execute("SELECT setting, unit FROM pg_settings WHERE name = %s", [name]).fetchone()
            if row is None:
                return False
            if (row[1] or "").endswith("B"):
                same = value(conn, "SELECT pg_size_bytes(current_setting(%s)) = pg_size_bytes(%s)", [name, want])
            else:
                same = want in (row[0], value(conn, "SELECT current_setting(%s)", [name]))
            if not same:
                return False
    return True


def running(directory: str | Path) -> bool:
    """Whether a cluster runs in `directory`."""
    return subprocess.run(["bash", str(PGCLUSTER), "status", str(directory)], capture_output=True).returncode == 0


class Cluster:
    """A private cluster in `directory`: `with Cluster(dir, settings) as uri:` starts it (or
    restarts a running one whose settings differ) and stops it on leaving unless `keep`."""

    def __init__(self, directory: str | Path, settings: Mapping[str, str] | None = None,
                 keep: bool = False):
        self.directory = Path(directory)
        self.settings = dict(settings or {})
        self.keep = keep
        self.uri = ""

    def start(self) -> str:
        self.uri = pgcluster("start", self.directory, self.settings)
        if self.settings and not _settings_hold(self.uri, self.settings):
            log(f"restarting the cluster in {self.directory} with {self.settings}")
            pgcluster("stop", self.directory)
            self.uri = pgcluster("start", self.directory, self.settings)
            if not _settings_hold(self.uri, self.settings):
                sys.exit(f"could not start {self.directory} with {self.settings}")
        return self.uri

    def stop(self) -> None:
        pgcluster("stop", self.directory)

    @property
    def server_log(self) -> Path:
        return self.directory / "server.log"

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if not self.keep:
            self.stop()


def dsn(uri: str, dbname: str) -> str:
    return make_conninfo(uri, dbname=dbname)


def fresh_database(uri: str, dbname: str, extensions: Sequence[str] = ("vector", "pg_corpus")
                   ) -> psycopg.Connection:
    """`dbname` created afresh on the cluster of `uri`, with `extensions`: an autocommit
    connection to it."""
    with psycopg.connect(uri, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    conn = psycopg.connect(dsn(uri, dbname), autocommit=True)
    for ext in extensions:
        conn.execute(sql.SQL("CREATE EXTENSION {}").format(sql.Identifier(ext)))
    return conn


def recreate_extension(conn: psycopg.Connection, rebuild: bool = True) -> None:
    """pg_corpus dropped and created again in a database that keeps its data (an installed build
    changed). Columns generated from its functions would be dropped with it, with their indexes:
    they become plain columns first, keeping their values and indexes. Indexes of the extension's
    access method (corpus_bm25) go with it and are built again (unless not `rebuild`: the caller
    builds them)."""
    ranking = [r[0] for r in conn.execute(
        """SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i
             JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
            WHERE am.amname = 'corpus_bm25'""").fetchall()]
    for table, col in conn.execute(
            """SELECT a.attrelid::regclass::text, a.attname FROM pg_attribute a
                 JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                 JOIN pg_class c ON c.oid = a.attrelid
                WHERE a.attgenerated <> '' AND c.relnamespace <> 'corpus'::regnamespace
                  AND pg_get_expr(d.adbin, d.adrelid) LIKE '%%corpus.%%'""").fetchall():
        conn.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN {} DROP EXPRESSION").format(
            sql.SQL(table), sql.Identifier(col)))
    conn.execute("DROP EXTENSION IF EXISTS pg_corpus CASCADE")
    # objects the extension created at run time (trigger functions) outlive it
    conn.execute("DROP SCHEMA IF EXISTS corpus CASCADE")
    conn.execute("CREATE EXTENSION pg_corpus")
    for definition in ranking if rebuild else []:
        conn.execute(definition)


def demo_database(uri: str, dbname: str) -> str:
    """`dbname` loaded afresh with the demo sample (demo/load_sample.py): its DSN."""
    subprocess.run([sys.executable, str(ROOT / "demo" / "load_sample.py"), uri, "--dbname", dbname],
                   capture_output=True, text=True, check=True)
    return dsn(uri, dbname)


def session(dsn_: str, settings: Iterable[tuple[str, str]] = ()) -> psycopg.Connection:
    """An autocommit connection with `settings` SET for the session."""
    conn = psycopg.connect(dsn_, autocommit=True)
    for name, setting in settings:
        conn.execute("SELECT set_config(%s, %s, false)", [name, setting])
    return conn


# --------------------------------------------------------------------------------------------
# Seeded data
# --------------------------------------------------------------------------------------------

def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def gaussian(rng: np.random.Generator, n: int, dim: int, norm: float) -> np.ndarray:
    """n random vectors of dim components whose norm is about `norm`."""
    return rng.standard_normal((n, dim), dtype=np.float32) * np.float32(norm / np.sqrt(dim))


LATENT_DIM = 32


def clustered_embeddings(rng: np.random.Generator, dim: int, clusters: int,
                         parent_cluster: np.ndarray, item_parent: np.ndarray):
    """Clustered embeddings of low intrinsic dimension, as text embeddings are: a Gaussian
    mixture in a LATENT_DIM-d space (topic centre 1.0, parent offset 0.6, item offset 0.5, as
    norms), mapped to `dim` dimensions by a random linear map, plus a direction shared by all
    (0.8: the anisotropy of real embeddings) and full-dimensional noise (0.3); L2-normalised.
    Cosine: same parent ~0.86, unrelated ~0.28. (Independent Gaussian clusters in all 1024
    dimensions are too well separated: HNSW at ef_search 40 then misses whole clusters for a
    few percent of the queries, unlike on real embeddings.)
    Returns the vectors, their latent coordinates and the embedding map (for queries:
    `embed(latent_points, rng)`)."""
    dims = min(LATENT_DIM, dim)
    centres = gaussian(rng, clusters, dims, 1.0)
    parents = centres[parent_cluster] + gaussian(rng, len(parent_cluster), dims, 0.6)
    latent = parents[item_parent] + gaussian(rng, len(item_parent), dims, 0.5)
    projection = gaussian(rng, dims, dim, 1.0)      # rows of norm ~1, nearly orthogonal
    common = gaussian(rng, 1, dim, 0.8)

    def embed(points: np.ndarray, noise_rng: np.random.Generator) -> np.ndarray:
        out = np.empty((len(points), dim), dtype=np.float32)
        for lo in range(0, len(points), 10_000):
            part = points[lo:lo + 10_000]
            out[lo:lo + len(part)] = unit(part @ projection + common
                                          + gaussian(noise_rng, len(part), dim, 0.3))
        return out

    return embed(latent, rng), latent, embed


def vocabulary(rng: np.random.Generator, size: int) -> np.ndarray:
    """`size` distinct pseudo-words of 2-5 syllables, the shorter ones the more frequent (Zipf's
    law of abbreviation); rank 0 is the most frequent."""
    syllables = np.array([c + v for c in "bdfgklmnprstvz" for v in "aeiou"])
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < size:
        n = int(rng.integers(2, 6))
        w = "".join(rng.choice(syllables, size=n))
        if w not in seen:
            seen.add(w)
            words.append(w)
    lengths = np.array([len(w) for w in words])
    order = np.lexsort((rng.random(size), lengths))
    return np.array(words, dtype=object)[order]


def zipf_probabilities(size: int, exponent: float) -> np.ndarray:
    p = np.arange(1, size + 1, dtype=np.float64) ** -exponent
    return p / p.sum()


def vec_text(v: Iterable[float]) -> str:
    """A vector as pgvector's text input."""
    return "[" + ",".join("%.9g" % float(x) for x in v) + "]"


# --------------------------------------------------------------------------------------------
# Interleaved timing
# --------------------------------------------------------------------------------------------

def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(milliseconds, result) of one call."""
    t = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t) * 1000, out


def interleave(calls: Mapping[Any, Callable[[], Any]], repeats: int, rng: np.random.Generator,
               progress: bool = False) -> tuple[dict[Any, list[float]], dict[Any, Any]]:
    """Every call `repeats` times, round-robin: each round runs all of them once in a new
    shuffled order. Returns ({name: [ms of each round]}, {name: result of its first round});
    with `progress`, logs how far it is every minute."""
    names = list(calls)
    times: dict[Any, list[float]] = {n: [] for n in names}
    first: dict[Any, Any] = {}
    t0 = last = time.perf_counter()
    total, done = len(names) * repeats, 0
    for rnd in range(repeats):
        for i in rng.permutation(len(names)):
            n = names[i]
            ms, out = timed(calls[n])
            times[n].append(ms)
            first.setdefault(n, out)
            done += 1
            if progress and time.perf_counter() - last > 60:
                last = time.perf_counter()
                el = last - t0
                log(f"  round {rnd + 1}/{repeats}: {done:,}/{total:,} calls, {el / 60:.1f} min, "
                    f"eta {el * (total - done) / done / 60:.1f} min")
    if progress:
        log(f"  {total:,} timed calls in {(time.perf_counter() - t0) / 60:.1f} min")
    return times, first


def interleave_queries(calls_of: Callable[[Any], Mapping[Any, Callable[[], Any]]], queries: Sequence[Any],
                       rounds: int, rng: np.random.Generator, warmup: int = 1) -> dict[Any, list[float]]:
    """`warmup` untimed passes over the queries, then `rounds` timed ones; in each pass, per query,
    every call of `calls_of(query)` once in a new shuffled order. Returns {name: every timed ms}."""
    times: dict[Any, list[float]] = {}
    for r in range(warmup + rounds):
        for q in queries:
            ms, _ = interleave(calls_of(q), 1, rng)
            if r >= warmup:
                for name, xs in ms.items():
                    times.setdefault(name, []).extend(xs)
    return times


def pct(xs: Sequence[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=float), p)) if len(xs) else float("nan")


def stats(xs: Sequence[float]) -> dict[str, float]:
    """p50, p95, mean and max of latencies, and how many."""
    if not len(xs):
        return {"p50": float("nan"), "p95": float("nan"), "mean": float("nan"),
                "max": float("nan"), "n": 0}
    return {"p50": pct(xs, 50), "p95": pct(xs, 95), "mean": float(np.mean(xs)),
            "max": float(np.max(xs)), "n": len(xs)}


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def fmt_ms(x: float | None) -> str:
    return "–" if x is None or x != x else (f"{x:.0f}" if x >= 100 else f"{x:.1f}")


# --------------------------------------------------------------------------------------------
# EXPLAIN
# --------------------------------------------------------------------------------------------

def explain_json(conn: psycopg.Connection, query: str, params: Any = None,
                 settings: Iterable[tuple[str, str]] = (), analyze: bool = True,
                 timing: bool = True) -> dict:
    """The top object of EXPLAIN (FORMAT JSON[, ANALYZE, BUFFERS]) under SET LOCAL settings."""
    opts = "FORMAT JSON" + (", ANALYZE, BUFFERS" if analyze else "") + ("" if timing else ", TIMING OFF")
    with conn.transaction():
        for name, setting in settings:
            conn.execute("SELECT set_config(%s, %s, true)", [name, setting])
        doc = value(conn, f"EXPLAIN ({opts}) {query}", params)
    doc = json.loads(doc) if isinstance(doc, str) else doc
    return doc[0]


def explained_subplans(conn: psycopg.Connection, corpus: str, vector: Sequence[float] | None,
                       text: str | None, k: int, mode: str, filters: Mapping[str, Any] | None = None
                       ) -> list[tuple]:
    """Every subplan corpus_explain prints for a search: (source, branch, strategy, its SET LOCAL
    settings, its SQL with psycopg placeholders, their values). corpus_explain shows the query
    vector as a placeholder: a semantic subplan's first value is the vector itself."""
    rows = conn.execute(
        "SELECT source, branch, strategy, sql, params FROM corpus.corpus_explain(%s, %s::vector, %s, "
        "k => %s, mode => %s, filters => %s::jsonb)",
        [corpus, vec_text(vector) if vector is not None else None, text, k, mode,
         json.dumps(dict(filters or {}))]).fetchall()
    out = []
    for source, branch, strategy, body, params in rows:
        settings, lines = [], []
        for line in body.splitlines():
            m = re.match(r"SET LOCAL ([\w.]+) = (.*);$", line)
            if m:
                settings.append((m.group(1), m.group(2)))
            else:
                lines.append(line)
        query = re.sub(r"\$(\d+)", r"%(p\1)s", "\n".join(lines).replace("%", "%%"))
        values = {f"p{i + 1}": v for i, v in enumerate(params)}
        if branch == "semantic" and vector is not None:
            values["p1"] = [float(x) for x in vector]
        out.append((source, branch, strategy, settings, query, values))
    return out


def explained_subplan(conn: psycopg.Connection, corpus: str, vector: Sequence[float] | None,
                      text: str | None, k: int, mode: str, branch: str
                      ) -> tuple[str, list[tuple[str, str]], str, dict[str, Any]]:
    """The first subplan of `branch` (see explained_subplans): (strategy, settings, SQL, values)."""
    _, _, strategy, settings, query, values = next(
        s for s in explained_subplans(conn, corpus, vector, text, k, mode) if s[1] == branch)
    return strategy, settings, query, values


def plan_summary(node: dict, depth: int = 0) -> list[str]:
    """A plan tree, one line a node: type, index or relation, actual rows and time."""
    label = node["Node Type"]
    if node.get("Index Name"):
        label += f" using {node['Index Name']}"
    elif node.get("Relation Name"):
        label += f" on {node['Relation Name']}"
    if "Actual Rows" in node:
        label += f" (rows={node['Actual Rows']}, loops={node.get('Actual Loops', 1)})"
    if node.get("Actual Total Time") is not None:
        label += f" {node['Actual Total Time']:.2f} ms"
    lines = ["  " * depth + label]
    for child in node.get("Plans", []):
        lines += plan_summary(child, depth + 1)
    return lines


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------

def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], align: str = "") -> str:
    """One markdown table. `align` has a letter a column, l or r (default: l for the first,
    r for the others)."""
    align = align or "l" + "r" * (len(headers) - 1)
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


@contextmanager
def figure(path: str | Path, ncols: int, size: tuple[float, float],
           rect: tuple[float, float, float, float] | None = None) -> Iterator[tuple[Any, list[Any]] | None]:
    """The one PNG writer: `with figure(path, ncols, (width, height)) as fa:` gives (figure, a row
    of `ncols` axes) to draw on, or None when matplotlib is not installed (nothing is written);
    on leaving, the figure is laid out and saved to `path` (110 dpi)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed: no plot (pip install -r bench/requirements.txt)")
        yield None
        return
    fig, axes = plt.subplots(1, ncols, figsize=size, squeeze=False)
    yield fig, list(axes[0])
    fig.tight_layout(rect=rect) if rect else fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def section_markers(script: str) -> tuple[str, str]:
    """The markers around a page's generated part (naming the script that writes it, if given)."""
    begin = f"<!-- results:begin ({script} writes this part) -->" if script else "<!-- results:begin -->"
    return begin, "<!-- results:end -->"


def write_results_section(path: str | Path, script: str, body: str, title: str) -> None:
    """Replace the generated part of a page (between its results markers) with `body`, keeping
    the hand-written text around it; a page without markers is written anew."""
    path = Path(path)
    begin, end = section_markers(script)
    block = f"{begin}\n{body}\n{end}"
    text = path.read_text() if path.exists() else ""
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        path.write_text(head + block + rest.split(end, 1)[1])
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {title}\n\n## Results\n\n{block}\n")


def dump_json(obj: Any) -> str:
    """Indented JSON with every list of plain numbers on one line."""
    text = json.dumps(obj, indent=1, ensure_ascii=False, default=str)
    return re.sub(r"\[\s*([-+0-9.eE,\s]*?)\s*\]",
                  lambda m: "[" + " ".join(m.group(1).split()) + "]", text) + "\n"


def write_raw(path: str | Path, obj: Any) -> Path:
    """Raw numbers of a run as JSON (by default under bench/out/raw/, which git ignores)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_json(obj))
    return path


def git_commit(outputs: tuple[str, ...] = ()) -> str:
    """The code a run measured: the last commit that changed anything but `outputs` (the paths
    the benchmark itself writes, relative to the repository), with -dirty when anything but them
    differs from it. Committing a run's outputs, or a run that rewrites another size's, leaves it
    the same."""
    excluded = [f":(exclude){o}" for o in outputs]
    res = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h", "--", ".", *excluded],
                         capture_output=True, text=True)
    commit = res.stdout.strip()
    if not commit:
        return "?"
    changed = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "--",
                              ".", *excluded], capture_output=True, text=True).stdout.strip()
    return commit + ("-dirty" if changed else "")


def installed_build(fmt: str = "%Y-%m-%d %H:%M:%S UTC") -> str:
    """When the pg_corpus library was installed (a run that spans a reinstall is suspect)."""
    return (datetime.fromtimestamp(EXT_LIB.stat().st_mtime, timezone.utc).strftime(fmt)
            if EXT_LIB.exists() else "?")


def machine(conn: psycopg.Connection | None = None, settings: Sequence[str] = ()) -> dict:
    """The machine, the commit and, given a connection, the server, its extensions and
    `settings`."""
    info: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform(),
                            "cpus": os.cpu_count(), "commit": git_commit(),
                            "library_installed": installed_build(),
                            "load": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    try:
        cpu = [ln for ln in Path("/proc/cpuinfo").read_text().splitlines()
               if ln.startswith("model name")]
        info["cpu"] = cpu[0].split(":", 1)[1].strip() if cpu else "?"
        mem = Path("/proc/meminfo").read_text().split("\n")[0].split()[1]
        info["ram_gb"] = round(int(mem) / 1024 / 1024, 1)
    except OSError:
        pass
    if conn is not None:
        if settings:
            conn.execute("LOAD 'pg_corpus'")   # its settings appear in pg_settings once loaded
            info["settings"] = dict(conn.execute(
                "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s)",
                [list(settings)]).fetchall())
        info["postgres"] = value(conn, "SHOW server_version")
        info["extensions"] = dict(conn.execute(
            "SELECT extname, extversion FROM pg_extension "
            "WHERE extname IN ('vector', 'pg_corpus')").fetchall())
    return info


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


# --------------------------------------------------------------------------------------------
# Specs
# --------------------------------------------------------------------------------------------

@dataclass
class Spec:
    """One benchmark.

    name      its module (bench/<name>.py) and its default cluster folder (.pgdata/bench-<name>)
    about     one line: what it measures
    run       run(args): the benchmark; args has the spec's parameters and --dir, --keep, --smoke
    params    params(parser): adds its own parameters
    outputs   option → default path of every file it writes ("--markdown": docs/x.md, ...);
              under --smoke each goes to bench/out/smoke/<name>/ instead
    smoke     the options of its tiny size
    cluster   False for a benchmark that starts no single private cluster of its own
    """
    name: str
    about: str
    run: Callable[[argparse.Namespace], Any]
    params: Callable[[argparse.ArgumentParser], None] = lambda p: None
    outputs: Mapping[str, Path] = field(default_factory=dict)
    smoke: Sequence[str] = ()
    cluster: bool = True


def page_outputs(name: str, page: str, plot: bool = True) -> dict[str, Path]:
    """The outputs of a benchmark with a page under docs/: its raw JSON (bench/out/raw/), the
    page's generated section (docs/<page>.md) and its figure (docs/<page>.png)."""
    out = {"--raw": OUT / "raw" / f"{name}.json", "--markdown": ROOT / "docs" / f"{page}.md"}
    if plot:
        out["--plot"] = ROOT / "docs" / f"{page}.png"
    return out


def parser(spec: Spec, doc: str | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"bench/{spec.name}.py", description=doc or spec.about,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    if spec.cluster:
        p.add_argument("--dir", default=str(ROOT / ".pgdata" / f"bench-{spec.name}"),
                       help="the private cluster's folder (default .pgdata/bench-%(prog)s)")
        p.add_argument("--keep", action="store_true", help="leave the cluster running")
    p.add_argument("--smoke", action="store_true",
                   help="tiny size, outputs under bench/out/smoke/: proves the script works")
    for opt, default in spec.outputs.items():
        p.add_argument(opt, default=str(default), help=f"output (default {default})")
    spec.params(p)
    return p


def parse(spec: Spec, argv: Sequence[str] | None = None, doc: str | None = None) -> argparse.Namespace:
    """The spec's arguments; with --smoke its tiny size first (options given override it) and
    its outputs under bench/out/smoke/<name>/."""
    argv = list(sys.argv[1:] if argv is None else argv)
    p = parser(spec, doc)
    if "--smoke" in argv:
        smoke_dir = OUT / "smoke" / spec.name
        given = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
        extra = [str(x) for x in spec.smoke]
        for opt, default in spec.outputs.items():
            if opt not in given:
                extra += [opt, str(smoke_dir / Path(default).name)]
        argv = extra + argv
    args = p.parse_args(argv)
    args.command = command(spec, argv)
    for opt in spec.outputs:
        path = getattr(args, opt.lstrip("-").replace("-", "_"))
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    return args


def command(spec: Spec, argv: Sequence[str]) -> str:
    """The command that reruns a benchmark: its options without folders, outputs and --keep."""
    drop = {"--dir", "--keep", "--reuse", *spec.outputs}
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in drop:
            skip = "=" not in arg and name not in ("--keep", "--reuse")
            continue
        kept.append(arg)
    return " ".join([f".venv/bin/python bench/{spec.name}.py"] + kept)


def main(spec: Spec, argv: Sequence[str] | None = None, doc: str | None = None) -> Any:
    """Parse the arguments and run the benchmark."""
    return spec.run(parse(spec, argv, doc))
