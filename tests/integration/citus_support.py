"""A Citus cluster for the tests and the benchmark: a coordinator and two workers on
loopback (scripts/citus_cluster.sh), databases set up on every node, and the legal schema
distributed (tests/fixtures/legal_distribute.sql).

Not a test module: tests/integration/test_citus.py and bench/citus.py import it.
"""
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
CLUSTER_SCRIPT = ROOT / "scripts" / "citus_cluster.sh"
NODES = ("coordinator", "worker1", "worker2")


def statements(text):
    """The statements of an SQL file, one per element (Citus refuses a multi-statement string
    in a prepared statement): split at lines ending in `;` outside dollar quotes, comments
    dropped."""
    out, cur, in_dollar = [], [], False
    for line in text.split("\n"):
        code = line if in_dollar else re.sub(r"--.*$", "", line).rstrip()
        if not code.strip() and not in_dollar:
            continue
        cur.append(code)
        if code.count("$$") % 2 == 1:
            in_dollar = not in_dollar
        if not in_dollar and code.endswith(";"):
            out.append("\n".join(cur))
            cur = []
    if cur and "".join(cur).strip():
        out.append("\n".join(cur))
    return out


def run_file(conn, path):
    for stmt in statements(Path(path).read_text()):
        conn.execute(stmt)


def port_of(uri):
    return int(uri.rsplit(":", 1)[1].split("/")[0])


class CitusCluster:
    """Three running nodes; `create_db` makes a Citus database on all of them."""

    def __init__(self, directory, uris):
        self.dir = directory
        self.uris = uris            # node name -> libpq URI (database postgres)
        self._conns = []
        self._dbs = []

    @classmethod
    def start(cls, directory=None):
        directory = directory or os.environ.get("PG_CORPUS_CITUS_DIR") or str(ROOT / ".pgdata" / "citus")
        res = subprocess.run(["bash", str(CLUSTER_SCRIPT), "start", directory],
                             capture_output=True, text=True, timeout=300)
        if res.returncode != 0:
            raise RuntimeError(f"citus_cluster.sh start failed:\n{res.stdout}\n{res.stderr}")
        uris = dict(line.split(" ", 1) for line in res.stdout.strip().splitlines())
        return cls(directory, uris)

    def stop(self):
        subprocess.run(["bash", str(CLUSTER_SCRIPT), "stop", self.dir],
                       capture_output=True, text=True, timeout=300)

    def dsn(self, dbname, node="coordinator"):
        return psycopg.conninfo.make_conninfo(self.uris[node], dbname=dbname)

    def connect(self, dbname, node="coordinator", **kw):
        kw.setdefault("autocommit", True)
        conn = psycopg.connect(self.dsn(dbname, node), **kw)
        self._conns.append(conn)
        return conn

    def create_db(self, name, shard_count=4):
        """A fresh database on every node with Citus, the workers registered, vector and
        pg_corpus (Citus creates them on the workers); the coordinator's connection.
        `hnsw.iterative_scan` is a database default (Citus propagates ALTER DATABASE ... SET),
        as README "Scaling out" asks: pgvector's settings are read on the shards."""
        for node, uri in self.uris.items():
            with psycopg.connect(uri, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                admin.execute(f'CREATE DATABASE "{name}"')
            with psycopg.connect(self.dsn(name, node), autocommit=True) as c:
                c.execute("CREATE EXTENSION citus")
        self._dbs.append(name)
        conn = self.connect(name)
        conn.execute("SELECT citus_set_coordinator_host('127.0.0.1', %s)", (port_of(self.uris["coordinator"]),))
        for node in NODES[1:]:
            conn.execute("SELECT citus_add_node('127.0.0.1', %s)", (port_of(self.uris[node]),))
        conn.execute(f'ALTER DATABASE "{name}" SET hnsw.iterative_scan = relaxed_order')
        conn.execute(f'ALTER DATABASE "{name}" SET citus.shard_count = {int(shard_count)}')
        conn.execute("SET citus.shard_count = %s" % int(shard_count))
        conn.execute("CREATE EXTENSION vector")
        conn.execute("CREATE EXTENSION pg_corpus")
        return conn

    def close(self):
        for c in self._conns:
            try:
                c.close()
            except Exception:
                pass
        for node, uri in self.uris.items():
            with psycopg.connect(uri, autocommit=True) as admin:
                for name in self._dbs:
                    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def load_legal_distributed(conn, data, copy_rows, legal_columns):
    """legal_schema.sql, distributed (legal_distribute.sql), the data, legal_indexes.sql and
    legal_corpora.sql, one statement per round trip."""
    run_file(conn, FIXTURES / "legal_schema.sql")
    run_file(conn, FIXTURES / "legal_distribute.sql")
    for table, cols in legal_columns.items():
        copy_rows(conn, table, cols, data[table])
    run_file(conn, FIXTURES / "legal_indexes.sql")
    run_file(conn, FIXTURES / "legal_corpora.sql")


def near_chunk_queries(data, n, seed, unit):
    """(query vector, query text) pairs near random chunks of generated legal rows: the vector a
    noisy copy of a chunk's embedding (`unit` normalises), the text three of its words."""
    rng = np.random.default_rng(seed)
    chunks = [c for c in data["precedent_chunks"] + data["document_chunks"] if c["embedding"] is not None]
    out = []
    for _ in range(n):
        c = chunks[int(rng.integers(len(chunks)))]
        v = unit(c["embedding"] + rng.standard_normal(len(c["embedding"])) * 0.02)
        words = c["content"].split()
        out.append((v, " ".join(words[int(rng.integers(len(words)))] for _ in range(3))))
    return out
