"""The resumable loader: batches of a token-budget sampler, with the state Lightning's fit
loop saves and restores to resume mid-epoch. Nothing here imports Lightning."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

from torch.utils.data import DataLoader

from seq2seq.data.batching import Batch, Example, collate
from seq2seq.data.sampler import TokenBatchSampler
from seq2seq.data.tokenizer import PAD_ID


class TokenBatchLoader:
    """A resumable iterable of :class:`Batch` over tokenized examples.

    It wraps a ``DataLoader`` built on a :class:`TokenBatchSampler` and adds what Lightning's
    fit loop needs to resume mid-epoch: ``state_dict``/``load_state_dict`` on the loader
    itself (Lightning only saves loaders that have them) counting batches *delivered*, which
    differs from the sampler's count once worker processes prefetch. ``sampler`` exposes the
    batch sampler because Lightning calls ``loader.sampler.set_epoch(epoch)`` each epoch.

    Being no ``DataLoader`` subclass is deliberate: Lightning would otherwise try to swap a
    ``DistributedSampler`` into it under DDP, which a token-budget sampler cannot take; this
    sampler shards batches itself.

    Args:
        examples: ``(src_ids, tgt_ids)`` pairs without specials.
        batch_sampler: Sampler over ``examples``' indices.
        pad_id: Padding id for :func:`collate`.
        num_workers: ``DataLoader`` worker processes (0 = collate in the main process).
        collate_fn: Builds a :class:`Batch` from examples (default: :func:`collate`).
    """

    def __init__(
        self,
        examples: Sequence[Example],
        batch_sampler: TokenBatchSampler,
        pad_id: int = PAD_ID,
        num_workers: int = 0,
        collate_fn: Any = None,
    ) -> None:
        self.dataset = examples
        self.batch_sampler = batch_sampler
        self._loader = DataLoader(
            examples,
            batch_sampler=batch_sampler,
            collate_fn=collate_fn or partial(collate, pad_id=pad_id),
            num_workers=num_workers,
            persistent_workers=num_workers > 0,
        )
        self._yielded = 0
        self._yielded_epoch = batch_sampler.epoch

    @property
    def sampler(self) -> TokenBatchSampler:
        """The batch sampler, under the name Lightning looks up to call ``set_epoch``."""
        return self.batch_sampler

    def set_epoch(self, epoch: int) -> None:
        """See :meth:`TokenBatchSampler.set_epoch`."""
        self.batch_sampler.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __iter__(self) -> Iterator[Batch]:
        # Read the resume position before the DataLoader's iterator consumes it.
        self._yielded = self.batch_sampler.resume_position
        self._yielded_epoch = self.batch_sampler.epoch
        for batch in self._loader:
            self._yielded += 1
            yield batch

    def state_dict(self) -> dict[str, int]:
        """``{"epoch", "batches_yielded"}``, counting batches this loader has delivered."""
        epoch = self.batch_sampler.epoch
        # After set_epoch(e + 1) but before iterating, nothing of the new epoch was delivered.
        yielded = self._yielded if epoch == self._yielded_epoch else 0
        return {"epoch": epoch, "batches_yielded": yielded}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Makes the next iteration continue epoch ``state["epoch"]`` where it stopped."""
        self.batch_sampler.load_state_dict(state)
        self._yielded = int(state["batches_yielded"])
        self._yielded_epoch = self.batch_sampler.epoch
