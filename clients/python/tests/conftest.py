"""A private cluster with the demo sample (demo/load_sample.py, as `make demo` loads it), for the
client's and the MCP server's tests. The extension must be installed (make install)."""
import os
import socket
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[3]
PGCLUSTER = ROOT / "scripts" / "pgcluster.sh"


def _pgcluster(*args: str) -> str:
    res = subprocess.run(["bash", str(PGCLUSTER), *args], capture_output=True, text=True, timeout=180)
    if res.returncode != 0:
        pytest.fail(f"pgcluster.sh {' '.join(args)}:\n{res.stdout}\n{res.stderr}", pytrace=False)
    return (res.stdout.strip().splitlines() or [""])[-1]


@pytest.fixture(scope="session")
def cluster_uri():
    directory = os.environ.get("PG_CORPUS_CLIENT_TEST_DIR") or str(ROOT / ".pgdata" / "client-tests")
    uri = _pgcluster("start", directory)
    yield uri
    if os.environ.get("PG_CORPUS_TEST_KEEP") != "1":
        _pgcluster("stop", directory)


@pytest.fixture(scope="session")
def demo_dsn(cluster_uri):
    res = subprocess.run([sys.executable, str(ROOT / "demo" / "load_sample.py"), cluster_uri, "--dbname", "pgc_client"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return psycopg.conninfo.make_conninfo(cluster_uri, dbname="pgc_client")


@pytest.fixture
def conn(demo_dsn):
    with psycopg.connect(demo_dsn, autocommit=True) as c:
        yield c


@pytest.fixture
def closed_port():
    """A local TCP port nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
