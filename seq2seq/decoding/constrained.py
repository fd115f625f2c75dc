"""Lexically constrained beam search's beams: target phrases that must appear in the output.

Plain beam search keeps the k most probable hypotheses. Forcing a phrase into some of them
makes them less probable, so they would fall out of the beam at once; grid beam search (Hokamp
& Liu 2017) gives every count of constraint tokens met a beam of its own, at a cost linear in
the number of constraints. Dynamic beam allocation (Post & Vilar 2018, vectorized by Hu et al.
2019; fairseq's ``LexicallyConstrainedBeamSearch``) keeps the one beam of k and divides it
among *banks*: the candidates of a step are grouped by how far they have got through their
constraints, and the k slots go round the banks, highest first, each bank giving its best
candidate not yet taken. A hypothesis that has met more constraints survives beside more
probable ones that have met fewer, and a constraint is placed where the model scores it best,
not pasted at the start. Every step ranks, besides the 2k best continuations of plain beam
search, the best token of every beam and every beam's next constraint token.

A hypothesis may end only when it has met all its constraints, unless it reaches its length
limit, where eos is forced as always: then the finished hypothesis that met the most
constraints is returned (``Hypothesis.unmet`` says how many it lacks), never an exception.
Sentences with no constraint are searched exactly as by ``beam_search``: the banks only choose
the beams of the sentences that have constraints.

Constraints are tracked on the *text* a hypothesis writes (``TermConstraints``, in
``term_constraints.py``), not on token ids: SentencePiece spells a Chinese term differently by
its neighbours ("老师" alone, "的老师" after 的), and a term the model writes in pieces of its own
still counts as met. This module holds what a search asks of them (``Constraints``) and the
banks that choose the beams (``ConstraintBanks``); ``beam.constrained_beam_search`` runs beam
search with them.

Like ``seq2seq.decoding.search``, this module imports no model.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Protocol

import torch
from torch import Tensor

from seq2seq.decoding.search import (
    NEG_INF,
    Hypothesis,
    SearchConfig,
    SpecialTokens,
    sentences_done,
    top_k_by_blocks,
)

State = Hashable


class Constraints(Protocol):
    """One sentence's constraints, followed along a hypothesis through opaque states."""

    count: int  # how many constraints there are
    tokens: int  # constraint tokens in all: a hypothesis's bank is 0..tokens

    def start(self) -> State:
        """The state of an empty hypothesis."""
        ...

    def advance(self, state: State, token: int, banned_too: bool = False) -> State | None:
        """The state after writing ``token``; None where that writes text the output may
        never hold (``TermConstraints``' ``avoid``), unless ``banned_too``."""
        ...

    def unmet(self, state: State) -> int:
        """Constraints not met yet."""
        ...

    def progress(self, state: State) -> int:
        """Constraint tokens written so far (met constraints whole, one under way in part):
        the bank of a hypothesis."""
        ...

    def next_tokens(self, state: State) -> Sequence[int]:
        """Tokens that would take an unmet constraint one token further."""
        ...


class ConstraintBanks:
    """Dynamic beam allocation for the sentences with constraints (``BeamSteer``)."""

    def __init__(
        self,
        constraints: Sequence[Constraints | None],
        k: int,
        specials: SpecialTokens,
        config: SearchConfig,
        device: torch.device | str = "cpu",
        n_best: int = 1,
    ) -> None:
        self.constraints = [c if c is not None and c.count else None for c in constraints]
        self.k, self.specials, self.config, self.n_best = k, specials, config, n_best
        self.states: list[list[State] | None] = [
            None if c is None else [c.start()] * k for c in self.constraints
        ]
        self.steered = torch.tensor(
            [c is not None for c in self.constraints], dtype=torch.bool, device=device
        )

    def restrict_(self, log_probs: Tensor, step: int, max_lens: Tensor) -> None:
        """A beam with constraints unmet may not end, except at its length limit."""
        rows = [
            (b, j)
            for b, c in enumerate(self.constraints)
            if c is not None and step < int(max_lens[b]) - 1
            for j, state in enumerate(self._beams(b)[1])
            if c.unmet(state)
        ]
        if rows:
            sentences, beams = zip(*rows, strict=True)
            log_probs[list(sentences), list(beams), self.specials.eos] = NEG_INF

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
        steered = [b for b, c in enumerate(self.constraints) if c is not None and not done[b]]
        if not steered:
            return
        k = self.k
        vocab = log_probs.shape[-1]
        # Each beam's best token, and each beam's next constraint tokens, all sentences at once.
        rows = log_probs if len(steered) == len(log_probs) else log_probs[steered]  # no copy
        best_scores, best_tokens = top_k_by_blocks(rows.reshape(-1, vocab), 1)
        best_scores, best_tokens = (x.view(-1, k).tolist() for x in (best_scores, best_tokens))
        # A candidate (beam j, token t) is the key j * vocab + t: an int hashes faster than a
        # pair, and a search makes tens of thousands.
        forced = [  # the next constraint tokens: (sentence, key)
            (b, j * vocab + t)
            for b in steered
            for j, state in enumerate(self._beams(b)[1])
            for t in self.constraints[b].next_tokens(state)  # type: ignore[union-attr]
        ]
        by_sentence: dict[int, dict[int, float]] = {b: {} for b in steered}
        if forced:
            sentences, keys = zip(*forced, strict=True)
            flat = log_probs.reshape(log_probs.shape[0], -1)  # (n, k * V): [b, j * V + t]
            for b, key, score in zip(
                sentences, keys, flat[list(sentences), list(keys)].tolist(), strict=True
            ):
                by_sentence[b][key] = score
        top_scores, top_beam, top_token = (x[steered].tolist() for x in candidates)
        beams = []  # per steered sentence: k (score, source beam, token)
        for i, b in enumerate(steered):
            found = by_sentence[b]
            for j, (t, score) in enumerate(zip(best_tokens[i], best_scores[i], strict=True)):
                found[j * vocab + t] = score
            for score, j, t in zip(top_scores[i], top_beam[i], top_token[i], strict=True):
                found[j * vocab + t] = score
            beams.append(self._select_sentence(b, found, vocab, finished[b], history, step))
        # One write per tensor: a write per beam cost more than the choosing.
        for field, tensor in enumerate(chosen):  # scores, source beams, tokens: (n, k) each
            values = [[beam[field] for beam in rows] for rows in beams]
            tensor[steered] = torch.tensor(values, dtype=tensor.dtype, device=tensor.device)

    def _select_sentence(
        self,
        b: int,
        found: dict[int, float],
        vocab: int,
        finished: list[Hypothesis],
        history: Tensor,
        step: int,
    ) -> list[tuple[float, int, int]]:
        """Sentence b's finished hypotheses (added to ``finished``) and its k open beams,
        best first, (score, source beam, token) each, from its candidates ``found``
        ({beam * vocab + token: score})."""
        (constraints, states), eos = self._beams(b), self.specials.eos
        advance = constraints.advance
        # (score, source beam, token, state after), in the order of ``found``: equal scores
        # keep it through the sorts below (as ``allocate``'s).
        taken: list[tuple[float, int, int, State]] = []
        banned: list[tuple[float, int, int]] = []  # those that write text the output may not hold
        for key, score in found.items():
            if score == NEG_INF:
                continue
            j, t = divmod(key, vocab)
            after = states[j] if t == eos else advance(states[j], t)
            if after is None:
                banned.append((score, j, t))
            else:
                taken.append((score, j, t, after))
        if banned and all(t == eos for _, _, t, _ in taken):
            # Every open candidate is banned: better a banned text than no translation.
            taken += [(score, j, t, advance(states[j], t, True)) for score, j, t in banned]
        scores = [score for score, _, _, _ in taken]
        bank = [constraints.progress(after) for _, _, _, after in taken]
        order = sorted(range(len(taken)), key=scores.__getitem__, reverse=True)
        open_ranked = [i for i in order if taken[i][2] != eos]
        if len(open_ranked) < len(order):  # eos candidates: those allocated a slot finish
            for i in _allocate_ranked(order, bank, self.k):
                score, j, t, after = taken[i]
                if t == eos:
                    written = history[b, j, :step].tolist()
                    norm = self.config.length_norm(step + 1)  # the eos counts towards |Y|
                    unmet = constraints.unmet(after)
                    finished.append(Hypothesis(written, score / norm, score, unmet=unmet))
        picked = _allocate_ranked(open_ranked, bank, self.k)
        picked.sort(key=scores.__getitem__, reverse=True)
        dead = self.k - len(picked)  # too few candidates: beams that go nowhere
        self.states[b] = [taken[i][3] for i in picked] + [constraints.start()] * dead
        return [taken[i][:3] for i in picked] + [(NEG_INF, 0, self.specials.pad)] * dead

    def _beams(self, b: int) -> tuple[Constraints, list[State]]:
        """Sentence b's constraints and the states of its k beams (a sentence it steers)."""
        constraints, states = self.constraints[b], self.states[b]
        assert constraints is not None and states is not None, f"sentence {b} is not steered"
        return constraints, states

    def done(
        self, finished: list[list[Hypothesis]], open_scores: Tensor, step: int, max_lens: Tensor
    ) -> Tensor:
        """A sentence with constraints stops once its ``n_best`` best hypotheses meet them all
        and no open beam can beat them: it need not collect k such hypotheses, as a plain
        beam does. Its beams are spread over the banks, so k complete ones take long to come,
        and a beam that has yet to place a term only loses probability placing it; waiting
        for k cost twice the decoder steps of plain beam search on the demo's term
        sentences, the beams running on in repetitions before placing their terms."""
        rows = [b for b, c in enumerate(self.constraints) if c is not None]
        done = torch.zeros(len(self.constraints), dtype=torch.bool, device=open_scores.device)
        if rows:
            complete = [[h for h in finished[b] if not h.unmet] for b in rows]
            done[rows] = sentences_done(
                complete, open_scores[rows], step, max_lens[rows], self.n_best, self.config
            )
        return done

    def keep(self, sentences: list[int]) -> None:
        self.constraints = [self.constraints[i] for i in sentences]
        self.states = [self.states[i] for i in sentences]
        self.steered = self.steered[sentences]


def allocate(banks: Sequence[int], scores: Sequence[float], k: int) -> list[int]:
    """Dynamic beam allocation: which k candidates go on, given each one's bank (constraint
    tokens met) and score. Candidates are ranked within their bank by score; the slots go to
    the best of every bank (highest bank first), then the second best of every bank, and so
    on, so a bank left empty gives its share to the others.

    Examples:
        >>> allocate(banks=[0, 0, 0, 1, 1], scores=[-1.0, -2.0, -3.0, -5.0, -6.0], k=3)
        [3, 0, 4]
    """
    return _allocate_ranked(
        sorted(range(len(scores)), key=scores.__getitem__, reverse=True), banks, k
    )


def _allocate_ranked(ranked: Sequence[int], banks: Sequence[int], k: int) -> list[int]:
    """``allocate`` of the candidates ``ranked``, best score first (ties in a fixed order)."""
    by_bank: dict[int, list[int]] = {}  # each bank's candidates, best first
    for i in ranked:
        by_bank.setdefault(banks[i], []).append(i)
    highest_first = [by_bank[bank] for bank in sorted(by_bank, reverse=True)]
    picked: list[int] = []
    for rank in range(k):  # the rank-th best of every bank, highest bank first
        for members in highest_first:
            if rank < len(members):
                picked.append(members[rank])
                if len(picked) == k:
                    return picked
    return picked
