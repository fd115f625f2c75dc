"""The Lightning callbacks (callbacks.py): a kill in the middle of a checkpoint save never leaves
a truncated file behind, and the run lock is taken atomically and only once."""

import random
import subprocess
import sys
import time

import pytest
import torch

# Saves a 16 MB checkpoint over and over, through the CheckpointIO that seq2seq fit gives its
# Trainer (a temporary file beside the checkpoint, then a rename), printing each finished step.
SAVER = """
import sys, torch

io = None
if sys.argv[2] == "atomic":
    from seq2seq.callbacks import AtomicCheckpointIO

    io = AtomicCheckpointIO()
state = {"weights": torch.randn(4_000_000), "step": 0}
for step in range(1_000_000):
    state["step"] = step
    if io is None:
        torch.save(state, sys.argv[1])  # a plain, non-atomic write, for contrast
    else:
        io.save_checkpoint(state, sys.argv[1])
    print(step, flush=True)
"""


def kill_during_saves(path, how: str, kills: int) -> list[str]:
    """SIGKILLs the saver at random moments; returns what loading the file said after each."""
    outcomes, rng = [], random.Random(0)
    for _ in range(kills):
        saver = subprocess.Popen(
            [sys.executable, "-c", SAVER, str(path), how], stdout=subprocess.PIPE, text=True
        )
        saver.stdout.readline()  # one complete save exists
        time.sleep(rng.uniform(0.0, 0.3))
        saver.kill()
        saver.wait()
        try:
            outcomes.append(f"step {torch.load(path, weights_only=True)['step']}")
        except Exception as error:  # noqa: BLE001 - any failure to load is the finding
            outcomes.append(f"broken: {type(error).__name__}")
    return outcomes


@pytest.mark.slow
def test_a_killed_save_leaves_the_previous_checkpoint_intact(tmp_path):
    from seq2seq.callbacks import AtomicCheckpointIO

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

    from seq2seq.callbacks import LOCK_NAME, BestAndLastCheckpoint

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
