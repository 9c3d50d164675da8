"""Every example in the README and the docs a user copies runs, in the page's order, against a
database set up as the page says: the demo database (demo/load_sample.py, what `make demo`
loads) unless the page starts with `<!-- docs-test: database=empty -->`.

- ```sql blocks run in one session of that database; a block meant to fail starts with
  `-- fails with SQLSTATE` and must fail with exactly that, with a hint;
- ```python blocks run with the project's interpreter, DATABASE_URL naming that database;
- ```sh lines run with bash (DATABASE_URL set) unless they say why not
  (`# not run by the docs test: …` at the end of the line, or as the block's first line for the
  whole block);
- every fenced block names its language, so no example escapes."""
import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md", "docs/searching.md", "docs/sql-reference.md", "docs/tutorial.md", "docs/python.md"]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
FAILS = re.compile(r"^--\s*fails with ([0-9A-Z]{5})\b", re.M)
NOT_RUN = re.compile(r"#\s*not run by the docs test:\s*\S")
SETUP = re.compile(r"<!--\s*docs-test:\s*database=(\w+)\s*-->")
RUN_LANGS = {"sql", "sh", "python"}
OTHER_LANGS = {"text", "toml", "json"}


def blocks(page):
    text = (ROOT / page).read_text()
    return [(m.group(1).strip(), m.group(2), f"{page}:{text.count(chr(10), 0, m.start()) + 1}")
            for m in FENCE.finditer(text)]


def database(cluster, page):
    name = "pgc_docs_" + re.sub(r"\W", "_", Path(page).stem.lower())
    setup = SETUP.search((ROOT / page).read_text())
    if setup and setup.group(1) == "empty":
        cluster.create_db(name, extensions=False)
    else:
        assert not setup, f"{page}: unknown docs-test setup {setup.group(1)!r}"
        res = subprocess.run([sys.executable, str(ROOT / "demo" / "load_sample.py"), cluster.uri, "--dbname", name],
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        cluster._dbs.append(name)
    # a TCP URI, as `make demo` prints: what psql, psycopg and SQLAlchemy all take
    port = (Path(cluster.dir) / "port").read_text().strip()
    return cluster.connect(name), f"postgresql://postgres@127.0.0.1:{port}/{name}"


def run_process(argv, dsn, where, what):
    env = {"PATH": f"{ROOT / '.venv' / 'bin'}:/usr/bin:/bin", "DATABASE_URL": dsn, "HOME": os.environ.get("HOME", "/")}
    res = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, f"{where}: {what}\n{res.stdout}\n{res.stderr}"


@pytest.mark.parametrize("page", PAGES)
def test_every_block_names_a_language_we_run_or_skip_on_purpose(page):
    for lang, _, where in blocks(page):
        assert lang in RUN_LANGS | OTHER_LANGS, f"{where}: a fenced block without a known language ({lang!r})"


@pytest.mark.parametrize("page", PAGES)
def test_every_example_runs_in_order(page, cluster):
    todo = [b for b in blocks(page) if b[0] in RUN_LANGS]
    assert todo, f"{page} has no example"
    conn, dsn = database(cluster, page)
    for lang, body, where in todo:
        if lang == "sql":
            expected = FAILS.search(body)
            if expected:
                try:
                    conn.execute(body)
                except psycopg.Error as e:
                    assert e.sqlstate == expected.group(1), f"{where}: {e}"
                    assert e.diag.message_hint, f"{where}: the error has no hint"
                    continue
                pytest.fail(f"{where}: does not fail with {expected.group(1)}\n{body}")
            try:
                conn.execute(body)
            except psycopg.Error as e:
                pytest.fail(f"{where}: {e.sqlstate} {e}\n{body}")
        elif lang == "python":
            run_process([sys.executable, "-c", body], dsn, where, body)
        else:
            lines = body.strip().splitlines()
            if lines and lines[0].startswith("#") and NOT_RUN.search(lines[0]):
                continue  # the whole block says why it is not run
            for line in lines:
                if not NOT_RUN.search(line):
                    run_process(["bash", "-c", line], dsn, where, line)


def test_the_sql_reference_documents_every_public_function(cluster):
    conn = cluster.create_db("pgc_docs_functions")
    names = {r[0] for r in conn.execute(
        "SELECT p.proname FROM pg_proc p WHERE p.pronamespace = 'corpus'::regnamespace AND p.proname !~ '^_'")}
    headings = " ".join(re.findall(r"^### (.+)$", (ROOT / "docs" / "sql-reference.md").read_text(), re.M))
    missing = sorted(n for n in names if not re.search(rf"\b{n}\b", headings))
    assert not missing, f"docs/sql-reference.md has no section for {missing}"
