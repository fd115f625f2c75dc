"""Interrupting ``seq2seq fit`` with real signals (Ctrl+C, SIGTERM) and resuming it, and fit's
one-line command-line errors: mistyped and abbreviated options, ``--ckpt_path last`` with
nothing to resume, a corpus that cannot be read. The uninterrupted run compared against is
conftest's ``run`` (30 steps of helpers.CONFIG)."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from seq2seq.cli import main
from seq2seq.inference.checkpoint import read_checkpoint
from seq2seq.training.lightning_cli import resume_argv  # imports Lightning now, see below
from tests.helpers import write_config

# Imported at collection, Lightning's log handler writes to pytest's session-long stderr, not
# to the first test's capsys stream (closed after that test: "Logging error" in later ones).

pytestmark = pytest.mark.slow
INTERRUPTED = re.compile(
    r"seq2seq fit: interrupted \((SIG\w+)\) at step (\d+); saved (\S+); resume with: (.+)"
)


def start_fit(root: Path, corpus: Path) -> tuple[subprocess.Popen, list[str]]:
    """A real ``seq2seq fit`` process of 30 steps whose last.ckpt appears at step 2 (so a test
    can tell that training is under way); its stderr goes to root/stderr.txt."""
    argv = [
        "fit",
        "--config",
        write_config(root, corpus, 30),
        "--checkpoint.last_every_n_train_steps",
        "2",
    ]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    with open(root / "stderr.txt", "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "seq2seq", *argv],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    return process, argv


def wait_until(condition, process: subprocess.Popen, root: Path, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, (root / "stderr.txt").read_text()[-3000:]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def assert_same_training_state(a: dict, b: dict) -> None:
    """Weights, Adam's moments and the schedule of two checkpoints agree."""
    assert a["global_step"] == b["global_step"]
    for key, value in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][key], value, rtol=1e-5, atol=1e-6)
    (adam_a,), (adam_b,) = a["optimizer_states"], b["optimizer_states"]
    for x, y in zip(adam_a["state"].values(), adam_b["state"].values(), strict=True):
        for name in ("step", "exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(y[name], x[name], rtol=1e-5, atol=1e-8)
    assert adam_a["param_groups"][0]["lr"] == adam_b["param_groups"][0]["lr"]
    assert a["lr_schedulers"] == b["lr_schedulers"]


def test_ctrl_c_saves_last_ckpt_and_the_printed_command_resumes_exactly(run, corpus, tmp_path):
    """SIGINT: the run finishes its step, saves last.ckpt at it, says so in one line with the
    command that resumes, and exits 130; that command ends where an uninterrupted run of the same
    30 steps ends (weights, optimizer and schedule). SIGTERM, the same code, is sent to a DDP run
    in test_commands_ddp.py."""
    signum = signal.SIGINT
    process, argv = start_fit(tmp_path, corpus)
    last = tmp_path / "checkpoints" / "last.ckpt"
    wait_until(last.exists, process, tmp_path)
    process.send_signal(signum)
    assert process.wait(timeout=300) == 128 + signum
    err = (tmp_path / "stderr.txt").read_text()
    assert "Traceback" not in err and "graceful shutdown" not in err, err
    lines = err.strip().splitlines()
    name = signal.Signals(signum).name
    notices = [line for line in lines if line.startswith(f"seq2seq fit: {name}: finishing")]
    assert len(notices) == 1 and "again quits at once" in notices[0], err
    stopped = INTERRUPTED.fullmatch(lines[-1])
    assert stopped, lines[-1]
    step = int(stopped[2])
    assert stopped[1] == name and 2 <= step < 30
    assert Path(stopped[3]) == last.resolve()
    assert read_checkpoint(last)["global_step"] == step
    assert not (tmp_path / "checkpoints" / ".run.lock").exists()

    resume = shlex.split(stopped[4])
    assert resume == ["seq2seq", *argv, "--ckpt_path", "last"]
    assert main(resume[1:]) == 0
    assert_same_training_state(
        read_checkpoint(run / "checkpoints" / "last.ckpt"), read_checkpoint(last)
    )


def test_ckpt_path_last_with_nothing_to_resume_is_a_one_line_error(corpus, tmp_path, capsys):
    config = write_config(tmp_path, corpus, 5)
    assert main(["fit", "--config", config, "--ckpt_path", "last"]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error" in line.lower() or "HINT" in line]
    assert errors == [
        f"seq2seq fit: error: --ckpt_path last: nothing to resume (no last.ckpt in "
        f"{tmp_path / 'checkpoints'}); leave out --ckpt_path to start a new run"
    ], err
    assert not (tmp_path / "checkpoints" / "last.ckpt").exists()  # it did not start over


def one_line_error(argv: list[str], capsys) -> str:
    try:
        code = main(argv)
    except SystemExit as exit:  # an error that escaped as jsonargparse's usage dump
        code = exit.code
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    return err.strip()


def test_mistyped_and_abbreviated_options_are_one_line_errors(corpus, tmp_path, capsys):
    config = write_config(tmp_path, corpus, 5)
    cases = {
        # a prefix of --model.warmup_steps: argparse would have taken it for that option
        ("fit", "--model.warmup_step", "100"): "unknown option --model.warmup_step; "
        "did you mean --model.warmup_steps?",
        ("fit", "--trianer.max_steps", "3"): "unknown option --trianer.max_steps; "
        "did you mean --trainer.max_steps?",
        ("fit", "--data.max_token=300"): "unknown option --data.max_token; "
        "did you mean --data.max_tokens?",
        ("validate", "--model.warmup_step", "100"): "unknown option --model.warmup_step; "
        "did you mean --model.warmup_steps?",
    }
    for (command, *extra), problem in cases.items():
        line = one_line_error([command, "--config", config, *extra], capsys)
        assert line == f"seq2seq {command}: error: {problem}"
    line = one_line_error(["fit", "--config", config, "--model.config.colour", "blue"], capsys)
    assert line == "seq2seq fit: error: unknown option --model.config.colour"  # nothing alike


def test_help_and_print_config_still_work(corpus, tmp_path, capsys):
    config = write_config(tmp_path, corpus, 5)
    for extra, expected in (
        (["--help"], "--model.warmup_steps"),
        (["--print_config"], "warmup_steps: 10"),
    ):
        with pytest.raises(SystemExit) as exit:
            main(["fit", "--config", config, *extra])
        assert exit.value.code == 0 and expected in capsys.readouterr().out


def test_fit_on_a_corpus_it_cannot_read_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "folder.tsv").mkdir()  # readable by root too, unlike a chmod 000 file
    cases = {tmp_path / "folder.tsv": "folder.tsv: is a directory, not a file"}
    if os.geteuid() != 0:  # root reads a file whatever its mode
        locked = tmp_path / "locked.tsv"
        locked.write_text("I will buy tea.\t我会买茶。\n" * 3, encoding="utf-8")
        locked.chmod(0)
        cases[locked] = "locked.tsv: file not readable (permission denied)"
    for path, problem in cases.items():
        code = main(["fit", "--config", write_config(tmp_path, path, 5)])
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if "error" in line.lower()]
        assert code == 2 and "Traceback" not in err, err
        assert len(errors) == 1 and problem in errors[0], err


def test_resume_argv_replaces_a_given_ckpt_path():
    assert resume_argv(["fit", "-c", "a.yaml"]) == ["fit", "-c", "a.yaml", "--ckpt_path", "last"]
    for given in (["--ckpt_path", "x.ckpt"], ["--ckpt_path=x.ckpt"], ["--ckpt_path", "last"]):
        assert resume_argv(["fit", *given, "-c", "a.yaml"]) == [
            "fit",
            "-c",
            "a.yaml",
            "--ckpt_path",
            "last",
        ]


def test_ctrl_c_before_training_starts_stops_at_once(corpus, tmp_path, capsys, monkeypatch):
    """Nothing to save yet (the data is being prepared): one line, exit 130, no checkpoint."""
    from seq2seq.data.datamodule import TranslationDataModule

    def interrupted_preparation(self):
        os.kill(os.getpid(), signal.SIGINT)  # handled by fit's handler, in this process
        time.sleep(5)  # the handler stops the run before this ends

    monkeypatch.setattr(TranslationDataModule, "prepare_data", interrupted_preparation)
    before = signal.getsignal(signal.SIGINT)
    assert main(["fit", "--config", write_config(tmp_path, corpus, 5)]) == 130
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1:] == [
        "seq2seq fit: interrupted (SIGINT) before training started; nothing to save"
    ], err
    assert signal.getsignal(signal.SIGINT) is before  # fit's handlers are gone with it
    assert not (tmp_path / "checkpoints" / "last.ckpt").exists()
