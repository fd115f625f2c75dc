"""The repetition guard: what every search does against an output that repeats itself.

A small model that loses track of its source writes the same character again and again
(``如如如如凯特。``, ``风风风风风风风风风风了。``). Three guards, all applied to each row's own
tokens only, so a sentence's output never depends on its batch-mates:

- ``max_repeats`` (ours, on by default): a unit of 1 to ``MAX_UNIT`` pieces is never written more
  than ``max_repeats`` times in a row. Chinese doubles words (谢谢, 常常, 看看, 一个一个, 高高兴兴),
  it never triples them, so the default of 2 forbids no word and stops every runaway loop at its
  third copy. Units made only of pieces that write no letter (digits, punctuation: ``1000000``,
  ``...``, ``---``) are free: numbers and markup repeat legitimately.
- ``no_repeat_ngram_size`` (fairseq, Hugging Face and CTranslate2 under this name): no n-gram
  of pieces twice in one output.
- ``repetition_penalty`` (Keskar et al., 2019; Hugging Face and CTranslate2 under this name): the
  logit of every piece already written is divided by the penalty when positive, multiplied by
  it when negative, before the scores are normalised.

``written`` tensors are (..., T) pieces so far with pad where none was written, before or
after (the searches keep their histories either way); each function reads them right-aligned.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

MAX_UNIT = 4  # the longest unit max_repeats counts: 4 pieces (a 3-byte character in bytes + 1)


@dataclass(frozen=True)
class RepetitionGuard:
    """The guard's settings (``SearchConfig`` stores them; see the module docstring).

    Attributes:
        max_repeats: a unit of 1..``MAX_UNIT`` pieces with a letter in it is written at most
            this many times in a row; 0 = off.
        no_repeat_ngram_size: no n-gram of this many pieces twice in an output; 0 = off.
        repetition_penalty: > 1 makes pieces already written less likely; 1.0 = off.
    """

    max_repeats: int = 2
    no_repeat_ngram_size: int = 0
    repetition_penalty: float = 1.0

    def __post_init__(self) -> None:
        check_guard(self.max_repeats, self.no_repeat_ngram_size, self.repetition_penalty)

    @property
    def window(self) -> int | None:
        """How many of the last pieces the guard reads: None for all of them."""
        if self.no_repeat_ngram_size or self.repetition_penalty != 1.0:
            return None
        return (self.max_repeats + 1) * MAX_UNIT if self.max_repeats else 0

    def penalize_(self, logits: Tensor, written: Tensor, pad: int) -> Tensor:
        """The repetition penalty on (B, R, V) logits, in place, before normalisation."""
        if self.repetition_penalty == 1.0 or written.shape[-1] == 0:
            return logits
        seen = logits.gather(-1, written)  # (B, R, T)
        penalty = self.repetition_penalty
        penalized = torch.where(seen > 0, seen / penalty, seen * penalty)
        # pad marks "nothing written here" (continuous histories are padded); its logit is in
        # the normaliser, so it keeps the model's value (duplicate indices all write `seen`).
        logits.scatter_(-1, written, torch.where(written == pad, seen, penalized))
        return logits

    def ban_(
        self,
        log_probs: Tensor,
        written: Tensor,
        pad: int,
        letters: Tensor | None,
        inside: Tensor | None = None,
    ) -> Tensor:
        """-inf, in place, on the (B, R, V) scores of pieces that would break a guard.

        Args:
            letters: (V,) bool, pieces that write a letter (None: all of them).
            inside: (V,) bool, the UTF-8 continuation byte pieces, which the n-gram rule lets
                through: inside a character the lead byte made the choice, and banning them
                could leave a row with no valid byte to write (None: no byte pieces).
        """
        if written.shape[-1] == 0 or not (self.max_repeats or self.no_repeat_ngram_size):
            return log_probs
        right = right_aligned(written, pad, self.window)
        if self.max_repeats:
            ban_tandem_repeats_(log_probs, right, pad, self.max_repeats, letters)
        if self.no_repeat_ngram_size:
            ban_repeated_ngrams_(log_probs, right, pad, self.no_repeat_ngram_size, inside)
        return log_probs


def check_guard(max_repeats: int, no_repeat_ngram_size: int, repetition_penalty: float) -> None:
    """One-line errors for settings no guard can take."""
    for name, value in (
        ("max_repeats", max_repeats),
        ("no_repeat_ngram_size", no_repeat_ngram_size),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0 (0 = off), got {value!r}")
    if no_repeat_ngram_size == 1:
        raise ValueError(
            "no_repeat_ngram_size 1 would forbid every piece twice; use 0 (off) or >= 2"
        )
    if not isinstance(repetition_penalty, int | float) or not repetition_penalty >= 1.0:
        raise ValueError(
            f"repetition_penalty must be >= 1.0 (1.0 = off), got {repetition_penalty!r}"
        )
    if repetition_penalty == float("inf"):
        raise ValueError("repetition_penalty must be finite")


NO_GUARD = RepetitionGuard(max_repeats=0)


def right_aligned(written: Tensor, pad: int, width: int | None = None) -> Tensor:
    """(..., T) pieces with pad where none was written (before, after, or both) -> (..., W)
    the last W written, oldest first, pad-filled on the left; W = ``width`` or T."""
    width = written.shape[-1] if width is None else width
    if 0 < width <= written.shape[-1]:
        tail = written[..., -width:]
        if not bool((tail == pad).any()):  # all written (a beam's history): the last W
            return tail
    mask = written != pad
    position = mask.cumsum(-1)  # 1, 2, ... at each written piece
    slot = position - position[..., -1:] + width - 1  # where each written piece lands
    slot = torch.where(mask & (slot >= 0), slot, torch.full_like(slot, width))  # else: dumped
    out = torch.full(
        (*written.shape[:-1], width + 1), pad, dtype=written.dtype, device=written.device
    )
    return out.scatter_(-1, slot, written)[..., :width]


def ban_tandem_repeats_(
    log_probs: Tensor, right: Tensor, pad: int, max_repeats: int, letters: Tensor | None
) -> None:
    """Ban the piece that would complete ``max_repeats + 1`` copies in a row of a unit of
    1..``MAX_UNIT`` pieces ending the row; ``right`` (B, R, W) right-aligned pieces. Every
    unit's ban is written in one scatter; a unit that bans nothing points at pad, which no
    search generates (``restrict_next_tokens_`` has set it to -inf already)."""
    next_pieces, banned = [], []
    for unit in range(1, MAX_UNIT + 1):
        span = (max_repeats + 1) * unit - 1  # the pieces before the one that would complete it
        if span > right.shape[-1]:
            break
        tail = right[..., -span:]  # (B, R, span)
        periodic = (tail[..., unit:] == tail[..., :-unit]).all(-1) & (tail[..., 0] != pad)
        copy = right[..., -unit:]  # (B, R, unit): the unit itself
        if letters is not None:  # numbers and markup repeat legitimately
            periodic &= letters[copy].any(-1)
        next_pieces.append(copy[..., 0])  # (B, R): the unit's first piece comes next
        banned.append(periodic)
    if next_pieces:
        pieces = torch.where(torch.stack(banned, -1), torch.stack(next_pieces, -1), pad)
        log_probs.scatter_(-1, pieces, float("-inf"))  # (B, R, units)


def ban_repeated_ngrams_(
    log_probs: Tensor, right: Tensor, pad: int, size: int, inside: Tensor | None = None
) -> None:
    """Ban every piece that would write an n-gram (n = ``size``) the row already holds;
    ``right`` (B, R, W) right-aligned pieces, all of the row's; ``inside``: (V,) bool, pieces
    never banned (UTF-8 continuation bytes)."""
    if right.shape[-1] < size:
        return
    grams = right.unfold(-1, size, 1)  # (B, R, W - n + 1, n)
    prefix = right[..., -(size - 1) :]  # (B, R, n - 1): the n-gram a next piece would end
    seen = (grams[..., :-1] == prefix[..., None, :]).all(-1) & (grams != pad).all(-1)
    if inside is not None:
        seen &= ~inside[grams[..., -1]]
    # An n-gram not seen points at pad, which no search generates (its score is -inf anyway).
    log_probs.scatter_(-1, torch.where(seen, grams[..., -1], pad), float("-inf"))


@functools.lru_cache(maxsize=8)
def continuation_table(vocab: int, byte_ids: tuple[int, ...], device: str) -> Tensor | None:
    """(V,) bool: the UTF-8 continuation byte pieces ``<0x80>``..``<0xBF>`` (None without byte
    pieces)."""
    if not byte_ids:
        return None
    table = torch.zeros(vocab, dtype=torch.bool, device=device)
    table[torch.tensor(byte_ids[0x80:0xC0], device=device)] = True
    return table


@functools.lru_cache(maxsize=8)
def letter_table(vocab: int, symbols: tuple[int, ...], device: str) -> Tensor | None:
    """(V,) bool: pieces that write a letter, from the ids of those that write none
    (``SpecialTokens.symbols``; None when none is known: every unit counts)."""
    if not symbols:
        return None
    table = torch.ones(vocab, dtype=torch.bool, device=device)
    table[torch.tensor(symbols, device=device)] = False
    return table


def tandem_repeats(
    tokens: Sequence[int], max_repeats: int, symbols: Collection[int] = ()
) -> list[tuple[int, ...]]:
    """The runs ``max_repeats`` forbids in a finished output: each unit of 1..``MAX_UNIT``
    pieces (a letter among them: none of ``symbols``' alone) written ``max_repeats + 1`` times
    in a row, as those pieces, first seen first. What an engine without the guard in its
    search suppresses and searches again (``inference.ctranslate2_engine``)."""
    found: dict[tuple[int, ...], None] = {}
    for unit in range(1, MAX_UNIT + 1) if max_repeats else ():
        span = (max_repeats + 1) * unit
        for start in range(len(tokens) - span + 1):
            run = tuple(tokens[start : start + span])
            periodic = all(run[i] == run[i + unit] for i in range(span - unit))
            if periodic and any(token not in symbols for token in run[:unit]):
                found.setdefault(run)
    return list(found)


# A run of 1 to 4 characters written 4 or more times in a row, letters among them: what the
# faithful-output issue counted as a loop (如如如如, 风风风风风风, 洪水洪水洪水洪水, gggg).
_TEXT_LOOP = re.compile(r"(\S{1,4}?)\1{3,}")


def text_loops(text: str) -> list[str]:
    """The loops in a translation: each run of 1..4 characters (with a letter) repeated four
    or more times in a row, as written. For benchmarks and reports, not the searches."""
    return [
        match.group(0)
        for match in _TEXT_LOOP.finditer(text)
        if any(c.isalpha() for c in match.group(1))
    ]
