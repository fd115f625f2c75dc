"""Batches for the model: the padded :class:`Batch`, the collations that build it from examples,
and each example's padded-size length for the token-budget sampler.

The sampler that groups examples into batches is :mod:`seq2seq.data.sampler` (its tie-breaking
:mod:`seq2seq.data.permutation`); the resumable loader that wraps it is
:mod:`seq2seq.data.loader`. Nothing here imports Lightning.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch

from seq2seq.data.tokenizer import BOS_ID, EOS_ID, PAD_ID

Example = tuple[Sequence[int], Sequence[int]]


def example_length(src_len: int, tgt_len: int) -> int:
    """Padded-size length of one example: the longer side plus its bos or eos."""
    return max(src_len, tgt_len) + 1


def joined_length(src_len: int, tgt_len: int) -> int:
    """Length of a decoder-only translation example ``[bos] src [sep] tgt`` (see
    :func:`collate_joined`)."""
    return src_len + tgt_len + 2


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


def pad_rows(seqs: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    """Id sequences right-padded with ``pad_id`` into one (B, longest) long tensor."""
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
        src=pad_rows(srcs, pad_id),
        tgt_in=pad_rows([[bos_id, *t] for t in tgts], pad_id),
        tgt_out=pad_rows([[*t, eos_id] for t in tgts], pad_id),
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
        src=pad_rows(srcs, pad_id),
        tgt_in=pad_rows(inputs, pad_id),
        tgt_out=pad_rows(targets, pad_id),
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
