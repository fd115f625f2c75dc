"""End to end through ``seq2seq fit``: what a run writes (checkpoints, metrics, logs), resuming
it, refusing to clobber another run, and one-line errors. The small run that the end-to-end tests
share is conftest's ``run``."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
import torch

from seq2seq.cli import main
from seq2seq.inference.checkpoint import read_checkpoint
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.translator import Translator
from tests.helpers import fit, fit_process, write_config

pytestmark = pytest.mark.slow


def metrics(root: Path) -> list[dict[str, str]]:
    (path,) = root.glob("logs/version_*/metrics.csv")
    with open(path) as f:
        return list(csv.DictReader(f))


def column(rows: list[dict[str, str]], name: str) -> list[float]:
    return [float(r[name]) for r in rows if r.get(name)]


def test_fit_writes_checkpoints_and_metrics(run):
    names = {p.name for p in (run / "checkpoints").iterdir()}
    assert "last.ckpt" in names
    assert {"step00010.ckpt", "step00020.ckpt", "step00030.ckpt"} <= names
    assert any(n.startswith("best-") for n in names)
    rows = metrics(run)
    losses = column(rows, "train_loss")
    assert losses[-1] < losses[0] - 1.0, losses  # it learns
    for name in ("val_loss", "val_bleu", "val_ppl", "tok_per_s", "lr-AdamW"):
        assert column(rows, name), f"{name} never logged"
    assert all(rate > 0 for rate in column(rows, "tok_per_s"))


def test_every_validation_is_considered_for_the_best_checkpoint(corpus, tmp_path):
    """Validations at 10 and 20 fall on steps where last.ckpt is also refreshed (every 10,
    and the final step): each still gets its best-by-BLEU check (save_top_k -1 keeps all)."""
    fit(
        tmp_path,
        corpus,
        20,
        "--checkpoint.save_top_k",
        "-1",
        "--checkpoint.last_every_n_train_steps",
        "10",
    )
    names = sorted(p.name for p in (tmp_path / "checkpoints").glob("best-*"))
    assert [n.split("-bleu")[0] for n in names] == ["best-step10", "best-step20"], names
    assert read_checkpoint(tmp_path / "checkpoints" / "last.ckpt")["global_step"] == 20


def test_tensorboard_logs_beside_csv_when_installed(run):
    pytest.importorskip("tensorboard")
    (version,) = run.glob("logs/version_*")
    assert (version / "metrics.csv").is_file()
    assert list(version.glob("events.out.tfevents.*"))


def test_logged_learning_rate_follows_the_paper_schedule(run):
    from seq2seq.training.schedule import inverse_sqrt_schedule

    rows = [r for r in metrics(run) if r.get("lr-AdamW")]
    for row in rows:
        step = int(row["step"])  # the rate used for the update after `step` updates
        assert float(row["lr-AdamW"]) == pytest.approx(inverse_sqrt_schedule(step + 1, 32, 10, 0.5))


def test_checkpoint_is_self_contained(run, tmp_path):
    checkpoint = read_checkpoint(run / "checkpoints" / "last.ckpt")
    section = checkpoint["seq2seq"]
    assert section["model_config"]["vocab_size"] == 556
    assert section["tokenizer"][:2] and len(section["tokenizer"]) > 1000
    # Nothing else is needed: move the data cache away and translate.
    (run / "cache").rename(tmp_path / "cache")
    try:
        translator = Translator.from_checkpoint(run / "checkpoints" / "last.ckpt")
        (out,) = translator.translate(["I will buy apples today."], TranslateOptions(beam_size=2))
        assert out and "\n" not in out
    finally:
        (tmp_path / "cache").rename(run / "cache")


def test_resume_from_last_continues_exactly(run, corpus, tmp_path_factory):
    """25 steps + resume to 40 == 40 steps straight (dropout 0, same seed), with training-time
    modifiers on (the modified pairs and their term annotations follow from the seed).

    25 is between two validations (every 10 steps): last.ckpt must still hold step 25, and
    resuming it mid-epoch must replay the same data order."""
    modifiers = ("--data.modifiers", '{"uppercase": 0.2, "no_end_punctuation": 0.3, "terms": 0.3}')
    straight = tmp_path_factory.mktemp("straight")
    fit(straight, corpus, 40, *modifiers)
    resumed = tmp_path_factory.mktemp("resumed")
    fit(resumed, corpus, 25, *modifiers)
    assert read_checkpoint(resumed / "checkpoints" / "last.ckpt")["global_step"] == 25
    fit(resumed, corpus, 40, "--ckpt_path", "last", *modifiers)
    a = read_checkpoint(straight / "checkpoints" / "last.ckpt")
    b = read_checkpoint(resumed / "checkpoints" / "last.ckpt")
    assert a["global_step"] == b["global_step"] == 40
    for key, value in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][key], value, rtol=1e-5, atol=1e-6)
    # The checkpoint records the modifiers, and its vocabulary holds the term tags.
    assert b["datamodule_hyper_parameters"]["modifiers"]["terms"] == 0.3
    assert b["seq2seq"]["truecase"]["i"] == "I"  # the truecaser's forms are stored


def test_fit_config_errors_are_one_line(run, corpus, tmp_path, capsys):
    config = write_config(tmp_path, corpus, 5)
    bad = {
        ("--model.config.n_heads", "3"): "d_model (32) must be divisible by n_heads (3)",
        ("--model.config.d_model", "wide"): "model.config.d_model",  # wrong type
        ("--model.config.colour", "blue"): "error: unknown option --model.config.colour",
        ("--model.warmup_step", "3"): "did you mean --model.warmup_steps?",  # no abbreviations
    }
    for extra, problem in bad.items():
        try:
            code = main(["fit", "--config", config, *extra])
        except SystemExit as exit:  # jsonargparse's own parse errors
            code = exit.code
        err = capsys.readouterr().err
        assert code == 2 and problem in err and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1, err  # not the usage of every option


def test_a_new_run_refuses_a_directory_with_checkpoints(run, corpus, tmp_path, capsys):
    import shutil

    shutil.copytree(run / "checkpoints", tmp_path / "checkpoints")  # another run's files
    last = tmp_path / "checkpoints" / "last.ckpt"
    before = last.read_bytes()
    assert main(["fit", "--config", write_config(tmp_path, corpus, 12)]) == 2
    (error,) = capsys.readouterr().err.strip().splitlines()[-1:]
    assert error.startswith("seq2seq fit: error: ") and str(tmp_path / "checkpoints") in error
    assert "already holds checkpoints" in error and "--checkpoint.overwrite true" in error
    assert last.read_bytes() == before  # nothing was overwritten


def test_overwrite_is_explicit_and_a_live_run_is_never_clobbered(corpus, tmp_path, capsys):
    import os
    import socket
    import subprocess

    config = write_config(tmp_path, corpus, 5)
    assert main(["fit", "--config", config]) == 0
    assert main(["fit", "--config", config, "--checkpoint.overwrite", "true"]) == 0
    lock = tmp_path / "checkpoints" / ".run.lock"
    assert not lock.exists()  # released when the run ended
    # A lock left by a process that is gone (a killed run) does not block a resume.
    gone = subprocess.Popen(["true"])
    gone.wait()
    lock.write_text(f"{socket.gethostname()} {gone.pid}\n")
    assert main(["fit", "--config", write_config(tmp_path, corpus, 8), "--ckpt_path", "last"]) == 0
    assert read_checkpoint(tmp_path / "checkpoints" / "last.ckpt")["global_step"] == 8
    # A live one blocks even overwrite and resume.
    lock.write_text(f"{socket.gethostname()} {os.getppid()}\n")
    capsys.readouterr()
    longer = write_config(tmp_path, corpus, 11)  # a resume that would train and save
    argv = ["fit", "--config", longer, "--checkpoint.overwrite", "true", "--ckpt_path", "last"]
    assert main(argv) == 2
    assert (
        f"in use by another training run (process {os.getppid()}, see .run.lock"
        in capsys.readouterr().err
    )


def test_fit_data_errors_are_one_line_naming_file_and_line(tmp_path, capsys):
    good = "I will buy tea.\t我会买茶。\n"
    (tmp_path / "en.txt").write_text("One.\nTwo.\nThree.\n", encoding="utf-8")
    (tmp_path / "zh.txt").write_text("一。\n二。\n", encoding="utf-8")
    files = {
        "fields.tsv": good * 3 + "He can cook.\t他会做饭。\textra\n",
        "broken.jsonl": '{"en": "Hi.", "zh": "嗨。"}\n{"en": "Hi.", \n',
        "empty.tsv": "\n\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    cases = {
        ("tsv", "fields.tsv"): "fields.tsv:4: expected 2 tab-separated fields, found 3",
        ("jsonl", "broken.jsonl"): "broken.jsonl:2: not valid JSON",
        ("tsv", "empty.tsv"): "empty.tsv: corpus is empty",
        ("tsv", "missing.tsv"): "missing.tsv: file not found",
        ("text", "en.txt"): "zh.txt:3: file ends here but",
    }
    for (kind, name), problem in cases.items():
        extra = ["--data.tgt_path", str(tmp_path / "zh.txt")] if kind == "text" else []
        config = write_config(tmp_path, tmp_path / name, 5)
        code = main(["fit", "--config", config, "--data.corpus", kind, *extra])
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if "error" in line.lower()]  # not INFO lines
        assert code == 2 and "Traceback" not in err, err
        assert len(errors) == 1 and problem in errors[0], err


def test_fit_log_is_clean_and_says_when_max_time_stopped_it(corpus, tmp_path):
    """A real ``seq2seq fit`` process whose time budget ends it long before max_steps: one
    plain line says where it stopped and the rate of its last update; the log holds no product
    tips and no deprecation warnings."""
    import subprocess

    config = write_config(tmp_path, corpus, max_steps=100_000)
    limits = ("--trainer.max_time", "00:00:00:03", "--model.cooldown_steps", "1000")
    command = fit_process(config, *limits)
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    log = done.stdout + done.stderr
    (line,) = [x for x in log.splitlines() if "stopped by max_time" in x]
    assert re.fullmatch(
        r"stopped by max_time \(0:00:\d\d\) at step \d+/100000; learning rate of the last "
        r"update \S+ \(peak \S+; the cooldown reaches 0 at max_time\)",
        line,
    ), line
    assert "💡" not in log and "Tip:" not in log
    assert "deprecated" not in log.lower(), [x for x in log.splitlines() if "deprecat" in x]
