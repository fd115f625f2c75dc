"""``scripts/gpu_check.sh``, the check a borrowed GPU's minutes go to: its dry run (the same
stages on the CPU with tiny shapes) writes its three files and prints every row of its table
with finite, positive figures; a bad option is one line; the budget is shared as documented;
and the CUDA 13 stand-in for CTranslate2's cuBLAS 12 is made only where it is needed."""

from __future__ import annotations

import importlib
import json
import math
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
gpu_check = importlib.import_module("benchmarks.gpu_check")
gpu_env = importlib.import_module("benchmarks.gpu_env")
gpu_train = importlib.import_module("benchmarks.gpu_train")
train = importlib.import_module("benchmarks.train")


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    out, work = tmp_path_factory.mktemp("out"), tmp_path_factory.mktemp("work")
    command = [str(SCRIPT), "--dry-run", "--out", str(out), "--work", str(work)]
    # Its own process group, so that a hung run is ended with every stage it started.
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = process.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail("the dry run took more than 600 s (about 45 s on 2 idle cores)")
    assert process.returncode == 0, stderr[-3000:]
    return subprocess.CompletedProcess(command, 0, stdout, stderr), out


def positive(value) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


@pytest.mark.slow  # the dry run: about a minute on 2 cores
def test_the_dry_run_writes_three_files_a_device_run_brings_back(dry_run):
    _, out = dry_run
    assert sorted(p.name for p in out.iterdir()) == ["gpu_check.log", "results.json", "table.md"]
    results = json.loads((out / "results.json").read_text())
    assert results["dry_run"] and results["machine"]["date"]
    assert {name: stage["status"] for name, stage in results["stages"].items()} == {
        "tests": "4 skipped",  # no CUDA here: every gpu test skips, none fails or errs
        "train": "done",
        "demo": "done",
        "decode": "done",
    }


@pytest.mark.slow  # the dry run: about a minute on 2 cores
def test_every_training_variant_is_measured_with_positive_figures(dry_run):
    done, out = dry_run
    train = json.loads((out / "results.json").read_text())["train"]
    assert train["data"]["pairs"] == 3000 and positive(train["peak_flops"])
    assert [v["name"] for v in train["variants"]] == list(gpu_train.DRY_VARIANTS)
    for variant in train["variants"]:
        assert all(positive(variant[k]) for k in ("tokens_per_s", "mfu", "step_ms", "flops"))
        assert positive(variant["peak_memory_mib"]) and variant["loader_wait_ms"] >= 0
        assert variant["steps"] == 2
        assert f"| {variant['name']} |" in done.stdout
    large = [v for v in train["variants"] if v["large"]]
    assert all(v["max_tokens"] == 1200 and v["accumulate"] == 2 for v in large)


@pytest.mark.slow  # the dry run: about a minute on 2 cores
def test_every_engine_decodes_both_models_greedy_and_beam_5(dry_run):
    done, out = dry_run
    decode = json.loads((out / "results.json").read_text())["decode"]
    rows = decode["rows"]
    assert len(rows) == 2 * 4 * 2  # models x engines x beams
    assert all(positive(row["seconds"]) and positive(row["sentences_per_s"]) for row in rows)
    assert decode["sentences"] == 12 and decode["demo_steps"] == 3
    for model in ("demo", "base"):
        for engine in ("ours float32", "ours float16", "ct2 float32", "ct2 int8"):
            assert f"| {model} | {engine} |" in done.stdout


@pytest.mark.slow  # the dry run: about a minute on 2 cores
def test_the_table_is_printed_last_and_kept(dry_run):
    done, out = dry_run
    table = (out / "table.md").read_text()
    assert table in done.stdout and "DRY RUN" in table
    assert "| tests | 4 skipped |" in table and "| decode | done |" in table


def test_a_bad_option_is_one_line():
    done = subprocess.run([str(SCRIPT), "--bogus"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "gpu_check.sh: unrecognized arguments: --bogus (see --help)\n"


@pytest.mark.parametrize(
    "option, says",
    [
        (["--steps", "0"], "--steps must be positive"),
        (["--stages", "train,nope"], "--stages: 'train,nope', choose from tests,train,demo,decode"),
        (["--wheels", "/nope"], "--wheels /nope: not found"),
    ],
)
def test_a_bad_value_is_one_line_before_anything_runs(option, says, capsys):
    with pytest.raises(SystemExit) as exited:
        gpu_check.arguments(option)
    assert exited.value.code == 2
    assert capsys.readouterr().err == f"gpu_check.sh: {says} (see --help)\n"


def test_a_stage_gets_its_share_of_the_time_left(tmp_path):
    args = gpu_check.arguments(["--budget", "520", "--work", str(tmp_path)])
    run = gpu_check.Run(args, started=0.0, log=tmp_path / "log")
    run.started = time.time()  # nothing spent yet
    shares = {name: run.budget(name) for name in gpu_check.STAGES}
    assert shares["tests"] == pytest.approx(100, abs=1)  # 520 x 100 / 520
    assert shares["decode"] == pytest.approx(520, abs=1)  # the last stage gets all that is left
    args.stages = ["train", "decode"]  # stages not run take no share
    assert run.budget("train") == pytest.approx(520 * 250 / 350, abs=1)


def test_the_dry_run_shapes_reach_both_configs_as_written():
    assert gpu_check.cli_overrides({"data": {"vocab_size": 8}, "model": {"config": {"d": 2}}}) == [
        "--data.vocab_size",
        "8",
        "--model.config.d",
        "2",
    ]
    config = {"data": {"corpus": "bundled", "max_tokens": 1500}, "seed_everything": 1}
    assert gpu_check.merged(config, {"data": {"max_tokens": 600}}) == {
        "data": {"corpus": "bundled", "max_tokens": 600},
        "seed_everything": 1,
    }


def test_cublas_12_stands_in_for_ctranslate2_only_where_cuda_13_alone_is_there(
    tmp_path, monkeypatch
):
    library = tmp_path / "site" / "nvidia" / "cu13" / "lib" / "libcublas.so.13"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"")
    monkeypatch.setattr(gpu_env.sys, "path", [str(tmp_path / "site")])
    monkeypatch.setattr(gpu_env, "system_libraries", lambda: "")
    folder = gpu_env.cublas12_directory(tmp_path / "work")
    assert folder is not None and (folder / "libcublas.so.12").resolve() == library
    monkeypatch.setattr(gpu_env, "system_libraries", lambda: "libcublas.so.12 (libc6,x86-64)")
    assert gpu_env.cublas12_directory(tmp_path / "work") is None


def tiny_weights(calls: int, accumulate: int = 1, fused: bool = False):
    """A linear model's weight after each of ``calls`` calls of ``update_step`` (our recipe's
    AdamW and schedule) on fixed batches; the first is the initial weight."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 3)
    settings = {"config": {"d_model": 8}, "warmup_steps": 4, "lr_scale": 1.0}
    settings |= {"cooldown_steps": 0, "adam_betas": (0.9, 0.98), "adam_eps": 1e-9}
    step = train.update_step(
        model,
        lambda x: model(x).square().mean(),
        settings | {"weight_decay": 0.0},
        clip=1.0,
        accumulate=accumulate,
        fused=fused,
    )
    batches = torch.randn(calls, 5, 8, generator=torch.Generator().manual_seed(1))
    weights = [model.weight.detach().clone()]
    for batch in batches:
        step(batch)
        weights.append(model.weight.detach().clone())
    return weights


def test_fused_adamw_is_the_recipes_adamw():
    import torch

    for plain, fused in zip(tiny_weights(4), tiny_weights(4, fused=True), strict=True):
        torch.testing.assert_close(fused, plain)


def test_accumulation_updates_once_every_k_batches():
    weights = tiny_weights(4, accumulate=2)
    changed = [not a.equal(b) for a, b in zip(weights, weights[1:], strict=False)]
    assert changed == [False, True, False, True]
