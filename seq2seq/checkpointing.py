"""Checkpointing for ``seq2seq fit``: the best model by validation BLEU and an always-recent
``last.ckpt`` for ``--ckpt_path last``."""

from __future__ import annotations

from lightning.pytorch.callbacks import ModelCheckpoint


class BestAndLastCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` that also keeps ``last.ckpt`` up to date between validations.

    Lightning's ``ModelCheckpoint`` with a ``monitor`` writes ``last.ckpt`` only when it
    considers the best model, i.e. after a validation. A run that ends at ``max_steps`` (or is
    killed) between two validations would leave ``last.ckpt`` behind the real end of training,
    and ``--ckpt_path last`` would resume from the past. This one also writes it every
    ``last_every_n_train_steps`` optimizer steps and when training ends.

    Args:
        last_every_n_train_steps: refresh ``last.ckpt`` this often (0 = only at validation and
            at the end of training).
        **kwargs: ``ModelCheckpoint``'s own arguments.
    """

    def __init__(self, last_every_n_train_steps: int = 100, **kwargs) -> None:
        super().__init__(**kwargs)
        if last_every_n_train_steps < 0:
            raise ValueError(
                f"last_every_n_train_steps must be >= 0, got {last_every_n_train_steps}"
            )
        self.last_every_n_train_steps = last_every_n_train_steps
        self._step_in_last = -1  # the global step that last.ckpt holds

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
        if self._step_in_last != trainer.global_step:
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def _save_last_checkpoint(self, trainer, monitor_candidates) -> None:
        super()._save_last_checkpoint(trainer, monitor_candidates)
        self._step_in_last = trainer.global_step
