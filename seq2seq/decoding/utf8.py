"""No search writes half a character: the byte pieces of a byte-fallback vocabulary may only
begin and continue valid UTF-8.

SentencePiece's byte fallback spells a character that has no piece of its own as its UTF-8
bytes, one ``<0xNN>`` piece per byte (``seq2seq.data.tokenizer``). Nothing stops a model from
writing a lead byte and then an ordinary piece, or a continuation byte with no lead, or eos in
the middle of a character: each decodes to U+FFFD (``Testimonials`` -> ``麺�。``). The rule
here is the UTF-8 table (RFC 3629, Unicode Table 3-7), applied as a mask before a token is
chosen, in every search (``search.restrict_next_tokens_``):

    after a lead byte still missing continuations: only a byte piece in the range the table
    allows next (E0 -> A0..BF, ED -> 80..9F, F0 -> 90..BF, F4 -> 80..8F, else 80..BF); no
    ordinary piece, no eos;
    otherwise: no continuation byte (80..BF) and no byte that never starts a character
    (C0, C1, F5..FF).

Whether a row is in the middle of a character follows from its last three tokens alone, so
the rule needs no state of its own: beams that are reordered, sentences that join a
continuous batch, and sampled rows all read it from the tokens they hold. A row forced to end
at its length limit may still stop inside a character; ``drop_broken_bytes`` cleans such
outputs (and CTranslate2's, which takes no mask) after the search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import torch
from torch import Tensor

from seq2seq.textio import is_utf8

NEG_INF = float("-inf")

# Bytes that never start a character: continuations, overlong leads, leads past U+10FFFF.
NEVER_FIRST = (*range(0x80, 0xC2), *range(0xF5, 0x100))
# The range of the first continuation after the leads the table restricts (else 80..BF).
FIRST_CONTINUATION = {
    0xE0: (0xA0, 0xBF),
    0xED: (0x80, 0x9F),
    0xF0: (0x90, 0xBF),
    0xF4: (0x80, 0x8F),
}


def continuations_after(lead: int) -> int:
    """How many continuation bytes follow a lead byte (0: ASCII or not a lead)."""
    if 0xC2 <= lead <= 0xDF:
        return 1
    if 0xE0 <= lead <= 0xEF:
        return 2
    if 0xF0 <= lead <= 0xF4:
        return 3
    return 0


@dataclass(frozen=True)
class _Tables:
    """What the rule reads of a vocabulary, on the device the search runs on."""

    value_of: Tensor  # (V,) each piece's byte value, -1 for an ordinary piece
    needs: Tensor  # (256,) continuation bytes after each byte as a lead
    first_low: Tensor  # (256,) the lowest first continuation after each lead
    first_high: Tensor  # (256,) the highest
    never_first: Tensor  # ids of the byte pieces that never start a character


@lru_cache(maxsize=8)
def _tables(byte_ids: tuple[int, ...], vocab: int, device: str) -> _Tables:
    """Made once per vocabulary and device, not at every step of a search."""
    value_of = torch.full((vocab,), -1, dtype=torch.long)
    value_of[list(byte_ids)] = torch.arange(256)
    ranges = [FIRST_CONTINUATION.get(b, (0x80, 0xBF)) for b in range(256)]
    tables = _Tables(
        value_of,
        torch.tensor([continuations_after(b) for b in range(256)]),
        torch.tensor([low for low, _ in ranges]),
        torch.tensor([high for _, high in ranges]),
        torch.tensor([byte_ids[b] for b in NEVER_FIRST]),
    )
    return _Tables(*(t.to(device) for t in vars(tables).values()))


def last_written(written: Tensor, pad: int, n: int = 3) -> Tensor:
    """(..., T) tokens with pad where none was written (before or after) -> (..., n) the last
    ``n`` tokens written, oldest first, pad-filled on the left."""
    if written.shape[-1] == 0:
        return torch.full((*written.shape[:-1], n), pad, dtype=written.dtype, device=written.device)
    mask = written != pad
    position = mask.cumsum(-1)  # 1, 2, ... at each written token
    count = position[..., -1:]  # (..., 1)
    last = []
    for back in range(n - 1, -1, -1):
        at = mask & (position == count - back)
        found = at.any(-1)
        value = (written * at).sum(-1)
        last.append(torch.where(found, value, torch.full_like(value, pad)))
    return torch.stack(last, dim=-1)


def next_byte_range(last: Tensor, byte_ids: tuple[int, ...], vocab: int) -> tuple[Tensor, Tensor]:
    """(..., 3) last tokens -> ((...), (...)): the lowest and highest byte the next piece must
    be, or -1 and -1 where no character is open (the history is valid by construction)."""
    tables = _tables(byte_ids, vocab, str(last.device))
    needs, first_low, first_high = tables.needs, tables.first_low, tables.first_high
    value = tables.value_of[last]  # (..., 3) byte values, -1 for ordinary pieces
    third, second, first = value[..., 0], value[..., 1], value[..., 2]  # first = the newest

    def need(byte: Tensor) -> Tensor:
        return torch.where(byte >= 0, needs[byte.clamp(min=0)], 0)

    def continuation(byte: Tensor) -> Tensor:
        return (byte >= 0x80) & (byte <= 0xBF)

    after_lead = need(first) >= 1
    one_in = continuation(first) & (need(second) >= 2)
    two_in = continuation(first) & continuation(second) & (need(third) == 3)
    low = torch.full_like(first, -1)
    high = torch.full_like(first, -1)
    low = torch.where(one_in | two_in, 0x80, low)
    high = torch.where(one_in | two_in, 0xBF, high)
    low = torch.where(after_lead, first_low[first.clamp(min=0)], low)
    high = torch.where(after_lead, first_high[first.clamp(min=0)], high)
    return low, high


def ban_broken_bytes_(
    logits: Tensor, written: Tensor, pad: int, byte_ids: tuple[int, ...], free: Tensor
) -> None:
    """Mask ``logits`` (B, R, V) in place so that the next token keeps each row's bytes valid
    UTF-8 (the module's rule).

    Args:
        written: (B, R, T) tokens written so far, pad where none.
        free: (B,) sentences exempt from the rule inside a character (at their length limit,
            where eos is forced whatever was written).
    """
    vocab = logits.shape[-1]
    tables = _tables(byte_ids, vocab, str(logits.device))
    kept = None  # (P, V) the scores of rows inside a character, before the ban below
    # A character can be open only after a byte past ASCII, which nearly no step has written:
    # only then are the rows' last pieces read (some forty operations).
    if bool((tables.value_of[written] >= 0x80).any()):
        low, high = next_byte_range(last_written(written, pad), byte_ids, vocab)  # (B, R)
        open_rows = (low >= 0) & ~free[:, None]
        if bool(open_rows.any()):
            kept = logits[open_rows]
    logits[..., tables.never_first] = NEG_INF
    if kept is not None:
        value_of = tables.value_of
        allowed = (value_of[None] >= low[open_rows][:, None]) & (
            value_of[None] <= high[open_rows][:, None]
        )
        logits[open_rows] = kept.masked_fill(~allowed, NEG_INF)


def drop_broken_bytes(tokens: Sequence[int], byte_ids: Sequence[int]) -> tuple[list[int], int]:
    """``tokens`` without the byte pieces that form no valid UTF-8 character (a character cut
    by a length limit, or an engine that takes no mask), and how many were dropped."""
    value_of = {token: value for value, token in enumerate(byte_ids)}
    kept: list[int] = []
    dropped = index = 0
    tokens = list(tokens)
    while index < len(tokens):
        value = value_of.get(tokens[index])
        if value is None or value < 0x80:
            kept.append(tokens[index])
            index += 1
            continue
        need = continuations_after(value)
        run = tokens[index : index + 1 + need]
        if need and len(run) == 1 + need and all(t in value_of for t in run):
            if is_utf8(bytes(value_of[t] for t in run)):
                kept += run
                index += len(run)
                continue
        dropped += 1  # a byte that starts no complete character: dropped alone
        index += 1
    return kept, dropped
