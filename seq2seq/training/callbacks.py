"""The Lightning callbacks (and the checkpoint writer) that ``seq2seq fit`` adds to a run:

* ``ThroughputMonitor``: training tokens per second in the progress bar and the logs;
* ``BestAndLastCheckpoint``: the best model by validation BLEU, an always-recent
  ``last.ckpt`` for ``--ckpt_path last``, and one run per checkpoint directory;
* ``AtomicCheckpointIO``: checkpoints written whole or not at all;
* ``SignalStop``: SIGINT (Ctrl+C) and SIGTERM stop ``fit`` at the end of an optimizer step,
  after ``BestAndLastCheckpoint`` has saved ``last.ckpt`` (``Interrupted``).

The checkpoint format itself is ``seq2seq.inference.checkpoint``'s (plain PyTorch).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import lightning as L
import torch
from lightning.fabric.plugins.environments import SLURMEnvironment
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.trainer.states import TrainerFn

from seq2seq.errors import CheckpointDirInUse
from seq2seq.inference.checkpoint import atomic_save

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
    (``seq2seq.inference.checkpoint.atomic_save``).

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

    And it ends an interrupted run (SIGINT, SIGTERM: see ``SignalStop``) in a resumable state:
    at the end of the optimizer step in progress (or of the validation in progress), every rank
    agreeing, it writes ``last.ckpt`` and raises ``Interrupted``. No validation starts after a
    signal: stopping through ``trainer.should_stop`` would run one first.

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
        self.signals = SignalStop()  # seq2seq fit catches SIGINT/SIGTERM with it
        self._step_checked = -1  # the last global step whose end was checked for a signal

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
        self._step_checked = trainer.global_step
        self.signals.training = True  # from now on a signal waits for the end of a step

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
        if trainer.global_step != self._step_checked:  # an update ended, not a micro-batch of one
            self._step_checked = trainer.global_step
            self._stop_if_interrupted(trainer)

    def on_validation_end(self, trainer, pl_module) -> None:
        super().on_validation_end(trainer, pl_module)  # the best checkpoint, and last.ckpt
        if trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking:
            self._stop_if_interrupted(trainer)  # a signal that came during the validation

    def on_train_end(self, trainer, pl_module) -> None:
        self._refresh_last(trainer)  # only if nothing above saved this step (e.g. max_epochs)

    def _stop_if_interrupted(self, trainer) -> None:
        """If any rank received SIGINT/SIGTERM: save ``last.ckpt`` at this step and stop.

        Every rank calls this at the same points (the decision is a collective), so they all
        stop at the same step and none is left waiting for the others."""
        signum = self.signals.received_anywhere(trainer)
        if not signum:
            return
        self._refresh_last(trainer)
        saved = self.last_model_path if self._step_in_last == trainer.global_step else None
        raise Interrupted(signum, trainer.global_step, saved, report=trainer.is_global_zero)

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


class Interrupted(BaseException):
    """``fit`` stopped by a signal (SIGINT, SIGTERM), ``last.ckpt`` saved if training had begun.

    A BaseException, as KeyboardInterrupt is: no ``except Exception`` on the way out may take
    it for an error.

    Args:
        signum: the signal.
        step: the global step ``last.ckpt`` holds; None if training had not started.
        path: the ``last.ckpt`` written (None: nothing saved).
        report: whether this process tells the user (rank 0 does; the other ranks keep quiet).
    """

    def __init__(
        self, signum: int, step: int | None = None, path: str | None = None, report: bool = True
    ) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum, self.step, self.path, self.report = signum, step, path, report


class SignalStop:
    """SIGINT (Ctrl+C) and SIGTERM during ``seq2seq fit``: stop where the run can resume exactly.

    While training runs, the first signal is only noted (one line on stderr says so): the run
    finishes the optimizer step in progress, or the validation in progress, then
    ``BestAndLastCheckpoint`` writes ``last.ckpt`` and raises ``Interrupted``. Before training
    starts there is nothing to save, so the signal stops the run at once. A second signal always
    quits at once, without saving.

    Under DDP every rank notes its own signals and the ranks decide together at the end of each
    step (``received_anywhere``), so a signal to any one rank stops them all at the same step.
    """

    def __init__(self) -> None:
        self.signum = 0  # the first signal this process received (0: none yet)
        self.training = False  # set by BestAndLastCheckpoint when training starts
        self._trainer = None
        self._pid = os.getpid()

    @contextlib.contextmanager
    def caught(self, trainer) -> Iterator[None]:
        """Handle SIGINT and SIGTERM while the block (``trainer.fit``) runs, then put back the
        handlers that were there. Under SLURM auto-requeue, SIGTERM stays Lightning's."""
        if threading.current_thread() is not threading.main_thread():
            yield  # only the main thread may set signal handlers
            return
        self._trainer, self._pid = trainer, os.getpid()
        signals = [signal.SIGINT]
        if not lightning_requeues(trainer):
            signals.append(signal.SIGTERM)
        previous = {number: signal.signal(number, self._handle) for number in signals}
        try:
            yield
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

    def received_anywhere(self, trainer) -> int:
        """The signal that any rank received (0: none). A collective: every rank must call it
        at the same point of the run."""
        if trainer.world_size == 1:
            return self.signum  # no collective, and no device round trip every step
        mine = torch.tensor(self.signum, device=trainer.strategy.root_device)
        return int(trainer.strategy.reduce(mine, reduce_op="max"))

    def _handle(self, signum: int, frame) -> None:
        if os.getpid() != self._pid:
            return  # a forked DataLoader worker: its main process ends it when it stops
        if self.signum:
            self._quit_now(signum)
        self.signum = signum
        trainer = self._trainer
        if not self.training:
            self._end_launched_ranks()
            raise Interrupted(signum, report=trainer.is_global_zero)
        if trainer.is_global_zero:
            name = signal.Signals(signum).name
            what = "the validation" if trainer.validating else "this step"
            again = "Ctrl+C" if signum == signal.SIGINT else name
            _say(
                f"seq2seq fit: {name}: finishing {what}, then saving last.ckpt and stopping "
                f"({again} again quits at once, without saving)"
            )

    def _quit_now(self, signum: int) -> None:
        """A second signal: end this process, and the ranks it launched, at once."""
        if self._trainer.is_global_zero:
            _say(f"seq2seq fit: {signal.Signals(signum).name} again: quitting without saving")
        self._end_launched_ranks()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # die of the signal, as a shell expects of Ctrl+C
        os._exit(128 + signum)  # (only if the signal did not end the process)

    def _end_launched_ranks(self) -> None:
        """Kill the ranks that Lightning's launcher started from this process (if it is their
        rank 0): they cannot go on without it, and would wait for it until a timeout."""
        launcher = self._trainer.strategy.launcher
        if launcher is not None:
            launcher.kill(signal.SIGKILL)


def lightning_requeues(trainer) -> bool:
    """Whether Lightning runs SLURM's auto-requeue here: on SIGUSR1 it saves an hpc checkpoint
    and requeues the job, and it handles SIGTERM itself (the requeue sends one), so SIGTERM is
    left to it. The same test as Lightning's ``_SignalConnector``."""
    environment = trainer._accelerator_connector.cluster_environment
    return isinstance(environment, SLURMEnvironment) and environment.auto_requeue


def _say(line: str) -> None:
    """One line on stderr from a signal handler, written straight to the file descriptor: the
    handler may have interrupted a write to ``sys.stderr``, which cannot be re-entered."""
    os.write(2, (line + "\n").encode())


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
