"""What every search shares: the ``Scorer`` it drives, the special token ids and the knobs it
obeys, the rules of each step's next tokens, and its finished ``Hypothesis``. The searches
themselves are ``greedy.py`` and ``beam.py`` (plain and lexically constrained beam search) and
``sampling.py``.

The searches never see a model: this module imports none. They talk to a ``Scorer``, something
that takes the last token of every row and returns next-token scores (logits or
log-probabilities: the searches normalise them), and that can reorder its rows (fairseq keeps
``search.py`` apart from its ``sequence_generator.py`` the same way). ``seq2seq.decoding.decode``
adapts our Transformer through its KV cache; tests drive the same searches with scripted
scorers. The special token ids come with each call (``SpecialTokens``, from the model's
config): a search never defines them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from seq2seq.decoding.repetition import (
    NO_GUARD,
    RepetitionGuard,
    continuation_table,
    letter_table,
)
from seq2seq.decoding.utf8 import ban_broken_bytes_

NEG_INF = float("-inf")


class Scorer(Protocol):
    """Incremental next-token model over N rows."""

    def __call__(self, last_tokens: Tensor) -> Tensor:
        """(N,) last tokens -> (N, V) next-token logits (unnormalised log-probabilities), a
        fresh tensor: the searches modify it in place."""
        ...

    def reorder(self, index: Tensor) -> None:
        """Keep rows ``index`` (N',): row i of the new state is row index[i] of the old."""
        ...


@dataclass(frozen=True)
class SpecialTokens:
    """The ids a search must know, given by the model's config (``ModelConfig``).

    Pad, unk and bos are never generated, and eos never first: a search adds at least one
    real token (fairseq's ``min_len = 1``; an empty translation of a non-empty source is no
    translation), unless a length limit of 1 leaves room for the eos alone.

    ``blank``, ``banned``, ``bytes``, ``term_tags`` and ``symbols`` come from the tokenizer
    (:class:`TokenRules`).
    """

    pad: int
    unk: int
    bos: int
    eos: int
    blank: tuple[int, ...] = ()
    banned: tuple[int, ...] = ()
    bytes: tuple[int, ...] = ()
    term_tags: tuple[int, ...] = ()
    symbols: tuple[int, ...] = ()

    @property
    def never_generated(self) -> tuple[int, ...]:
        """pad, unk, bos and the banned pieces: no output of any search holds them."""
        return (self.pad, self.unk, self.bos, *self.banned)


@dataclass(frozen=True)
class TokenRules:
    """What the searches must know of a tokenizer's pieces (``inference.engines.token_rules``).

    Attributes:
        blank: pieces that write no visible character (SentencePiece's bare ``▁``, whitespace
            byte pieces). Eos waits until a piece that writes a visible character has been
            written: ``▁`` then eos decodes to an empty line, as empty as eos alone.
        banned: pieces no search generates: the term annotation's tags, which only a source
            holds (``seq2seq.data.terms``).
        bytes: the 256 byte-fallback pieces ``<0x00>`` .. ``<0xFF>`` in byte order (empty
            without byte fallback): every search keeps them valid UTF-8
            (``seq2seq.decoding.utf8``).
        term_tags: the annotation's opening, translation and closing tags, in that order
            (empty without them): a source's length limit leaves its annotations out
            (:func:`written_lengths`).
        symbols: pieces that write no letter (digits, punctuation, spaces): the repetition
            guard lets them repeat (``1000000``, ``...``; ``seq2seq.decoding.repetition``).
    """

    blank: tuple[int, ...] = ()
    banned: tuple[int, ...] = ()
    bytes: tuple[int, ...] = ()
    term_tags: tuple[int, ...] = ()
    symbols: tuple[int, ...] = ()


@dataclass(frozen=True)
class SearchConfig:
    """Knobs of the searches, stored in checkpoints as the decoding defaults.

    Attributes:
        max_len_a, max_len_b: a hypothesis has at most ``a * source_length + b`` tokens
            (counting its eos); the eos is forced at that length. The source length is
            counted as written, without a glossary's term annotation (``written_lengths``).
        length_penalty: alpha of the GNMT length penalty ``((5 + |Y|) / 6) ** alpha``; beam
            search ranks finished hypotheses by log P(Y) / lp(Y). 0.6 as in the paper (§6.1).
        exact_stop: beam search stops a sentence only when no open beam could still beat its
            k-th best finished hypothesis at ANY length up to the limit (a true bound). The
            default compares open beams at their current length, the usual heuristic; the two
            differ rarely, and only the heuristic makes beam size 1 identical to greedy.
        max_repeats, no_repeat_ngram_size, repetition_penalty: the repetition guard of every
            search (``seq2seq.decoding.repetition``): by default no unit of 1 to 4 pieces with
            a letter is written three times in a row; the other two are off.
    """

    max_len_a: float = 1.2
    max_len_b: int = 10
    length_penalty: float = 0.6
    exact_stop: bool = False
    # The guard's defaults have one home, RepetitionGuard.
    max_repeats: int = RepetitionGuard.max_repeats
    no_repeat_ngram_size: int = RepetitionGuard.no_repeat_ngram_size
    repetition_penalty: float = RepetitionGuard.repetition_penalty

    def __post_init__(self) -> None:
        self.guard  # noqa: B018 (made to check the settings: a one-line error)

    @property
    def guard(self) -> RepetitionGuard:
        """The repetition guard these settings ask for."""
        return RepetitionGuard(self.max_repeats, self.no_repeat_ngram_size, self.repetition_penalty)

    def max_lengths(self, src_lengths: Tensor, cap: int | None = None) -> Tensor:
        """(B,) real source lengths -> (B,) maximum hypothesis lengths (>= 1)."""
        limits = (src_lengths.float() * self.max_len_a).long() + self.max_len_b
        if cap is not None:
            limits = limits.clamp(max=cap)
        return limits.clamp(min=1)

    def source_limit(self, max_positions: int) -> int:
        """Longest source a decoder-only model can take and still have room for the longest
        output allowed: bos + source + sep + (a * source + b) must fit in ``max_positions``."""
        return max(1, int((max_positions - 2 - self.max_len_b) / (1 + self.max_len_a)))

    def length_norm(self, length: Tensor | int) -> Tensor | float:
        """GNMT length penalty lp(|Y|) = ((5 + |Y|) / 6) ** alpha."""
        return ((5.0 + length) / 6.0) ** self.length_penalty


@dataclass
class Hypothesis:
    """A finished output: tokens without bos/eos, length-normalised and raw log-probability;
    ``text``: the tokens decoded, filled in by whoever holds the tokenizer (``Translator``);
    ``unmet``: how many of its sentence's constraints it lacks (0 without constraints)."""

    tokens: list[int]
    score: float
    log_prob: float
    text: str = ""
    unmet: int = 0  # constraints a constrained search could not place (decoding.constrained)


def restrict_next_tokens_(
    logits: Tensor,
    step: int | Tensor,
    max_lens: Tensor,
    specials: SpecialTokens,
    empty: Tensor | None = None,
    written: Tensor | None = None,
    guard: RepetitionGuard = NO_GUARD,
) -> Tensor:
    """Ban pad/unk/bos everywhere, eos while a row has written nothing visible, byte pieces
    that would break UTF-8 and pieces the repetition ``guard`` forbids; force eos on rows at
    their length limit, in place (see ``SpecialTokens``: a limit of 1 still ends at once).

    Args:
        logits: (B, R, V) next-token scores of R rows per sentence.
        step: 0-based index of the token being chosen: one for all, or (B,) one per sentence
            (continuous batching, where sentences join at different steps).
        max_lens: (B,) maximum lengths, eos included.
        empty: (B, R) rows whose tokens so far write no visible character
            (:func:`still_empty`); None: the rows at step 0.
        written: (B, R, T) the rows' tokens so far, pad where none (their last three say
            whether a character is open: ``utf8.ban_broken_bytes_``); None: nothing written.
        guard: the repetition guard, which reads ``written`` (its penalty comes before the
            scores are normalised: ``RepetitionGuard.penalize_``).
    """
    for token in specials.never_generated:
        logits[..., token] = NEG_INF
    if written is not None:
        vocab, device = logits.shape[-1], str(logits.device)
        letters = letter_table(vocab, specials.symbols, device)
        guard.ban_(
            logits,
            written,
            specials.pad,
            letters,
            continuation_table(vocab, specials.bytes, device),
        )
    at_limit = step >= max_lens - 1  # (B,)
    if specials.bytes:  # no half character; at the limit eos comes all the same
        none = torch.empty(*logits.shape[:2], 0, dtype=torch.long, device=logits.device)
        written = none if written is None else written
        ban_broken_bytes_(logits, written, specials.pad, specials.bytes, at_limit)
    if empty is not None:  # no output that decodes to nothing
        logits[..., specials.eos].masked_fill_(empty & ~at_limit[:, None], NEG_INF)
    elif isinstance(first := step == 0, Tensor) or first:  # fairseq's min_len = 1
        logits[..., specials.eos].masked_fill_((first & ~at_limit)[:, None], NEG_INF)
    if bool(at_limit.any()):
        eos_column = logits[at_limit, :, specials.eos].clone()
        logits[at_limit] = NEG_INF
        logits[at_limit, :, specials.eos] = eos_column
    return logits


def written_lengths(src_ids: Tensor, pad: int, term_tags: tuple[int, ...] = ()) -> Tensor:
    """(B, S) padded source ids -> (B,) their lengths as written, what ``SearchConfig``'s
    length limit reads: without a glossary's term annotations (``seq2seq.data.terms``:
    ``<term> teacher <trans> 导师 </term>`` counts as ``teacher``). The output writes a term
    in place of its word, not beside it; a limit that counted the annotation let a hypothesis
    that loops run on for longer than plain beam search would (for 1.2 times the 5 or 6
    pieces of each annotation)."""
    lengths = (src_ids != pad).sum(dim=1)
    if not term_tags:
        return lengths
    opening, translation, closing = term_tags
    # After a <trans>, up to and with its </term>: the annotation's target and tags.
    opened = (src_ids == translation).cumsum(dim=1) - (src_ids == closing).cumsum(dim=1)
    annotation = (opened > 0) | (src_ids == closing) | (src_ids == opening)
    return lengths - (annotation & (src_ids != pad)).sum(dim=1)


def still_empty(written: Tensor, specials: SpecialTokens) -> Tensor | None:
    """(..., T) tokens written so far (pad where none) -> (...) bool: those that write no
    visible character yet; None where the vocabulary names no blank pieces (then only the rows
    at step 0 are empty, ``restrict_next_tokens_``'s default)."""
    if not specials.blank:
        return None
    blank = torch.tensor((specials.pad, *specials.blank), device=written.device)
    return torch.isin(written, blank).all(dim=-1)


def worth_dropping(done: Tensor) -> bool:
    """Whether to drop finished sentences from the scorer now: when a quarter of its rows are
    done. Finished rows would cost a full decoder step each until the longest sentence ends;
    dropping copies the cache once, so it waits until there are enough of them."""
    return done.numel() > 1 and 4 * int(done.sum()) >= done.numel()


def top_k_by_blocks(x: Tensor, k: int, block: int = 64) -> tuple[Tensor, Tensor]:
    """``x.topk(k, dim=-1)`` of a (R, W) tensor, through the maxima of blocks of columns.

    The k largest values of a row lie in the k blocks with the largest maxima (a block
    holding the j-th largest value has at most j - 1 blocks with a larger maximum), so one
    vectorised max over blocks and a top-k over k blocks suffice. On the CPU a top-k or arg-max
    over the whole vocabulary is a scalar loop per row (400 us for 64 x 8000 here), the block
    maxima a vectorised reduction (25 us). Values are exact; equal values may come in another
    order than ``topk``'s. Columns past the last whole block are candidates as they are.
    """
    rows, width = x.shape
    if width < 4 * k * block:  # too few blocks to save anything
        return x.topk(k, dim=-1)
    whole = width - width % block
    maxima = x[:, :whole].reshape(rows, whole // block, block).amax(dim=-1)  # (R, W / block)
    best_blocks = maxima.topk(k, dim=-1).indices  # (R, k)
    offsets = torch.arange(block, device=x.device)
    columns = (best_blocks[:, :, None] * block + offsets).view(rows, k * block)
    if whole < width:  # the partial last block
        tail = torch.arange(whole, width, device=x.device).expand(rows, -1)
        columns = torch.cat((columns, tail), dim=1)
    values, picked = x.gather(1, columns).topk(k, dim=-1)
    return values, columns.gather(1, picked)


def sentences_done(
    finished: list[list[Hypothesis]],
    open_scores: Tensor,
    step: int | Tensor,
    max_lens: Tensor,
    k: int,
    config: SearchConfig,
) -> Tensor:
    """(B,) bool: sentence has k finished hypotheses no open beam can beat, or hit its limit."""
    done = step >= max_lens - 1
    best_open = open_scores.max(dim=-1).values.tolist()
    for b, hyps in enumerate(finished):
        if done[b] or len(hyps) < k:
            continue
        kth_best = sorted((h.score for h in hyps), reverse=True)[k - 1]
        if best_open[b] == NEG_INF:
            done[b] = True
            continue
        # Log-probs only fall as a beam grows, but the penalty divisor grows too; the exact
        # bound assumes the beam could end at the longest allowed length.
        at = step_of(step, b)
        length = int(max_lens[b]) if config.exact_stop and best_open[b] < 0 else at + 1
        done[b] = best_open[b] / config.length_norm(length) <= kth_best
    return done


def step_of(step: int | Tensor, sentence: int) -> int:
    """Sentence ``sentence``'s step, when ``step`` is one for all or one per sentence."""
    return int(step[sentence]) if isinstance(step, Tensor) else step
