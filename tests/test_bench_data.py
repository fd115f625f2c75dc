"""``scripts/bench.py data``: its synthetic pairs are distinct, its process-tree PSS adds up, its
line fits, and a tiny run end to end prints a row of plausible measurements."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from itertools import product
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
bench_data = importlib.import_module("benchmarks.data")
data_corpus = importlib.import_module("benchmarks.data_corpus")
data_report = importlib.import_module("benchmarks.data_report")
proc_memory = importlib.import_module("benchmarks.proc_memory")

REAL = [
    ("Go.", "走。"),
    ("Go. Now.", "现在走。"),
    ("Hi.", "你好。"),
    ("Run!", "跑！"),
    ("I see.", "我明白。"),
    ("Tom ran.", "汤姆跑了。"),
    ("Wait.", "等等。"),
]


def test_sizes_read_with_their_suffixes():
    assert [bench_data.parse_size(s) for s in ("250k", "1M", "4M", "8m", "20000", "1.5M")] == [
        250_000,
        1_000_000,
        4_000_000,
        8_000_000,
        20_000,
        1_500_000,
    ]


def test_space_prefix_free_drops_a_sentence_that_starts_another():
    kept = data_corpus.space_prefix_free(REAL)
    assert ("Go.", "走。") not in kept and len(kept) == len(REAL) - 1


def test_every_synthetic_pair_below_m_times_m_minus_1_is_distinct():
    pairs = data_corpus.space_prefix_free(REAL)
    m = len(pairs)
    made = [data_corpus.synthetic_pair(pairs, k) for k in range(m * (m - 1))]
    assert len(set(made)) == len(made) == len({en for en, _ in made})
    # Every ordered pair of two different real pairs, each once.
    joined = {(f"{a[0]} {b[0]}", a[1] + b[1]) for a, b in product(pairs, pairs) if a != b}
    assert set(made) == joined


def test_the_corpus_file_holds_n_distinct_lines(tmp_path):
    pairs = data_corpus.space_prefix_free(REAL)
    path = tmp_path / "pairs.tsv"
    data_corpus.write_corpus(path, pairs, 25, chunk=7)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(set(lines)) == 25 and all(line.count("\t") == 1 for line in lines)
    with pytest.raises(SystemExit):
        data_corpus.write_corpus(tmp_path / "too-many.tsv", pairs, 31)


def test_the_tree_pss_sums_this_process_and_its_child():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.5)
        own = proc_memory.smaps(os.getpid())["Pss"]
        tree = proc_memory.tree_memory(os.getpid())
        assert {os.getpid(), sleeper.pid} <= set(tree)
        total = sum(memory["Pss"] for memory in tree.values())
        assert total >= tree[os.getpid()]["Pss"] + tree[sleeper.pid]["Pss"]
        assert total >= 0.95 * own and tree[sleeper.pid]["Pss"] > 0
        assert proc_memory.uss(tree[sleeper.pid]) <= tree[sleeper.pid]["Rss"]
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_line_through_peak_pss_and_its_extrapolation():
    assert data_report.fit_line([(1.0, 3.0), (2.0, 5.0), (4.0, 9.0)]) == pytest.approx((2.0, 1.0))
    assert data_report.fit_line([(1.0, 3.0)]) is None
    rows = {n: {"prepare": {"pss": (0.5 + n / 1e6) * proc_memory.GIB}} for n in (10**6, 2 * 10**6)}
    line = data_report.extrapolation(rows)
    assert "1.000 GiB per million pairs + 0.500 GiB" in line and "26M pairs: 26.5 GiB" in line


@pytest.mark.slow
def test_a_tiny_run_prints_a_row_of_measurements(tmp_path):
    out = tmp_path / "bench.json"
    command = [
        sys.executable,
        "scripts/bench.py",
        "data",
        "--sizes",
        "3000",
        "--work",
        str(tmp_path),
        "--json",
        str(out),
        "--loader-seconds",
        "1",
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr

    row = next(line for line in done.stdout.splitlines() if line.startswith("| 3000 |"))
    header = ["pairs"] + [column[0] for column in data_report.COLUMNS]
    cells = dict(zip(header, (c.strip() for c in row.strip("|").split("|")), strict=True))
    assert float(cells["peak PSS GiB (tree)"]) > 0 and float(cells["cache MB"]) > 0
    assert cells["2-rank USS MiB"].count(" / ") == 1 and "failed" not in row
    assert float(cells["loader tok/s"].replace(",", "")) > 0
    assert "Peak PSS against pairs" in done.stdout  # one size: no line to fit, said so
    assert "3000: 3,000 distinct pairs" in done.stdout
    measured = json.loads(out.read_text())["results"]["this checkout"]["3000"]
    assert measured["prepare"]["pss"] > measured["prepare"]["startup_pss"] > 0
    assert measured["reload"]["tokens_per_s"] > 0 and len(measured["ranks"]) == 2
    assert "preparing 3000 (this checkout)" in done.stderr


def test_the_modifiers_go_to_a_data_module_that_takes_them():
    from benchmarks.data_child import module_arguments
    from seq2seq.data.datamodule import TranslationDataModule

    modifiers = {"terms": 0.5, "aligned_terms": 2000}
    params = {"path": "p.tsv", "cache_dir": "c", "num_proc": 2, "modifiers": modifiers}
    assert module_arguments(TranslationDataModule, params)["modifiers"] == modifiers

    def older_module(corpus, path, cache_dir, num_proc=None):  # a checkout before modifiers
        """A peer's data module."""

    assert "modifiers" not in module_arguments(older_module, params)
    assert "modifiers" not in module_arguments(TranslationDataModule, {**params, "modifiers": None})
    assert bench_data.arguments(["--modifiers", '{"terms": 0.5}']).modifiers == {"terms": 0.5}
