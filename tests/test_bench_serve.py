"""``scripts/bench_serve.py`` end to end, very briefly: a tiny untrained checkpoint served to 1
and 2 clients for a second each, then its one-file ceiling; the table and the JSON agree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import synthetic_pairs

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def test_bench_serve_measures_every_level_and_the_ceiling(translation_checkpoint, tmp_path):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    sentences = tmp_path / "sentences.en"
    sentences.write_text("".join(en + "\n" for en, _ in synthetic_pairs()[:40]), encoding="utf-8")
    out = tmp_path / "bench.json"
    command = [
        sys.executable,
        "scripts/bench_serve.py",
        "--checkpoint",
        str(translation_checkpoint),
        "--sentences",
        str(sentences),
        "--clients",
        "1,2",
        "--beams",
        "1",
        "--duration",
        "1",
        "--warmup",
        "0.5",
        "--json",
        str(out),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr

    report = json.loads(out.read_text())
    levels = report["levels"]
    assert [(row["beam"], row["clients"]) for row in levels] == [(1, 1), (1, 2)]
    for row in levels:
        assert row["requests"] > 0 and row["errors"] == 0
        assert row["sentences"] == row["requests"]  # one sentence per request
        assert row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"]
        assert row["of_ceiling"] > 0
    assert levels[0]["x_one_client"] == 1.0
    ceiling = report["ceilings"]["1"]
    assert ceiling["sentences"] == 40 and ceiling["sentences_per_s"] > 0
    assert "| beam | clients | requests/s |" in done.stdout
    assert "One-file ceiling, beam 1:" in done.stdout
    assert "[bench_serve] beam 1, 2 client(s):" in done.stderr
