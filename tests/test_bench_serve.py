"""``scripts/bench.py serve`` end to end, very briefly: a tiny untrained checkpoint served to 1
and 2 clients for a second each, then its one-file ceiling; the table and the JSON agree. And
``scripts/bench.py serve-libretranslate`` as briefly: the same checkpoint served by our server,
by our server on CTranslate2 and by the real LibreTranslate on its Argos package."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import synthetic_pairs

try:  # LibreTranslate's own virtualenv: tests/test_argos.py's session fixture
    from tests.test_argos import libretranslate_python  # noqa: F401
except pytest.skip.Exception as skipped:  # no ctranslate2 or transformers here
    NO_ARGOS = f"no Argos package without ctranslate2 and transformers: {skipped}"

    @pytest.fixture(scope="session")
    def libretranslate_python() -> Path:
        pytest.skip(NO_ARGOS)


pytestmark = [pytest.mark.slow, pytest.mark.serial]
ROOT = Path(__file__).resolve().parents[1]
SERVERS = ("ours", "ctranslate2", "libretranslate")


def write_sentences(path: Path) -> Path:
    path.write_text("".join(en + "\n" for en, _ in synthetic_pairs()[:40]), encoding="utf-8")
    return path


def run_bench(
    name: str, checkpoint: Path, out: Path, *options: object, timeout: float
) -> subprocess.CompletedProcess[str]:
    """``scripts/bench.py NAME --checkpoint CHECKPOINT OPTIONS... --json OUT``; its stdout and
    stderr, once it has succeeded."""
    arguments = [name, "--checkpoint", str(checkpoint), *map(str, options), "--json", str(out)]
    command = [sys.executable, "scripts/bench.py", *arguments]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done


def test_bench_serve_measures_every_level_and_the_ceiling(translation_checkpoint, tmp_path):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    sentences = write_sentences(tmp_path / "sentences.en")
    out = tmp_path / "bench.json"
    load = ("--clients", "1,2", "--beams", 1, "--duration", 1, "--warmup", 0.5)
    options = ("--sentences", sentences, *load)
    done = run_bench("serve", translation_checkpoint, out, *options, timeout=300)
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


def test_bench_serve_libretranslate_measures_each_server_at_each_client_count(
    libretranslate_python,  # noqa: F811 (the fixture imported above)
    translation_checkpoint,
    tmp_path,
):
    """One row per server and client count, every request answered, a peak memory for each,
    and the ratios of ours and of our CTranslate2 engine to LibreTranslate."""
    pytest.importorskip("fastapi")
    out = tmp_path / "bench.json"
    sentences = write_sentences(tmp_path / "sentences.en")
    load = ("--clients", "1,2", "--duration", 0.5, "--warmup", 0.2, "--retries", 0)
    options = ("--sentences", sentences, "--python", libretranslate_python, *load)
    done = run_bench("serve-libretranslate", translation_checkpoint, out, *options, timeout=600)
    report = json.loads(out.read_text())
    expected = [(server, clients) for server in SERVERS for clients in (1, 2)]
    assert [(row["server"], row["clients"]) for row in report["levels"]] == expected
    for row in report["levels"]:
        assert row["requests"] > 0 and row["errors"] == 0
        assert row["peak_rss_mib"] > 0 and row["p50_ms"] <= row["p99_ms"]
        assert f"| {row['server']} | {row['clients']} | {row['sentences_per_s']:.1f} |" in (
            done.stdout
        )
    ratios = report["ratios"]
    assert [(r["server"], r["clients"]) for r in ratios] == expected[:4]
    assert all(r["reference"] == "libretranslate" and r["sentences_per_s"] > 0 for r in ratios)
    assert "Ratios to libretranslate at the same client count" in done.stdout
    assert set(report["servers"]) == set(SERVERS)
