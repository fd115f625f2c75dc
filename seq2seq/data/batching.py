"""Token-budget batching: a length-bucketing batch sampler, collation and a resumable loader.

Batches hold a variable number of sentence pairs so that each costs about ``max_tokens``
padded positions, the "~25k source + 25k target tokens per batch" recipe of the Transformer
paper scaled to one machine. Nothing here imports Lightning; :class:`TokenBatchLoader` just
follows the ``state_dict``/``load_state_dict`` and ``sampler.set_epoch`` conventions that
Lightning's fit loop looks for.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from functools import partial
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler

from seq2seq.data.tokenizer import BOS_ID, EOS_ID, PAD_ID

Example = tuple[Sequence[int], Sequence[int]]


def example_length(src_len: int, tgt_len: int) -> int:
    """Padded-size length of one example: the longer side plus its bos or eos."""
    return max(src_len, tgt_len) + 1


def joined_length(src_len: int, tgt_len: int) -> int:
    """Length of a decoder-only translation example ``[bos] src [sep] tgt`` (see
    :func:`collate_joined`)."""
    return src_len + tgt_len + 2


def _greedy_boundaries(sorted_lengths: np.ndarray, max_tokens: int) -> list[tuple[int, int]]:
    """Cuts ascending lengths into contiguous [start, end) runs with size × max ≤ max_tokens."""
    bounds, start = [], 0
    for i, length in enumerate(sorted_lengths.tolist()):
        # Lengths ascend, so the newest example sets the batch's padded width.
        if (i - start + 1) * length > max_tokens:
            bounds.append((start, i))
            start = i
    if start < len(sorted_lengths):
        bounds.append((start, len(sorted_lengths)))
    return bounds


def _at_least(bounds: list[tuple[int, int]], count: int) -> list[tuple[int, int]]:
    """Halve the largest runs until there are ``count`` of them (or all are single examples)."""
    bounds = list(bounds)
    while 0 < len(bounds) < count:
        start, end = max(bounds, key=lambda b: b[1] - b[0])
        if end - start < 2:
            break
        middle = (start + end) // 2
        index = bounds.index((start, end))
        bounds[index : index + 1] = [(start, middle), (middle, end)]
    return bounds


class TokenBatchSampler(Sampler[list[int]]):
    """Yields lists of example indices whose padded size stays within ``max_tokens``.

    The padded size of a batch is ``len(batch) * max(lengths in batch)``. Examples are sorted
    by length, so a batch holds examples of (nearly) equal length and padding is small. Each
    epoch breaks ties between equal lengths at random (so batch composition changes) and
    shuffles the batch order. The batch boundaries depend only on the sorted lengths, which
    makes the number of batches the same every epoch: Lightning reads ``len()`` once.

    Under DDP every rank builds the same global batch list from ``(seed, epoch)`` and takes
    every ``num_replicas``-th batch. For training (``shuffle``) the list is first padded by
    repeating its first batches to a multiple of ``num_replicas``, so ranks see disjoint
    batches (apart from the repeats) and exactly the same number of them: every update
    all-reduces gradients, and no rank may run out first. Validation needs no such lockstep,
    so its batches are not padded: every dev sentence counts exactly once over all ranks
    (one rank may then have a batch more than another).

    Args:
        lengths: Length of each example, see :func:`example_length`.
        max_tokens: Padded-token budget per batch; every length must fit within it.
        shuffle: Randomise composition and order each epoch. Off (validation), batches run
            shortest first and are the same every epoch.
        seed: Base seed; the epoch's order comes from ``(seed, epoch)`` only.
        num_replicas: Number of DDP processes.
        rank: This process's rank in ``[0, num_replicas)``.

    The state (:meth:`state_dict`) is the epoch and the number of batches this rank has
    yielded in it; after :meth:`load_state_dict` the next iteration skips those batches.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        max_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
    ) -> None:
        self.lengths = np.asarray(lengths, dtype=np.int64)
        if self.lengths.size and self.lengths.max() > max_tokens:
            raise ValueError(
                f"an example of length {self.lengths.max()} exceeds max_tokens={max_tokens}; "
                "raise max_tokens or drop longer examples"
            )
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} not in [0, {num_replicas})")
        self.max_tokens = max_tokens
        self.shuffle = shuffle
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self._bounds = _greedy_boundaries(np.sort(self.lengths), max_tokens)
        if not shuffle:  # unpadded: every rank must still get a batch to validate
            self._bounds = _at_least(self._bounds, num_replicas)
        self._resume_from = 0  # batches to skip at the next __iter__ (set by load_state_dict)
        self._yielded = 0  # batches yielded in self.epoch so far

    def set_epoch(self, epoch: int) -> None:
        """Selects the epoch whose order the next iteration yields.

        Setting the epoch the sampler is already on keeps a pending resume position, because
        Lightning calls ``set_epoch`` right after restoring a mid-epoch state.
        """
        if epoch != self.epoch:
            self.epoch = epoch
            self._resume_from = 0
            self._yielded = 0

    @property
    def resume_position(self) -> int:
        """How many batches the next iteration skips (non-zero only after a restore)."""
        return self._resume_from

    def global_batches(self, epoch: int | None = None) -> list[list[int]]:
        """All ranks' batches for ``epoch`` (default: the current one), before padding."""
        epoch = self.epoch if epoch is None else epoch
        if self.shuffle:
            rng = np.random.default_rng([self.seed, epoch])
            # lexsort sorts by the last key first: by length, ties broken by a random key.
            order = np.lexsort((rng.random(len(self.lengths)), self.lengths))
        else:
            order = np.argsort(self.lengths, kind="stable")
        batches = [order[start:end].tolist() for start, end in self._bounds]
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches

    def rank_batches(self, epoch: int | None = None) -> list[list[int]]:
        """This rank's batches for ``epoch`` (training: padded so every rank has as many)."""
        batches = self.global_batches(epoch)
        if not batches or not self.shuffle:
            return batches[self.rank :: self.num_replicas]
        padded_total = len(self) * self.num_replicas
        # Repeat from the start (cycling, in case there are fewer batches than ranks).
        batches += [batches[i % len(batches)] for i in range(padded_total - len(batches))]
        return batches[self.rank :: self.num_replicas]

    def __len__(self) -> int:
        if not self.shuffle:  # unpadded: the batches rank, rank + N, rank + 2N, ...
            return len(range(self.rank, len(self._bounds), self.num_replicas))
        return math.ceil(len(self._bounds) / self.num_replicas)

    def __iter__(self) -> Iterator[list[int]]:
        batches = self.rank_batches()
        start, self._resume_from = self._resume_from, 0
        self._yielded = start
        for batch in batches[start:]:
            # Count before yielding: the consumer holds this batch when it next saves state.
            self._yielded += 1
            yield batch

    def state_dict(self) -> dict[str, int]:
        """``{"epoch", "batches_yielded"}``; restore with :meth:`load_state_dict`."""
        return {"epoch": self.epoch, "batches_yielded": self._yielded}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continues epoch ``state["epoch"]`` after its first ``batches_yielded`` batches."""
        self.epoch = int(state["epoch"])
        self._resume_from = self._yielded = int(state["batches_yielded"])

    def padding_fraction(self, epoch: int | None = None) -> float:
        """Fraction of padded positions over all of ``epoch``'s (unpadded) global batches."""
        return padding_fraction(self.global_batches(epoch), self.lengths)


def padding_fraction(batches: Sequence[Sequence[int]], lengths: Sequence[int]) -> float:
    """Fraction of positions in ``batches`` that are padding, given per-example ``lengths``.

    Each batch costs ``len(batch) * max(length)`` positions of which ``sum(length)`` are real.
    """
    lengths = np.asarray(lengths)
    real = padded = 0
    for batch in batches:
        batch_lengths = lengths[np.asarray(batch, dtype=np.int64)]
        real += int(batch_lengths.sum())
        padded += len(batch) * int(batch_lengths.max(initial=0))
    return 1.0 - real / padded if padded else 0.0


@dataclass
class Batch:
    """A padded batch of sentence pairs; all tensors are ``long`` and padded with pad_id.

    Lightning's ``transfer_batch_to_device`` moves it with :meth:`to` (any object with a
    ``to`` method counts as transferable), and ``DataLoader(pin_memory=True)`` uses
    :meth:`pin_memory`.

    Shape:
        src: (B, S) source ids, no bos/eos.
        tgt_in: (B, T) decoder input, ``[bos] + tgt``.
        tgt_out: (B, T) decoder target, ``tgt + [eos]``.
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    n_src_tokens: int  # non-pad positions in src
    n_tgt_tokens: int  # non-pad positions in tgt_out (the tokens the loss is summed over)

    def _map(self, fn: Any) -> Batch:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return Batch(**{k: fn(v) if isinstance(v, torch.Tensor) else v for k, v in values.items()})

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """A copy with every tensor on ``device``."""
        return self._map(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> Batch:
        """A copy with every tensor in pinned memory (for ``DataLoader(pin_memory=True)``)."""
        return self._map(lambda t: t.pin_memory())

    def __len__(self) -> int:
        return self.src.size(0)


def _pad(seqs: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    width = max((len(s) for s in seqs), default=0)
    out = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    for i, seq in enumerate(seqs):
        out[i, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
    return out


def collate(
    examples: Sequence[Example], pad_id: int = PAD_ID, bos_id: int = BOS_ID, eos_id: int = EOS_ID
) -> Batch:
    """Pads ``(src_ids, tgt_ids)`` examples (target without specials) into a :class:`Batch`;
    the ids are the tokenizer's (an imported Marian model has its own)."""
    srcs = [list(src) for src, _ in examples]
    tgts = [list(tgt) for _, tgt in examples]
    return Batch(
        src=_pad(srcs, pad_id),
        tgt_in=_pad([[bos_id, *t] for t in tgts], pad_id),
        tgt_out=_pad([[*t, eos_id] for t in tgts], pad_id),
        n_src_tokens=sum(map(len, srcs)),
        n_tgt_tokens=sum(len(t) + 1 for t in tgts),
    )


def collate_joined(examples: Sequence[Example], sep_id: int, pad_id: int = PAD_ID) -> Batch:
    """Pairs as one sequence each, for a decoder-only translation model.

    Input ``[bos] src [sep] tgt``, target ``src [sep] tgt [eos]`` shifted by one, with every
    position before the first target token set to pad: the loss covers exactly the target and
    its eos. ``src`` keeps the source alone (for validation BLEU and token counts).
    """
    srcs = [list(src) for src, _ in examples]
    tgts = [list(tgt) for _, tgt in examples]
    inputs = [[BOS_ID, *s, sep_id, *t] for s, t in zip(srcs, tgts, strict=True)]
    targets = [[pad_id] * (len(s) + 1) + [*t, EOS_ID] for s, t in zip(srcs, tgts, strict=True)]
    return Batch(
        src=_pad(srcs, pad_id),
        tgt_in=_pad(inputs, pad_id),
        tgt_out=_pad(targets, pad_id),
        n_src_tokens=sum(map(len, srcs)),
        n_tgt_tokens=sum(len(t) + 1 for t in tgts),
    )


def collate_blocks(blocks: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> Batch:
    """Language-model blocks of ``block_size + 1`` tokens: input ``block[:-1]``, target
    ``block[1:]`` (a padded tail is never a target). ``src`` is empty, (B, 0)."""
    rows = torch.as_tensor(np.asarray(blocks, dtype=np.int64))  # (B, block_size + 1)
    tgt_out = rows[:, 1:]
    return Batch(
        src=torch.zeros((rows.shape[0], 0), dtype=torch.long),
        tgt_in=rows[:, :-1],
        tgt_out=tgt_out,
        n_src_tokens=0,
        n_tgt_tokens=int((tgt_out != pad_id).sum()),
    )


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
