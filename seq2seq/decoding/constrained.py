"""Lexically constrained beam search: target phrases that must appear in the output.

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

Constraints are tracked on the *text* a hypothesis writes (``TermConstraints``), not on token
ids: SentencePiece spells a Chinese term differently by its neighbours ("老师" alone, "的老师"
after 的), and a term the model writes in pieces of its own still counts as met.

Like ``seq2seq.decoding.search``, this module imports no model.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Protocol, cast

import torch
from torch import Tensor

from seq2seq.decoding.search import (
    NEG_INF,
    Hypothesis,
    Scorer,
    SearchConfig,
    SpecialTokens,
    beam_search,
    sentences_done,
    top_k_by_blocks,
)

State = Hashable
_UNSEEN = -1  # TermConstraints: a move not worked out yet (a state is a number >= 0, or None)
TermState = tuple[int, bytes, bool]  # a TermConstraints state: phrases met, tail, started


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


class TermConstraints:
    """Target phrases that must appear in a hypothesis's text, followed on that text.

    A state stands for (phrases met as a bit mask, the last bytes written, whether anything was
    written), numbered. A phrase is met when its UTF-8 bytes occur in the text, whatever tokens
    wrote it. One under way is the longest of its byte prefixes that the text ends with (bytes,
    so that a character written in byte pieces counts as it comes); its next token is the first
    of ``spell`` of the rest. A phrase not under way may start with any token whose text ends
    with a beginning of it ("的老" before "师"), so that it can begin inside a piece.

    The bank (``progress``) counts constraint tokens, as Post & Vilar's: a met phrase the
    tokens of its spelling, one under way those its written part saves from the rest's
    spelling. A coarser bank (phrases met, plus one while one is under way) loses every
    phrase longer than a token: a hypothesis two tokens into it then competes with those
    that have just begun, and loses to them.

    A phrase the vocabulary cannot write at all (``spell`` gives []) is no constraint: it could
    never be met, and would only keep every hypothesis from ending before its length limit.

    ``avoid``: texts the output may never hold, followed on the same bytes as the phrases: a
    glossary term's English translated a second time, by another word ("出租车的士",
    ``glossary.beside_texts``). ``advance`` gives None for a token that would complete one,
    unless ``banned_too`` (the search takes a banned candidate only when a sentence has no
    other open one). A text inside a phrase is not avoided: it would ban the phrase.

    Args:
        phrases: the target texts (repeats count once).
        surfaces: the bytes each token id adds to the text (a word-start mark as a space).
        spell: ``spell(text, first)``: token ids writing ``text`` at the start of the output
            (``first``) or after other text; [] where it cannot be written.
        avoid: texts no output may hold.
    """

    def __init__(
        self,
        phrases: Sequence[str],
        surfaces: Sequence[bytes],
        spell: Callable[[str, bool], list[int]],
        avoid: Sequence[str] = (),
    ) -> None:
        self.phrases = [p for p in dict.fromkeys(phrases) if spell(p, False) and spell(p, True)]
        self.count = len(self.phrases)
        self.surfaces = surfaces
        self._bytes = [phrase.encode("utf-8") for phrase in self.phrases]
        # A text inside a phrase would ban the phrase itself: not avoided.
        self._avoid = [
            text.encode("utf-8")
            for text in dict.fromkeys(avoid)
            if text and not any(text in phrase for phrase in self.phrases)
        ]
        # Beginnings of the texts to avoid: a tail keeps the longest, whatever is met.
        self._avoid_starts = {text[:end] for text in self._avoid for end in range(1, len(text))}
        self._keep = max(map(len, self._bytes + self._avoid), default=1) - 1
        # Per phrase, once r of its bytes are written: the next token, and the tokens that
        # counts as written. The tokens it may start with; the first of its spelling at the
        # start of the output; its length in tokens.
        self._next: list[list[int | None]] = []
        self._written: list[list[int]] = []
        self._entries: list[list[int]] = []
        self._first: list[list[int]] = []
        self._length: list[int] = []
        for phrase in self.phrases:
            rests = _rest_spellings(phrase, surfaces, spell)
            whole = len(rests[0])
            self._next.append([rest[0] if rest else None for rest in rests])
            self._written.append(
                [min(whole - 1, max(0, whole - len(rest))) if rest else 0 for rest in rests]
            )
            self._entries.append(_tokens_ending_in(phrase, surfaces))
            self._first.append(spell(phrase, True)[:1])
            self._length.append(whole)
        self.tokens = sum(self._length)
        # States are numbered as they are reached; what the search asks of a state is worked
        # out once, when it is first reached: an int indexes lists where a (met, tail,
        # started) tuple would be hashed at every look-up, and a search asks thousands.
        self._states: list[TermState] = []
        self._numbers: dict[TermState, int] = {}
        self._moves: list[dict[int, int | None]] = []  # per state: token -> the state after it
        self._unmet: list[int] = []
        self._progress: list[int] = []
        self._next_tokens: list[tuple[int, ...]] = []
        self._beginnings: dict[int, set[bytes]] = {}  # per mask of phrases met: the others' starts
        self._number((0, b"", False))

    def start(self) -> State:
        return 0

    def advance(self, state: State, token: int, banned_too: bool = False) -> State | None:
        moves = self._moves[cast(int, state)]
        found = moves.get(token, _UNSEEN)
        if found == _UNSEEN or (found is None and banned_too):
            met, tail, _ = self._states[cast(int, state)]
            text = tail + self.surfaces[token]
            for c, phrase in enumerate(self._bytes):
                if not met >> c & 1 and phrase in text:
                    met |= 1 << c
            found = self._number((met, self._tail(met, text), True))
            if not banned_too:  # a banned move is kept as None: only a fallback takes it
                found = None if any(avoided in text for avoided in self._avoid) else found
                moves[token] = found
        return found

    def _tail(self, met: int, text: bytes) -> bytes:
        """The longest end of ``text`` that begins a phrase not met or a text to avoid: all a
        state needs to keep of the text (either still to come starts there or later).
        Histories that differ before it reach the same state, so ``advance`` finds its answer
        already worked out."""
        beginnings = self._beginnings.get(met)
        if beginnings is None:
            unmet = [phrase for c, phrase in enumerate(self._bytes) if not met >> c & 1]
            beginnings = self._beginnings[met] = self._avoid_starts | {
                phrase[:end] for phrase in unmet for end in range(1, len(phrase))
            }
        for start in range(max(0, len(text) - self._keep), len(text)):
            if text[start:] in beginnings:
                return text[start:]
        return b""

    def unmet(self, state: State) -> int:
        return self._unmet[cast(int, state)]

    def progress(self, state: State) -> int:
        return self._progress[cast(int, state)]

    def next_tokens(self, state: State) -> Sequence[int]:
        return self._next_tokens[cast(int, state)]

    def _number(self, state: TermState) -> int:
        """The number of a state, and what the search asks of it, worked out when first seen."""
        number = self._numbers.get(state)
        if number is None:
            number = self._numbers[state] = len(self._states)
            met, tail, started = state
            progress, tokens = 0, []
            for c, phrase in enumerate(self._bytes):
                if met >> c & 1:
                    progress += self._length[c]
                    continue
                r = next((r for r in range(len(phrase) - 1, 0, -1) if tail.endswith(phrase[:r])), 0)
                progress += self._written[c][r]
                tokens += [self._next[c][r], *(() if r else self._entries[c])]
                tokens += [] if r or started else self._first[c]
            self._states.append(state)
            self._moves.append({})
            self._unmet.append(self.count - bin(met).count("1"))
            self._progress.append(progress)
            self._next_tokens.append(tuple(t for t in dict.fromkeys(tokens) if t is not None))
        return number


def _rest_spellings(
    phrase: str, surfaces: Sequence[bytes], spell: Callable[[str, bool], list[int]]
) -> list[list[int]]:
    """For each count r of the phrase's bytes written, tokens writing the other bytes: at a
    character boundary ``spell``'s; inside a character, byte pieces to finish it first."""
    byte_token = _vocabulary_index(surfaces)[1]
    data = phrase.encode("utf-8")
    rests, position = [], 0
    for index, char in enumerate(phrase):
        width = len(char.encode("utf-8"))
        rests.append(spell(phrase[index:], False))
        after = spell(phrase[index + 1 :], False) if index + 1 < len(phrase) else []
        for inside in range(position + 1, position + width):
            found = [byte_token.get(data[i : i + 1]) for i in range(inside, position + width)]
            pieces = [piece for piece in found if piece is not None]
            unwritable = len(pieces) < len(found) or (index + 1 < len(phrase) and not after)
            rests.append([] if unwritable else [*pieces, *after])
        position += width
    return rests


def _tokens_ending_in(phrase: str, surfaces: Sequence[bytes]) -> list[int]:
    """Tokens whose text ends with a beginning of ``phrase`` (at a character boundary):
    where a phrase can start inside a piece ("的老" before "师"), but never glued to a Latin
    letter or digit before it ("hi" does not start "iPhone")."""
    by_last_character = _vocabulary_index(surfaces)[0]
    found = []
    for end in range(1, len(phrase) + 1):
        prefix = phrase[:end].encode("utf-8")
        for token in by_last_character.get(phrase[end - 1], ()):
            before = surfaces[token][: len(surfaces[token]) - len(prefix)]
            if surfaces[token].endswith(prefix) and not before[-1:].isalnum():
                found.append(token)
    return found


_INDEXES: dict[int, tuple[Sequence[bytes], dict[str, list[int]], dict[bytes, int]]] = {}


def _vocabulary_index(surfaces: Sequence[bytes]) -> tuple[dict[str, list[int]], dict[bytes, int]]:
    """Tokens by the last character of their text, and the token of each single byte; built
    once per vocabulary (keyed by the surfaces' identity, which the entry keeps alive)."""
    if id(surfaces) not in _INDEXES:
        by_last: dict[str, list[int]] = {}
        single: dict[bytes, int] = {}
        for token, surface in enumerate(surfaces):
            text = surface.decode("utf-8", errors="ignore").rstrip()
            if text:
                by_last.setdefault(text[-1], []).append(token)
            if len(surface) == 1:
                single.setdefault(surface, token)
        _INDEXES[id(surfaces)] = (surfaces, by_last, single)
    _, by_last_character, byte_token = _INDEXES[id(surfaces)]
    return by_last_character, byte_token
