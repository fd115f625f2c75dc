"""Beam search, plain (``beam_search``) and lexically constrained (``constrained_beam_search``,
its beams chosen by ``seq2seq.decoding.constrained``'s banks), and the beam's steps that
continuous batching shares (``seq2seq.decoding.continuous``): ranking the continuations,
collecting finished hypotheses, keeping k open beams.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch
from torch import Tensor

from seq2seq.decoding.constrained import ConstraintBanks, Constraints
from seq2seq.decoding.repetition import NO_GUARD, RepetitionGuard
from seq2seq.decoding.search import (
    NEG_INF,
    Hypothesis,
    Scorer,
    SearchConfig,
    SpecialTokens,
    restrict_next_tokens_,
    sentences_done,
    step_of,
    still_empty,
    top_k_by_blocks,
    worth_dropping,
)


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
        log_probs = _allowed_scores(logits, scores, history, step, max_lens, specials, config)
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


def _allowed_scores(
    logits: Tensor,
    scores: Tensor,
    history: Tensor,
    step: int,
    max_lens: Tensor,
    specials: SpecialTokens,
    config: SearchConfig,
) -> Tensor:
    """(n, k, V) each beam's score plus each next token's log-probability, the tokens the
    step's rules and the repetition guard forbid at -inf (``continuation_scores``)."""
    written = history[:, :, :step]
    empty = still_empty(written, specials)
    return continuation_scores(
        logits, scores, step, max_lens, specials, empty, written, config.guard
    )


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


@torch.no_grad()
def constrained_beam_search(
    scorer: Scorer,
    max_lens: Tensor,
    beam_size: int,
    specials: SpecialTokens,
    constraints: Sequence[Constraints | None],
    config: SearchConfig = SearchConfig(),  # noqa: B008 (frozen)
    n_best: int = 1,
) -> list[list[Hypothesis]]:
    """Beam search in which sentence b's output must hold ``constraints[b]`` (None or a
    count of 0: no constraint, searched exactly as ``beam_search`` would).

    Returns:
        For each sentence, its ``n_best`` hypotheses: fewest unmet constraints first, then
        highest length-normalised score.
    """
    if len(constraints) != max_lens.shape[0]:
        raise ValueError(f"{len(constraints)} constraint sets for {max_lens.shape[0]} sentences")
    banks = ConstraintBanks(constraints, beam_size, specials, config, max_lens.device, n_best)
    return beam_search(scorer, max_lens, beam_size, specials, config, n_best, steer=banks)


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
        at = step_of(step, b)
        raw = float(top_scores[b, rank])
        tokens = history[b, int(top_beam[b, rank]), :at].tolist()
        norm = config.length_norm(at + 1)  # the eos counts towards |Y|
        finished[b].append(Hypothesis(tokens, raw / norm, raw))


def select_open(
    top_scores: Tensor, top_beam: Tensor, top_token: Tensor, k: int, eos_id: int
) -> tuple[Tensor, Tensor, Tensor]:
    """The k best candidates that do not end in eos: scores, source beam, token; each (B, k)."""
    open_scores = top_scores.masked_fill(top_token == eos_id, NEG_INF)
    # At most k of the 2k candidates end in eos (one per beam), so k open ones remain.
    scores, order = open_scores.topk(k, dim=-1)
    return scores, top_beam.gather(1, order), top_token.gather(1, order)
