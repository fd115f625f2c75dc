"""Sampling search for language-model mode: temperature, top-k and top-p (nucleus) sampling.

Every row draws from a random stream of its own, seeded by (seed, its index in the caller's
input), so a prompt samples the same text whatever else is batched with it. Like the other
searches it sees no model, only a ``Scorer``; it imports nothing from seq2seq but
``seq2seq.decoding.search``, for the pieces all searches share.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from seq2seq.decoding.repetition import NO_GUARD, RepetitionGuard
from seq2seq.decoding.search import (
    NEG_INF,
    Scorer,
    SpecialTokens,
    restrict_next_tokens_,
    still_empty,
)


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Keep the k largest logits of each row (ties at the k-th kept), -inf elsewhere."""
    if k <= 0 or k >= logits.shape[-1]:
        return logits
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, NEG_INF)


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Keep the smallest set of most probable tokens whose probability mass reaches p."""
    if p >= 1.0:
        return logits
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs  # mass of the strictly more probable tokens
    drop_sorted = mass_before >= p  # already reached p without this token
    drop = drop_sorted.scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, NEG_INF)


@dataclass(frozen=True)
class SamplingConfig:
    """Ancestral sampling settings; temperature 0 means greedy.

    Attributes:
        seed: row i of the caller's input draws its random numbers from a stream of its own,
            seeded by (seed, i): a prompt at the same index gives the same text whatever else
            is in the input and however it is batched. None: a seed drawn from torch's global
            generator (so ``torch.manual_seed`` repeats a run).
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None


class RowStreams:
    """One random stream per row, keyed by the row's index in the caller's input.

    One generator for the whole batch hands a row different numbers depending on the rows
    before it; a stream per row makes its sample depend on (seed, index, its own scores)
    alone. Python's Mersenne Twister seeded by the string ``"seed:index"`` (through SHA-512)
    gives independent streams of 53-bit uniforms, one per row and step: 17 us a step for 64
    rows, 51 us for 256 (2 busy CPU cores), beside a decoder step and a draw that takes ms.
    """

    def __init__(self, seed: int | None, indices: Sequence[int], device: torch.device) -> None:
        if seed is None:
            seed = int(torch.randint(0, 2**62, ()))
        self.generators = [random.Random(f"{seed}:{index}") for index in indices]
        self.device = device

    def next(self) -> Tensor:
        """(N,) float64 uniforms in [0, 1), the next number of every row's stream."""
        values = [generator.random() for generator in self.generators]
        return torch.tensor(values, dtype=torch.float64, device=self.device)


@torch.no_grad()
def sample_search(
    scorer: Scorer,
    max_lens: Tensor,
    sampling: SamplingConfig,
    specials: SpecialTokens,
    indices: Sequence[int] | None = None,
    on_token: Callable[[Tensor], None] | None = None,
    guard: RepetitionGuard = NO_GUARD,
) -> Tensor:
    """Sample every row's next token until its eos or its length limit, N rows at once.

    The tokens allowed are greedy and beam search's (``restrict_next_tokens_``): never pad, unk
    or bos, and no eos before a visible character. A row stops after ``max_lens - 1`` tokens,
    without the decoder step the other searches spend on the eos they force there.

    Args:
        scorer: incremental model over N rows, fed bos first.
        max_lens: (N,) length limits, eos included (as for greedy and beam search).
        indices: each row's index in the caller's input, which picks its random stream
            (``SamplingConfig.seed``); 0..N-1 by default.
        on_token: called with each step's (N,) tokens as soon as they exist (streaming).
        guard: the repetition guard (off by default: a language model's text may repeat).

    Returns:
        (N, max(max_lens) - 1) sampled ids; after a row's eos or limit, pad.
    """
    rows, device = max_lens.shape[0], max_lens.device
    streams = RowStreams(sampling.seed, range(rows) if indices is None else indices, device)
    width = int(max_lens.max()) - 1
    out = torch.full((rows, width), specials.pad, dtype=torch.long, device=device)
    finished = max_lens <= 1
    last = torch.full((rows,), specials.bos, dtype=torch.long, device=device)
    for step in range(width):
        written = out[:, None, :step]
        empty = still_empty(written, specials)
        scores = guard.penalize_(scorer(last)[:, None], written, specials.pad)
        scores = restrict_next_tokens_(scores, step, max_lens, specials, empty, written, guard)
        scores = scores[:, 0]
        token = _sample_token(scores, sampling, streams.next())
        token = token.masked_fill(finished, specials.pad)
        out[:, step] = token
        if on_token is not None:
            on_token(token)
        finished |= (token == specials.eos) | (max_lens - 1 <= step + 1)
        if bool(finished.all()):
            break
        last = token
    return out


def _sample_token(scores: Tensor, sampling: SamplingConfig, uniforms: Tensor) -> Tensor:
    """(N, V) next-token scores -> (N,) tokens under temperature, top-k and top-p.

    Row i inverts its cumulative distribution at its own uniform ``uniforms[i]`` (N,): the
    first token whose cumulative probability exceeds it (``torch.multinomial`` would draw from
    one generator for all rows).
    """
    if sampling.temperature <= 0:
        return scores.argmax(dim=-1)
    logits = top_p_filter(
        top_k_filter(scores / sampling.temperature, sampling.top_k), sampling.top_p
    )
    cdf = logits.softmax(dim=-1).cumsum(dim=-1)  # (N, V), flat over tokens of no mass
    target = uniforms.to(cdf.dtype)[:, None] * cdf[:, -1:]
    token = torch.searchsorted(cdf, target, right=True)[:, 0]
    # u < 1 stays below the cdf's last rise, unless rounding lifts it there: the first
    # maximum of the cdf is the last token with mass.
    return token.minimum(cdf.argmax(dim=-1))
