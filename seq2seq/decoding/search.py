"""Decoding strategies: greedy and beam search over an incremental scorer (sampling, which
shares their pieces, is ``seq2seq.decoding.sampling``).

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


@torch.no_grad()
def greedy_search(
    scorer: Scorer,
    max_lens: Tensor,
    specials: SpecialTokens,
    guard: RepetitionGuard = RepetitionGuard(),  # noqa: B008 (frozen)
) -> list[Hypothesis]:
    """Pick the most probable token at every step, for B sentences at once.

    Args:
        scorer: incremental model over B rows.
        max_lens: (B,) length limits, eos included.
        specials: the model's special token ids.
        guard: the repetition guard (``SearchConfig.guard``).

    Returns:
        One hypothesis per sentence, ``score`` = ``log_prob`` (no length normalisation).
    """
    batch = max_lens.shape[0]
    device = max_lens.device
    tokens = torch.full((batch, int(max_lens.max())), specials.pad, dtype=torch.long, device=device)
    log_prob = torch.zeros(batch, device=device)
    # The scorer's rows hold the sentences `active`; finished ones are dropped now and then.
    active = torch.arange(batch, device=device)
    limits = max_lens  # of the active rows
    finished = torch.zeros(batch, dtype=torch.bool, device=device)
    last = torch.full((batch,), specials.bos, dtype=torch.long, device=device)
    for step in range(tokens.shape[1]):
        written = tokens[active, None, :step]
        # Normalised over the whole vocabulary, banned tokens included, then restricted.
        logits = guard.penalize_(scorer(last)[:, None], written, specials.pad)  # (N, 1, V)
        empty = still_empty(written, specials)
        log_probs = restrict_next_tokens_(
            logits.log_softmax(dim=-1), step, limits, specials, empty, written, guard
        )[:, 0]
        best_log_prob, best = top_k_by_blocks(log_probs, 1)
        best_log_prob, best = best_log_prob[:, 0], best[:, 0].masked_fill(finished, specials.pad)
        log_prob[active] += best_log_prob.masked_fill(finished, 0.0)
        tokens[active, step] = best
        finished |= best == specials.eos
        if bool(finished.all()):
            break
        last = best
        if worth_dropping(finished):
            keep = (~finished).nonzero()[:, 0]
            scorer.reorder(keep)
            active, limits, finished, last = active[keep], limits[keep], finished[keep], last[keep]
    return [
        _greedy_hypothesis(row, float(lp), specials.eos)
        for row, lp in zip(tokens, log_prob, strict=True)
    ]


def worth_dropping(done: Tensor) -> bool:
    """Whether to drop finished sentences from the scorer now: when a quarter of its rows are
    done. Finished rows would cost a full decoder step each until the longest sentence ends;
    dropping copies the cache once, so it waits until there are enough of them."""
    return done.numel() > 1 and 4 * int(done.sum()) >= done.numel()


def _greedy_hypothesis(row: Tensor, log_prob: float, eos: int) -> Hypothesis:
    out = row.tolist()
    if eos in out:
        out = out[: out.index(eos)]
    return Hypothesis(out, log_prob, log_prob)


@torch.no_grad()
def beam_search(
    scorer: Scorer,
    max_lens: Tensor,
    beam_size: int,
    specials: SpecialTokens,
    config: SearchConfig = SearchConfig(),  # noqa: B008 (frozen)
    n_best: int = 1,
    steer: BeamSteer | None = None,
) -> list[list[Hypothesis]]:
    """Beam search for B sentences at once; the scorer holds B * beam_size rows.

    At each step the 2k best continuations of each sentence are ranked; those among the k
    best that end in eos are finished, and the k best that do not are kept open. A sentence is
    done when it has k finished hypotheses that no open beam can beat (see
    ``SearchConfig.exact_stop``) or reaches its length limit, where eos is forced.

    Args:
        steer: chooses the beams of some sentences by rules of its own (constrained decoding,
            ``seq2seq.decoding.constrained``); the other sentences are searched exactly as
            without it.

    Returns:
        For each sentence, its ``n_best`` hypotheses, best first: fewest unmet constraints,
        then highest length-normalised score.
    """
    check_n_best(n_best, beam_size)
    k = beam_size
    scores, history, last, done = _first_beams(max_lens, k, specials)
    finished: list[list[Hypothesis]] = [[] for _ in range(max_lens.shape[0])]
    # The scorer holds the k beams of the sentences still searched, whose finished lists are
    # `found` (the lists of `finished` themselves): done sentences are dropped now and then.
    found = finished
    for step in range(history.shape[2]):
        logits = scorer(last.reshape(-1)).view(len(found), k, -1)  # (n, k, V)
        written = history[:, :, :step]
        empty = still_empty(written, specials)
        log_probs = continuation_scores(
            logits, scores, step, max_lens, specials, empty, written, config.guard
        )
        if steer is not None:
            steer.restrict_(log_probs, step, max_lens)
        candidates = top_continuations(log_probs, k)
        skip = done if steer is None else done | steer.steered
        collect_finished(found, skip, history, step, candidates, k, specials.eos, config)
        scores, chosen_beam, chosen_token = select_open(*candidates, k, specials.eos)
        if steer is not None:
            chosen = (scores, chosen_beam, chosen_token)
            steer.select_(log_probs, candidates, chosen, found, done, history, step)
            done |= steer.done(found, scores, step, max_lens)
        done |= sentences_done(found, scores, step, max_lens, k, config)
        if bool(done.all()):
            break
        history, rows = _follow_chosen(history, chosen_beam, chosen_token, done, step)
        last = chosen_token
        if worth_dropping(done):
            keep = (~done).nonzero()[:, 0]
            rows, last, scores, history = rows[keep], last[keep], scores[keep], history[keep]
            max_lens, done = max_lens[keep], done[keep]
            found = [found[i] for i in keep.tolist()]
            if steer is not None:
                steer.keep(keep.tolist())
        scorer.reorder(rows.reshape(-1))
    return [sorted(hyps, key=lambda h: (h.unmet, -h.score))[:n_best] for hyps in finished]


def check_n_best(n_best: int, beam_size: int) -> None:
    """A beam search keeps k = ``beam_size`` hypotheses: it can return 1 to k of them."""
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"n_best must be in [1, beam_size={beam_size}], got {n_best}")


def _first_beams(
    max_lens: Tensor, k: int, specials: SpecialTokens
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The state of a beam search before its first step, for B = ``max_lens.shape[0]``
    sentences: open-beam scores (B, k), histories (B, k, longest limit) of pad, the tokens to
    feed (B, k) of bos, and done (B,) all False."""
    batch, device = max_lens.shape[0], max_lens.device
    # Only beam 0 is alive at the start: the k copies would otherwise propose k identical sets.
    scores = torch.full((batch, k), NEG_INF, device=device)
    scores[:, 0] = 0.0
    width = int(max_lens.max())
    history = torch.full((batch, k, width), specials.pad, dtype=torch.long, device=device)
    last = torch.full((batch, k), specials.bos, dtype=torch.long, device=device)
    return scores, history, last, torch.zeros(batch, dtype=torch.bool, device=device)


def _follow_chosen(
    history: Tensor, chosen_beam: Tensor, chosen_token: Tensor, done: Tensor, step: int
) -> tuple[Tensor, Tensor]:
    """Extend the chosen beams: histories (n, k, T) reordered to ``chosen_beam`` (n, k) with
    ``chosen_token`` (n, k) written at ``step``, and the scorer rows (n, k) they continue."""
    n, k = chosen_beam.shape
    # Finished sentences keep their rows in place: nothing to copy for them.
    in_place = torch.arange(k, device=chosen_beam.device)[None, :]  # (1, k)
    chosen_beam = torch.where(done[:, None], in_place, chosen_beam)
    history = history.gather(1, chosen_beam[:, :, None].expand_as(history))
    history[:, :, step] = chosen_token
    rows = chosen_beam + torch.arange(n, device=chosen_beam.device)[:, None] * k
    return history, rows


class BeamSteer(Protocol):
    """Rules of its own for some sentences of a beam search (``seq2seq.decoding.constrained``)."""

    steered: Tensor  # (n,) bool: the sentences (of those active) it chooses beams for

    def restrict_(self, log_probs: Tensor, step: int, max_lens: Tensor) -> None:
        """Ban continuations in ``log_probs`` (n, k, V), in place, before they are ranked."""
        ...

    def select_(
        self,
        log_probs: Tensor,
        candidates: tuple[Tensor, Tensor, Tensor],
        chosen: tuple[Tensor, Tensor, Tensor],
        finished: list[list[Hypothesis]],
        done: Tensor,
        history: Tensor,
        step: int,
    ) -> None:
        """For each steered sentence not done: add its finished hypotheses to ``finished``
        and write its k open beams into ``chosen`` (scores, source beam, token; each (n, k))
        in place. ``candidates``: the 2k best continuations of ``top_continuations``."""
        ...

    def done(
        self, finished: list[list[Hypothesis]], open_scores: Tensor, step: int, max_lens: Tensor
    ) -> Tensor:
        """(n,) bool: steered sentences that may stop now, by rules of its own."""
        ...

    def keep(self, sentences: list[int]) -> None:
        """Only these sentences (indices among those active) go on."""
        ...


def best_continuations(
    logits: Tensor,
    scores: Tensor,
    step: int | Tensor,
    max_lens: Tensor,
    specials: SpecialTokens,
    empty: Tensor | None = None,
    written: Tensor | None = None,
    guard: RepetitionGuard = NO_GUARD,
) -> tuple[Tensor, Tensor, Tensor]:
    """The 2k best (beam, token) continuations of each sentence: scores, beam, token (n, 2k).

    Ranks all k * V candidates ``score + log P(token)`` of a sentence at once.

    Args:
        logits: (n, k, V) next-token scores of the k beams of n sentences.
        scores: (n, k) log-probabilities of the beams so far.
        empty: (n, k) beams that have written nothing visible (``still_empty``).
        written: (n, k, T) the beams' tokens so far (``restrict_next_tokens_``).
        guard: the repetition guard (``SearchConfig.guard``).
    """
    continuations = continuation_scores(
        logits, scores, step, max_lens, specials, empty, written, guard
    )
    return top_continuations(continuations, logits.shape[1])


def continuation_scores(
    logits: Tensor,
    scores: Tensor,
    step: int | Tensor,
    max_lens: Tensor,
    specials: SpecialTokens,
    empty: Tensor | None = None,
    written: Tensor | None = None,
    guard: RepetitionGuard = NO_GUARD,
) -> Tensor:
    """(n, k, V) scores of every continuation: the beam's log-probability plus the token's
    (the repetition penalty on the logits, normalised over the whole vocabulary, then
    restricted by ``restrict_next_tokens_``)."""
    if written is not None:
        logits = guard.penalize_(logits, written, specials.pad)
    log_probs = logits.log_softmax(dim=-1)
    log_probs = restrict_next_tokens_(log_probs, step, max_lens, specials, empty, written, guard)
    return log_probs.add_(scores[:, :, None])


def top_continuations(continuations: Tensor, k: int) -> tuple[Tensor, Tensor, Tensor]:
    """The 2k best of (n, k, V) ``continuation_scores``: scores, beam, token; each (n, 2k)."""
    n, _, vocab = continuations.shape
    flat = continuations.view(n, k * vocab)
    top_scores, top_index = top_k_by_blocks(flat, min(2 * k, k * vocab))  # (n, 2k)
    return top_scores, top_index // vocab, top_index % vocab


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


def collect_finished(
    finished: list[list[Hypothesis]],
    done: Tensor,
    history: Tensor,
    step: int | Tensor,
    candidates: tuple[Tensor, Tensor, Tensor],
    k: int,
    eos: int,
    config: SearchConfig,
) -> None:
    """Move eos-ending candidates ranked among the k best into the finished lists.

    Args:
        candidates: scores, source beam and token of each sentence's 2k best, each (n, 2k).
    """
    top_scores, top_beam, top_token = candidates
    ends = (top_token[:, :k] == eos) & top_scores[:, :k].isfinite() & ~done[:, None]
    if not bool(ends.any()):
        return
    for b, rank in ends.nonzero().tolist():
        at = _step_of(step, b)
        raw = float(top_scores[b, rank])
        tokens = history[b, int(top_beam[b, rank]), :at].tolist()
        norm = config.length_norm(at + 1)  # the eos counts towards |Y|
        finished[b].append(Hypothesis(tokens, raw / norm, raw))


def _step_of(step: int | Tensor, sentence: int) -> int:
    """Sentence ``sentence``'s step, when ``step`` is one for all or one per sentence."""
    return int(step[sentence]) if isinstance(step, Tensor) else step


def select_open(
    top_scores: Tensor, top_beam: Tensor, top_token: Tensor, k: int, eos_id: int
) -> tuple[Tensor, Tensor, Tensor]:
    """The k best candidates that do not end in eos: scores, source beam, token; each (B, k)."""
    open_scores = top_scores.masked_fill(top_token == eos_id, NEG_INF)
    # At most k of the 2k candidates end in eos (one per beam), so k open ones remain.
    scores, order = open_scores.topk(k, dim=-1)
    return scores, top_beam.gather(1, order), top_token.gather(1, order)


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
        at = _step_of(step, b)
        length = int(max_lens[b]) if config.exact_stop and best_open[b] < 0 else at + 1
        done[b] = best_open[b] / config.length_norm(length) <= kth_best
    return done
