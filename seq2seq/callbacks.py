"""The Lightning callbacks (and the checkpoint writer) that ``seq2seq fit`` adds to a run:

* ``ThroughputMonitor``: training tokens per second in the progress bar and the logs;
* ``BestAndLastCheckpoint``: the best model by validation BLEU, an always-recent
  ``last.ckpt`` for ``--ckpt_path last``, and one run per checkpoint directory;
* ``AtomicCheckpointIO``: checkpoints written whole or not at all.

The checkpoint format itself is ``seq2seq.checkpoint``'s (plain PyTorch).
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO

from seq2seq.checkpoint import atomic_save
from seq2seq.errors import CheckpointDirInUse

LOCK_NAME = ".run.lock"


class ThroughputMonitor(L.Callback):
    """Logs non-pad source+target tokens per second of training (progress bar and logger)."""

    def __init__(self, window: int = 10) -> None:
        self.window = window
        self._tokens = 0
        self._start: float | None = None
        self._steps = 0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        if self._start is None:
            self._start = time.perf_counter()

    def on_validation_start(self, trainer, pl_module) -> None:
        # Validation time is not training time: restart the window afterwards.
        self._tokens, self._steps, self._start = 0, 0, None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        self._tokens += int(batch.n_src_tokens) + int(batch.n_tgt_tokens)
        self._steps += 1
        if self._steps >= self.window and self._start is not None:
            elapsed = time.perf_counter() - self._start
            rate = self._tokens * trainer.world_size / max(elapsed, 1e-9)
            pl_module.log("tok_per_s", rate, prog_bar=True, rank_zero_only=True)
            self._tokens, self._steps, self._start = 0, 0, time.perf_counter()


class AtomicCheckpointIO(TorchCheckpointIO):
    """Writes a checkpoint to a temporary file beside it, then renames it into place
    (``seq2seq.checkpoint.atomic_save``).

    A kill during a save leaves the previous file whole. Lightning's own writer stages the
    bytes in the system temporary directory and moves them, which is a copy (interruptible)
    whenever that directory is on another filesystem, e.g. a tmpfs /tmp. Remote paths
    (``s3://`` ...) keep Lightning's writer.
    """

    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        if "://" in str(path) or storage_options is not None:
            return super().save_checkpoint(checkpoint, path, storage_options)
        atomic_save(checkpoint, path)


class BestAndLastCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` that also keeps ``last.ckpt`` up to date between validations.

    Lightning's ``ModelCheckpoint`` with a ``monitor`` writes ``last.ckpt`` only when it
    considers the best model, i.e. after a validation. A run that ends at ``max_steps`` (or is
    killed) between two validations would leave ``last.ckpt`` behind the real end of training,
    and ``--ckpt_path last`` would resume from the past. This one also writes it every
    ``last_every_n_train_steps`` optimizer steps and when training ends.

    It also keeps two runs from overwriting each other's checkpoints: a new run (not resuming
    with ``--ckpt_path``) refuses a directory that already holds checkpoints unless
    ``overwrite`` is set, and no run starts in a directory that a live run on this machine
    holds (a lock file with its process id; a lock left by a killed run is ignored).

    Args:
        last_every_n_train_steps: refresh ``last.ckpt`` this often (0 = only at validation and
            at the end of training).
        overwrite: let a new run write into a directory that already holds checkpoints.
        **kwargs: ``ModelCheckpoint``'s own arguments.
    """

    def __init__(
        self, last_every_n_train_steps: int = 100, overwrite: bool = False, **kwargs
    ) -> None:
        super().__init__(**kwargs)
        self.overwrite = overwrite
        if overwrite:
            # Really overwrite: Lightning would otherwise write last-v1.ckpt beside the old
            # last.ckpt, and --ckpt_path last could later pick either.
            self._enable_version_counter = False
        if last_every_n_train_steps < 0:
            raise ValueError(
                f"last_every_n_train_steps must be >= 0, got {last_every_n_train_steps}"
            )
        self.last_every_n_train_steps = last_every_n_train_steps
        self._step_in_last = -1  # the global step that last.ckpt holds

    def on_train_start(self, trainer, pl_module) -> None:
        super().on_train_start(trainer, pl_module)
        # Here, not in setup(): only now is trainer.ckpt_path (a resume) known. Rank 0 decides
        # for every rank: a rank that raised alone would leave the others hanging.
        problem = None
        if trainer.is_global_zero:
            problem = self._clobber_problem(trainer) or self._take_lock()
        problem = trainer.strategy.broadcast(problem)
        if problem:
            raise CheckpointDirInUse(problem)

    def teardown(self, trainer, pl_module, stage: str) -> None:
        self._release(trainer)

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        super().on_exception(trainer, pl_module, exception)
        self._release(trainer)

    def _lock_path(self) -> Path:
        return Path(self.dirpath) / LOCK_NAME

    def _take_lock(self) -> str | None:
        """Create the lock atomically (a hard link of a written file fails if a lock exists),
        so of two runs starting at once only one gets the directory; None = taken."""
        lock = self._lock_path()
        lock.parent.mkdir(parents=True, exist_ok=True)
        mine = lock.with_name(f"{LOCK_NAME}.{os.getpid()}")
        mine.write_text(f"{socket.gethostname()} {os.getpid()}\n")
        try:
            for _ in range(2):
                try:
                    os.link(mine, lock)
                    return None
                except FileExistsError:
                    owner = _lock_owner(lock)
                    if owner is not None and owner != os.getpid():
                        return self._in_use(owner)
                    lock.unlink(missing_ok=True)  # a killed run's lock, or this process's
            return f"{lock}: could not take the lock; is another run starting here?"
        finally:
            mine.unlink(missing_ok=True)

    def _in_use(self, owner: int) -> str:
        return (
            f"{self.dirpath} is in use by another training run (process {owner}, see "
            f"{LOCK_NAME} there); give this run its own checkpoint.dirpath"
        )

    def _release(self, trainer) -> None:
        if trainer.is_global_zero and _lock_owner(self._lock_path()) == os.getpid():
            self._lock_path().unlink(missing_ok=True)

    def _clobber_problem(self, trainer) -> str | None:
        directory = Path(self.dirpath)
        owner = _lock_owner(directory / LOCK_NAME)
        if owner is not None and owner != os.getpid():
            return self._in_use(owner)
        existing = sorted(p.name for p in directory.glob("*.ckpt")) if directory.is_dir() else []
        if existing and not self.overwrite and trainer.ckpt_path is None:
            return (
                f"{directory} already holds checkpoints of another run ({', '.join(existing[:3])}"
                f"{', ...' if len(existing) > 3 else ''}): resume it with --ckpt_path last, "
                "choose another checkpoint.dirpath, or pass --checkpoint.overwrite true"
            )
        return None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        every = self.last_every_n_train_steps
        # Save the final step here, not in on_train_end: by then the fit loop has marked the
        # epoch finished, and a resume would skip the rest of a half-done epoch.
        final = trainer.should_stop or 0 < trainer.max_steps <= trainer.global_step
        if final or (every and trainer.global_step % every == 0):
            self._refresh_last(trainer)

    def on_train_end(self, trainer, pl_module) -> None:
        self._refresh_last(trainer)  # only if nothing above saved this step (e.g. max_epochs)

    def _refresh_last(self, trainer) -> None:
        if not self.save_last or trainer.global_step == 0 or trainer.sanity_checking:
            return
        if self._step_in_last == trainer.global_step:
            return
        # ModelCheckpoint skips a validation's best-model check at a step it already saved;
        # refreshing last.ckpt must not count as that save, or the validation that follows
        # at this step (the final one, say) would never be considered for the best.
        saved_step, saved_path = self._last_global_step_saved, self._last_checkpoint_saved
        self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))
        self._last_global_step_saved, self._last_checkpoint_saved = saved_step, saved_path

    def _save_last_checkpoint(self, trainer, monitor_candidates) -> None:
        super()._save_last_checkpoint(trainer, monitor_candidates)
        self._step_in_last = trainer.global_step


def _lock_owner(lock: Path) -> int | None:
    """The process id holding ``lock`` if that process is alive on this machine, else None."""
    try:
        host, pid = lock.read_text().split()
        pid = int(pid)
    except (OSError, ValueError):
        return None
    if host != socket.gethostname():
        return None  # cannot check another machine's processes: treat as stale
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None  # the run that wrote it is gone (killed): resuming is fine
    except PermissionError:
        pass  # alive, owned by another user
    return pid
