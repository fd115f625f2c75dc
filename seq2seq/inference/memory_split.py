"""A batch that runs out of (GPU) memory, split in halves and retried, so one oversized batch
never aborts a file: ``Translator.decode_encoded``'s engine calls."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from seq2seq.decoding.constrained import Constraints
from seq2seq.decoding.search import Hypothesis


def split_on_oom(
    engine,  # noqa: ANN001 (an inference.engines.Engine)
    sources: list[list[int]],
    beam_size: int,
    n_best: int,
    constraints: Sequence[Constraints | None] | None = None,
) -> tuple[list[list[Hypothesis]], int]:
    """The engine's hypotheses for one batch, and how many times it was split to get them.

    Raises:
        MemoryError: a single sentence does not fit.
    """
    try:
        if constraints is None:  # engines without constrained search take no argument
            return engine.hypotheses(sources, beam_size, n_best), 0
        return engine.hypotheses(sources, beam_size, n_best, constraints), 0
    except torch.cuda.OutOfMemoryError:  # (= torch.OutOfMemoryError from torch 2.5)
        if len(sources) == 1:
            raise MemoryError(
                f"out of memory translating a single sentence of {len(sources[0])} tokens "
                f"on {engine.device}"
            ) from None
    if torch.cuda.is_available():
        torch.cuda.empty_cache()  # hand the failed attempt's blocks back before retrying
    half = len(sources) // 2
    first, second = (
        (None, None) if constraints is None else (constraints[:half], constraints[half:])
    )
    found, splits = split_on_oom(engine, sources[:half], beam_size, n_best, first)
    more, more_splits = split_on_oom(engine, sources[half:], beam_size, n_best, second)
    return found + more, 1 + splits + more_splits
