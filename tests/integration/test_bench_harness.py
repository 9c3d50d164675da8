"""bench/harness.py, without a cluster: interleaved timing runs every method once per round in a
new order, the statistics and the markdown writers, the --smoke arguments, the command a run
records, and every benchmark module declaring a spec whose --smoke arguments parse."""
import importlib
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import harness as h  # noqa: E402

SPECS = sorted(p.stem for p in BENCH.glob("*.py")
               if p.stem not in ("harness", "lexical_speed_compare")
               and "SPEC = " in p.read_text())


def test_interleave_runs_every_method_once_per_round_in_shuffled_orders():
    seen = []
    calls = {m: (lambda m=m: seen.append(m) or m.upper()) for m in "abcd"}
    times, first = h.interleave(calls, 6, np.random.default_rng(1))
    assert {m: len(ts) for m, ts in times.items()} == {m: 6 for m in "abcd"}
    assert first == {m: m.upper() for m in "abcd"}
    rounds = [tuple(seen[i:i + 4]) for i in range(0, 24, 4)]
    assert all(sorted(r) == list("abcd") for r in rounds)
    assert len(set(rounds)) > 1, "every round in the same order"


def test_interleave_queries_leaves_the_warm_up_pass_untimed():
    runs = []
    times = h.interleave_queries(lambda q: {m: (lambda m=m: runs.append((q, m))) for m in "xy"},
                                 [1, 2, 3], 2, np.random.default_rng(0), warmup=1)
    assert len(runs) == 3 * 2 * 3
    assert {m: len(ts) for m, ts in times.items()} == {"x": 6, "y": 6}


def test_stats_and_ratio():
    s = h.stats([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (s["p50"], s["max"], s["n"]) == (3.0, 100.0, 5)
    assert s["p50"] < s["p95"] <= 100.0
    assert h.stats([])["n"] == 0
    assert h.ratio(6.0, 3.0) == 2.0 and h.ratio(1.0, 0.0) != h.ratio(1.0, 0.0)


def test_table_aligns_the_first_column_left_and_numbers_right():
    assert h.table(["what", "ms"], [("a", 1.5), ("b", 20)]).splitlines() == [
        "| what | ms |", "|---|---:|", "| a | 1.5 |", "| b | 20 |"]


def test_results_section_keeps_the_hand_written_text(tmp_path):
    page = tmp_path / "page.md"
    h.write_results_section(page, "bench/x.py", "first", "Title")
    begin, end = h.section_markers("bench/x.py")
    page.write_text("intro\n" + page.read_text().split("## Results\n\n", 1)[1] + "\nanalysis\n")
    h.write_results_section(page, "bench/x.py", "second", "Title")
    assert page.read_text() == f"intro\n{begin}\nsecond\n{end}\n\nanalysis\n"


def spec(**kw):
    return h.Spec(name="demo", about="a demo", run=lambda a: a,
                  params=lambda p: p.add_argument("--rows", type=int, default=1000),
                  outputs={"--out": h.RESULTS / "demo.md"}, smoke=["--rows", "10"], **kw)


def test_smoke_takes_the_tiny_size_and_writes_under_bench_out():
    a = h.parse(spec(), ["--smoke"])
    assert a.rows == 10
    assert Path(a.out) == h.OUT / "smoke" / "demo" / "demo.md"
    assert h.parse(spec(), ["--smoke", "--rows", "20"]).rows == 20, "an option given overrides the smoke size"
    plain = h.parse(spec(), [])
    assert (plain.rows, Path(plain.out)) == (1000, h.RESULTS / "demo.md")
    assert Path(plain.dir).name == "bench-demo"


def test_the_recorded_command_leaves_out_folders_outputs_and_keep():
    argv = ["--rows", "5", "--dir", "/tmp/x", "--keep", "--out=/tmp/o.md"]
    assert h.command(spec(), argv) == ".venv/bin/python bench/demo.py --rows 5"


@pytest.mark.parametrize("name", SPECS)
def test_every_benchmark_declares_a_spec_whose_smoke_size_parses(name):
    # (loaded from its file under a name of its own: tests/integration has modules of the
    # same names, e.g. soak, which an earlier test may have imported)
    spec_ = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    assert module.SPEC.name == name
    a = h.parse(module.SPEC, ["--smoke"], module.__doc__)
    for opt in module.SPEC.outputs:
        assert h.OUT in Path(getattr(a, opt.lstrip("-").replace("-", "_"))).parents, f"{opt} outside bench/out"
