"""The re-embed worker's command and the one Embedder protocol it shares with the client and the
MCP server (the worker against a database: tests/integration/test_reembed.py)."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pg_corpus import embedders

ROOT = Path(__file__).resolve().parents[3]
COMMAND = Path(sys.executable).with_name("pg-corpus-worker")


def run(*argv):
    return subprocess.run([*map(str, argv)], capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_the_worker_command_is_installed_with_the_package():
    res = run(COMMAND, "--help")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("usage: pg-corpus-worker")
    for option in ("--embedder", "--embedder-arg", "--model-name", "--dimensions", "--exit-when-empty"):
        assert option in res.stdout


@pytest.mark.parametrize("argv,says", [
    (["--embedder", "nosuch"], "unknown embedder"),
    (["--embedder", "hash", "--embedder-arg", "colour"], "expects key=value"),
    (["--embedder", "hash", "--embedder-arg", "colour=1"], "colour"),
    (["--embedder", "collections:OrderedDict"], "has no name, dimensions, passages, query"),
])
def test_a_bad_embedder_is_exit_status_2(argv, says):
    res = run(COMMAND, "postgresql://nobody@127.0.0.1:1/none", *argv)
    assert res.returncode == 2 and says in res.stderr, res.stderr


class ListEmbedder:
    """An embedder of one's own that returns plain lists."""

    name, dimensions = "lists-2", 2

    def passages(self, texts):
        return [[1.0, float(len(t))] for t in texts]

    def query(self, text):
        return [0.0, 1.0]


def test_one_protocol_for_builtin_and_own_embedders():
    hashed = embedders.load("hash", dimensions=8, fail_on="POISON")
    assert (hashed.name, hashed.dimensions) == ("hash-8", 8)
    a, b = hashed.passages(["refund the invoice", "refund the invoice"])
    assert np.array_equal(a, b) and a.dtype == np.float32 and np.isclose(np.linalg.norm(a), 1.0)
    assert np.array_equal(hashed.query("refund the invoice"), a)
    with pytest.raises(ValueError, match="POISON"):
        hashed.passages(["fine", "a POISON text"])
    own = embedders.load(f"{__name__}:ListEmbedder")
    assert own.passages(["abc"]) == [[1.0, 3.0]] and own.query("x") == [0.0, 1.0]
    with pytest.raises(ValueError, match="has no"):
        embedders.load("collections:OrderedDict")
