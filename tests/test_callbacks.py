"""The Lightning callbacks (callbacks.py): a kill in the middle of a checkpoint save never leaves
a truncated file behind, the run lock is taken atomically and only once, and fit's signal
handling waits for the end of a step on the first Ctrl+C and quits on the second."""

import random
import subprocess
import sys
import time

import pytest
import torch


def save_forever(path: str, how: str, state: dict, saved) -> None:
    """Saves a 16 MB checkpoint over and over, through the CheckpointIO that seq2seq fit gives
    its Trainer (a temporary file beside the checkpoint, then a rename), or, for contrast,
    with a plain torch.save; ``saved`` is set once one save is complete."""
    from seq2seq.training.callbacks import AtomicCheckpointIO

    io = AtomicCheckpointIO() if how == "atomic" else None
    for step in range(1_000_000):
        state["step"] = step
        if io is None:
            torch.save(state, path)  # a plain, non-atomic write
        else:
            io.save_checkpoint(state, path)
        saved.set()


def kill_during_saves(path, how: str, kills: int) -> list[str]:
    """SIGKILLs the saver at random moments; returns what loading the file said after each.

    The savers are forked from this process, which has imported everything already: a fresh
    interpreter importing Lightning for each kill took a minute for the test's ten kills."""
    import multiprocessing

    from seq2seq.training.callbacks import AtomicCheckpointIO  # noqa: F401 (imported before the forks)

    fork = multiprocessing.get_context("fork")
    state = {"weights": torch.randn(4_000_000), "step": 0}
    outcomes, rng = [], random.Random(0)
    for _ in range(kills):
        saved = fork.Event()
        saver = fork.Process(target=save_forever, args=(str(path), how, state, saved), daemon=True)
        saver.start()
        assert saved.wait(60), "the saver never finished a save"
        time.sleep(rng.uniform(0.0, 0.3))
        saver.kill()
        saver.join()
        try:
            outcomes.append(f"step {torch.load(path, weights_only=True)['step']}")
        except Exception as error:  # noqa: BLE001 - any failure to load is the finding
            outcomes.append(f"broken: {type(error).__name__}")
    return outcomes


@pytest.mark.slow
def test_a_killed_save_leaves_the_previous_checkpoint_intact(tmp_path):
    from seq2seq.training.callbacks import AtomicCheckpointIO

    last = tmp_path / "last.ckpt"
    outcomes = kill_during_saves(last, "atomic", kills=6)
    assert all(o.startswith("step ") for o in outcomes), outcomes
    # A killed save may leave its temporary file; the next save clears it.
    assert {p.name for p in tmp_path.iterdir()} - {"last.ckpt"} <= {
        p.name for p in tmp_path.glob(".last.ckpt.tmp-*")
    }
    AtomicCheckpointIO().save_checkpoint({"step": -1}, last)
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]
    assert torch.load(last)["step"] == -1
    # The same kills against a plain torch.save do break the file: the test can tell.
    plain = kill_during_saves(tmp_path / "plain.ckpt", "plain", kills=4)
    assert any(o.startswith("broken") for o in plain), plain


def test_the_run_lock_is_taken_atomically_and_only_once(tmp_path):
    import os
    import socket

    from seq2seq.training.callbacks import LOCK_NAME, BestAndLastCheckpoint

    checkpoint = BestAndLastCheckpoint(dirpath=str(tmp_path / "ckpt"))
    lock = tmp_path / "ckpt" / LOCK_NAME
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        lock.parent.mkdir()
        lock.write_text(f"{socket.gethostname()} {other.pid}\n")  # a live run holds it
        assert "in use by another training run" in checkpoint._take_lock()
        assert lock.read_text().split()[1] == str(other.pid)  # not taken over
    finally:
        other.kill()
        other.wait()
    assert checkpoint._take_lock() is None  # its process is gone: a stale lock is replaced
    assert lock.read_text().split() == [socket.gethostname(), str(os.getpid())]
    assert sorted(p.name for p in lock.parent.iterdir()) == [LOCK_NAME]  # no temporary left


# A long optimizer step under SignalStop, as fit runs one: a real process, real signals.
LONG_STEP = """
import time
from types import SimpleNamespace

from seq2seq.training.callbacks import SignalStop

strategy = SimpleNamespace(launcher=None)
connector = SimpleNamespace(cluster_environment=None)
trainer = SimpleNamespace(is_global_zero=True, validating=False, strategy=strategy,
                          _accelerator_connector=connector)
stop = SignalStop()
stop.training = True
with stop.caught(trainer):
    print("training", flush=True)
    time.sleep(120)  # the step that the first signal lets finish
"""


def fake_trainer(environment=None):
    from types import SimpleNamespace

    return SimpleNamespace(
        is_global_zero=True,
        validating=False,
        strategy=SimpleNamespace(launcher=None),
        _accelerator_connector=SimpleNamespace(cluster_environment=environment),
    )


@pytest.mark.slow
def test_a_second_ctrl_c_quits_at_once(tmp_path):
    import signal

    process = subprocess.Popen(
        [sys.executable, "-c", LONG_STEP], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout.readline() == "training\n"
    process.send_signal(signal.SIGINT)
    notice = process.stderr.readline()
    assert notice.startswith("seq2seq fit: SIGINT: finishing this step, then saving last.ckpt")
    assert process.poll() is None  # the first one waits for the end of the step
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == -signal.SIGINT  # died of it, as a shell expects
    assert time.monotonic() - started < 10
    assert process.stderr.read() == "seq2seq fit: SIGINT again: quitting without saving\n"


def test_signal_stop_handles_sigint_and_sigterm_only_while_fit_runs():
    import signal

    from lightning.fabric.plugins.environments import SLURMEnvironment

    from seq2seq.training.callbacks import SignalStop

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    stop = SignalStop()
    with stop.caught(fake_trainer()):
        assert signal.getsignal(signal.SIGINT) == signal.getsignal(signal.SIGTERM) == stop._handle
    assert {s: signal.getsignal(s) for s in before} == before
    # Under SLURM auto-requeue, SIGTERM is Lightning's (the requeue sends one).
    with stop.caught(fake_trainer(SLURMEnvironment(auto_requeue=True))):
        assert signal.getsignal(signal.SIGINT) == stop._handle
        assert signal.getsignal(signal.SIGTERM) == before[signal.SIGTERM]
    assert {s: signal.getsignal(s) for s in before} == before
