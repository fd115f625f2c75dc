"""Distributed data parallel on 2 CPU processes (gloo), launched the two ways users launch it:
torchrun, and Lightning's own launcher behind ``seq2seq fit --trainer.devices 2``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from benchmarks.harness import free_port, free_ports
from seq2seq.config import ModelConfig
from seq2seq.data.batching import Batch
from seq2seq.data.datamodule import TranslationDataModule
from seq2seq.training.module import TranslationModule
from tests.helpers import CONFIG, fit_process, synthetic_pairs

pytestmark = pytest.mark.slow
WORKER = Path(__file__).parent / "workers" / "ddp_worker.py"
REPO = Path(__file__).parents[1]


def quiet_env() -> dict[str, str]:
    # torchrun runs the worker as a script, so Python would import seq2seq from wherever it is
    # installed; PYTHONPATH makes the workers test this checkout's code, as the test does.
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", "PYTHONPATH": path}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp")
    corpus = root / "pairs.tsv"
    corpus.write_text("".join(f"{en}\t{zh}\n" for en, zh in synthetic_pairs()), encoding="utf-8")
    data = TranslationDataModule(
        corpus="tsv",
        path=str(corpus),
        vocab_size=556,
        max_tokens=400,
        max_len=40,
        cache_dir=str(root / "cache"),
    )
    data.prepare_data()
    data.setup("fit")
    return root, corpus, data


def torchrun_command(root: Path, corpus: Path, port: int) -> list[str]:
    """tests/workers/ddp_worker.py on 2 ranks under torchrun: each writes what it saw."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(port),
        str(WORKER),
        str(root),
        str(corpus),
        str(root / "cache"),
    ]


@pytest.fixture(scope="module")
def torchrun_results(prepared, launched):
    root = prepared[0]
    done = launched["torchrun"]
    assert done.returncode == 0, done.stderr[-3000:]
    return [torch.load(root / f"rank{r}.pt", weights_only=False) for r in (0, 1)]


def test_ranks_train_on_disjoint_shards_of_equal_length(torchrun_results, prepared):
    rank0, rank1 = torchrun_results
    data = prepared[2]
    assert rank0["world_size"] == rank1["world_size"] == 2
    assert rank0["batches"] == rank1["batches"] == rank0["global_step"] > 1
    all_rows = {tuple(src) for src, _ in data.dataset("train")}
    seen0, seen1 = set(rank0["rows"]), set(rank1["rows"])
    # Disjoint, apart from at most one batch repeated to even out the counts.
    assert len(seen0 & seen1) <= max(len(r) for r in (rank0["rows"], rank1["rows"])) // 2
    assert seen0 | seen1 == all_rows  # together the ranks cover the epoch
    assert all(torch.isfinite(torch.tensor(r["losses"])).all() for r in torchrun_results)


def tiny_module(**kwargs) -> TranslationModule:
    return TranslationModule(
        ModelConfig(
            vocab_size=556,
            d_model=32,
            n_heads=2,
            n_encoder_layers=1,
            n_decoder_layers=1,
            d_ff=64,
            dropout=0.0,
            max_positions=64,
        ),
        warmup_steps=10,
        **kwargs,
    )


def test_ddp_gradient_is_the_token_mean_of_the_union_of_both_shards(torchrun_results):
    """The update's gradient is the per-token mean over both ranks' batches (each token
    weighs the same), not the mean of the two ranks' means: one process on the union agrees."""
    rank0, rank1 = torchrun_results
    module = tiny_module(val_bleu_sentences=0)
    module.load_state_dict(rank0["initial"])
    module.train()
    sums, counts = [], []
    for result in (rank0, rank1):
        src, tgt_in, tgt_out = result["first_batch"]
        batch = Batch(src, tgt_in, tgt_out, int((src != 0).sum()), int((tgt_out != 0).sum()))
        loss, _, n_tokens = module.loss(batch)
        sums.append(loss * n_tokens)
        counts.append(n_tokens)
    assert counts[0] != counts[1]  # shards of different sizes: a mean of means would differ
    (sum(sums) / sum(counts)).backward()
    for name, parameter in module.named_parameters():
        torch.testing.assert_close(parameter.grad, rank0["first_grads"][name], rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(parameter.grad, rank1["first_grads"][name], rtol=1e-4, atol=1e-6)


def test_ddp_validation_equals_one_process_on_the_same_dev_set(
    torchrun_results, prepared, monkeypatch
):
    """val_loss/val_nll are token-weighted over the dev set with each sentence once, and
    val_bleu is scored on every rank's translations gathered: one process gets the same."""
    import lightning as L

    import seq2seq.training.validation
    from seq2seq.training.validation import ValidationBleu

    rank0, rank1 = torchrun_results
    data = prepared[2]
    module = tiny_module(val_bleu_sentences=-1)
    module.load_state_dict(rank0["final"])
    scored = []
    score = seq2seq.training.validation.score_translations
    monkeypatch.setattr(
        seq2seq.training.validation,
        "score_translations",
        lambda h, r: scored.append((h, r[0])) or score(h, r),
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each rank: the same float sums
    try:
        trainer = L.Trainer(
            accelerator="cpu",
            devices=1,
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            callbacks=[ValidationBleu()],
        )
        (single,) = trainer.validate(module, datamodule=data, verbose=False)
    finally:
        torch.set_num_threads(threads)  # later tests in this process compare float sums too
    n_dev = len(data.split_texts("dev")[0])
    ((hypotheses, references),) = scored
    assert len(hypotheses) == n_dev == len(references) > 10
    for result in (rank0, rank1):
        assert result["scored"] == scored  # the same sentences, each once, in dev order
        for key in ("val_loss", "val_nll", "val_bleu"):
            assert result["validation"][key] == pytest.approx(single[key], rel=1e-5), key


def test_fit_command_runs_ddp_with_lightnings_launcher(straight):
    """``seq2seq fit --trainer.devices 2 --trainer.strategy ddp`` (the uninterrupted run the
    resume tests compare with): Lightning launches the second rank, both train to max_steps,
    and the checkpoint carries the tokenizer and config under DDP too."""
    assert straight["global_step"] == STEPS
    assert "seq2seq" in straight


STEPS = 30  # of every run below: SIGTERM lands after step 3, SIGKILL a checkpoint into the resume


def fit_command(root: Path, corpus: Path, *extra: str) -> list[str]:
    """``seq2seq fit`` of STEPS steps on 2 processes (Lightning's launcher), writing into root,
    with training-time modifiers on (a resumed run must see the batches an uninterrupted one
    sees, modified pairs and term annotations included)."""
    root.mkdir(exist_ok=True)
    config = root / "config.yaml"
    config.write_text(CONFIG.format(corpus=corpus, root=root, max_steps=STEPS))
    return fit_process(config, *TWO_PROCESSES, "--data.modifiers", MODIFIERS, *extra)


TWO_PROCESSES = ("--trainer.devices", "2", "--trainer.strategy", "ddp")  # Lightning's launcher
MODIFIERS = '{"uppercase": 0.2, "titlecase": 0.1, "no_end_punctuation": 0.3, "terms": 0.3}'


def run_fit(argv: list[str]) -> None:
    env = {**quiet_env(), "MASTER_PORT": str(free_port())}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def start_fit(argv: list[str], **kwargs) -> subprocess.Popen:
    """Starts it in a session of its own, so that the rank it launches can be found (killpg)."""
    env = {**quiet_env(), "MASTER_PORT": str(free_port())}
    return subprocess.Popen(argv, env=env, start_new_session=True, **kwargs)


def wait_for_step(last: Path, step: int, process: subprocess.Popen) -> None:
    deadline = time.time() + 300
    while time.time() < deadline and process.poll() is None:
        if last.exists() and torch.load(last, weights_only=False)["global_step"] >= step:
            return
        time.sleep(0.02)


@dataclass
class Finished:
    """A launched command once it ended: its exit code, stderr, and the directory it wrote."""

    returncode: int
    stderr: str
    root: Path


@pytest.fixture(scope="module")
def launched(prepared, tmp_path_factory) -> dict[str, Finished]:
    """The module's three independent 2-process runs, started together: the torchrun worker,
    the uninterrupted ``seq2seq fit`` the resume test compares with (``straight``), and the
    non-finite one. Each process imports torch and Lightning on one core for seconds before it
    trains, and Lightning's launcher starts rank 1 only once rank 0 has: run one after another,
    a core idles through every start-up."""
    data_root, corpus, _ = prepared
    straight_root, nonfinite_root = (tmp_path_factory.mktemp(n) for n in ("straight", "nonfinite"))
    torchrun_port, straight_port, nonfinite_port = free_ports(3)
    commands = {  # name: (argv, the directory it writes, Lightning's MASTER_PORT)
        "torchrun": (torchrun_command(data_root, corpus, torchrun_port), data_root, None),
        "straight": (fit_command(straight_root, corpus), straight_root, straight_port),
        "nonfinite": (nonfinite_command(nonfinite_root, corpus), nonfinite_root, nonfinite_port),
    }
    running = {}
    try:
        for name, (argv, root, port) in commands.items():
            env = {**quiet_env(), **({"MASTER_PORT": str(port)} if port else {})}
            with open(root / f"{name}.stderr", "w") as stderr:  # the child keeps its own copy
                running[name] = subprocess.Popen(argv, env=env, stderr=stderr)
        codes = {name: process.wait(timeout=600) for name, process in running.items()}
    finally:
        for process in running.values():
            process.kill()  # nothing left behind if one hangs
    return {
        name: Finished(codes[name], (root / f"{name}.stderr").read_text(), root)
        for name, (_, root, _) in commands.items()
    }


@pytest.fixture(scope="module")
def straight(launched) -> dict:
    """The last.ckpt of an uninterrupted 2-process run of STEPS steps."""
    done = launched["straight"]
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(done.root / "checkpoints" / "last.ckpt", weights_only=False)


def assert_ends_like(straight: dict, last: Path) -> None:
    b = torch.load(last, weights_only=False)
    assert straight["global_step"] == b["global_step"] == STEPS
    for key, value in straight["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][key], value, rtol=1e-4, atol=1e-5)
    for x, y in zip(
        straight["optimizer_states"][0]["state"].values(),
        b["optimizer_states"][0]["state"].values(),
        strict=True,
    ):
        torch.testing.assert_close(y["exp_avg_sq"], x["exp_avg_sq"], rtol=1e-4, atol=1e-8)


@pytest.fixture(scope="module")
def sigtermed(prepared, tmp_path_factory) -> dict:
    """A 2-process run that got SIGTERM to rank 0 alone (``kill PID``) after its third step:
    its exit code, stderr, run directory, and whether the rank it launched ended by itself."""
    root = tmp_path_factory.mktemp("sigterm")
    argv = fit_command(root, prepared[1], "--checkpoint.last_every_n_train_steps", "3")
    with open(root / "stderr.txt", "w") as stderr:
        victim = start_fit(argv, stderr=stderr)
    wait_for_step(root / "checkpoints" / "last.ckpt", 3, victim)
    victim.send_signal(signal.SIGTERM)
    code = victim.wait(timeout=300)
    deadline = time.time() + 60
    while time.time() < deadline:  # the rank that rank 0 launched ends by itself
        try:
            os.killpg(victim.pid, 0)
        except ProcessLookupError:
            rank_1_ended = True
            break
        time.sleep(0.1)
    else:
        os.killpg(victim.pid, signal.SIGKILL)
        rank_1_ended = False
    err = (root / "stderr.txt").read_text()
    return {"code": code, "stderr": err, "root": root, "ended": rank_1_ended}


def test_sigterm_to_rank_0_stops_both_ranks_at_one_step_with_a_checkpoint(sigtermed):
    """The ranks agree to stop after the same step, last.ckpt holds it, one line says where
    (exit 143), and the launched rank exits too. (Resuming it is the next test.)"""
    assert sigtermed["code"] == 128 + signal.SIGTERM
    err, last = sigtermed["stderr"], sigtermed["root"] / "checkpoints" / "last.ckpt"
    lines = err.strip().splitlines()
    assert sum(line.startswith("seq2seq fit: SIGTERM: finishing") for line in lines) == 1, err
    stopped = re.fullmatch(
        r"seq2seq fit: interrupted \(SIGTERM\) at step (\d+); saved (\S+); "
        r"resume with: seq2seq fit .* --ckpt_path last",
        lines[-1],
    )
    assert stopped and "Traceback" not in err, err
    step = int(stopped[1])
    assert 3 <= step < STEPS and Path(stopped[2]) == last.resolve()
    assert torch.load(last, weights_only=False)["global_step"] == step
    assert sigtermed["ended"], "rank 1 was still running a minute after rank 0 stopped"


def test_sigterm_resume_sigkill_mid_epoch_resume_matches_an_uninterrupted_run(
    prepared, sigtermed, straight
):
    """The SIGTERM-stopped run resumed with ``--ckpt_path last``, then killed mid-epoch (both
    ranks, SIGKILL) a checkpoint later, and resumed again: it ends where an uninterrupted run
    of the same seed ends. Each resume starts from the other kind of stop."""
    root, corpus = sigtermed["root"], prepared[1]
    last = root / "checkpoints" / "last.ckpt"
    stopped_by_sigterm = torch.load(last, weights_only=False)["global_step"]
    argv = fit_command(
        root, corpus, "--checkpoint.last_every_n_train_steps", "3", "--ckpt_path", "last"
    )
    victim = start_fit(argv, stderr=subprocess.DEVNULL)
    wait_for_step(last, stopped_by_sigterm + 3, victim)
    os.killpg(victim.pid, signal.SIGKILL)  # rank 0 and the rank it launched
    victim.wait()
    stopped_at = torch.load(last, weights_only=False)["global_step"]
    assert stopped_by_sigterm < stopped_at < STEPS, f"not killed mid-training (step {stopped_at})"

    run_fit(fit_command(root, corpus, "--ckpt_path", "last"))
    assert_ends_like(straight, last)


def nonfinite_command(root: Path, corpus: Path) -> list[str]:
    """A 2-process fit at an absurd learning rate that stops after 3 non-finite losses."""
    config = root / "config.yaml"
    config.write_text(CONFIG.format(corpus=corpus, root=root, max_steps=30))
    absurd = ("--model.lr_scale", "1e30", "--model.max_nonfinite_steps", "3")
    return fit_process(config, *TWO_PROCESSES, *absurd)


def test_nonfinite_losses_under_ddp_skip_together_then_stop_with_one_line(launched):
    """An absurd learning rate makes every loss NaN after the first update: both ranks skip
    the same batches (no hang, no Lightning error about skipping under DDP) and fit stops with
    its one-line message after max_nonfinite_steps."""
    done = launched["nonfinite"]
    assert done.returncode == 2, done.stderr[-3000:]
    last_line = done.stderr.strip().splitlines()[-1]
    assert last_line.startswith("seq2seq fit: error: the training loss was not finite")
    assert "for 3 batches in a row" in last_line
