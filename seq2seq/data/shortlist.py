"""A lexical shortlist learnt from training pairs: for each source piece, the target pieces it
best predicts (``seq2seq shortlist``; the format and the decoding are
``seq2seq.decoding.shortlist``'s).

The scores are IBM Model 1's translation probabilities p(t | s) (Brown et al., 1993), what
Marian's shortlists read from fast_align's lexical table: a few rounds of EM over the token-id
pairs, each target piece explained by the pieces of its source or by NULL. Raw co-occurrence
ranks the frequent target pieces (的, 。) first for every source piece; EM gives them to the
pieces that explain them, and NULL takes what none does.

A sentence's candidates are then: the ``per_source`` best pieces of each of its source pieces;
the ``frequent`` most frequent target pieces; the end of sentence and the byte-fallback pieces
(a character outside the vocabulary is written byte by byte); and each source piece itself,
with and without its word-start ``▁``, so that what a translation copies (URLs, numbers,
names: ``seq2seq.formats.verbatim``'s spans, which the model writes itself) can still be
written. Everything here is numpy over ids: a corpus of 58,000 pairs takes seconds a round,
counted ``CHUNK`` pairs at a time; ``max_pairs`` bounds the time on a larger one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from seq2seq.decoding.shortlist import Shortlist

CHUNK = 4_000  # pairs whose (source, target) links are laid out together
WORD_START = "\u2581"  # SentencePiece's ▁


@dataclass(frozen=True)
class ShortlistSettings:
    """How much of the vocabulary a sentence keeps.

    Attributes:
        per_source: target pieces per source piece, the most probable.
        frequent: the most frequent target pieces, candidates of every sentence.
        iterations: rounds of IBM Model 1's EM.
        min_probability: a candidate below it is left out, however few the piece has.
    """

    # Chosen on the demo's dev split (200 sentences, beam 5, 2026-11-28): K 10, N 50 and
    # 0.02 kept 365 of 8,000 pieces a sentence and ran 1.53x faster, BLEU +0.74; K 50, N 300,
    # 0.001 kept 722 and ran 1.16x faster (docs/translating.md#vocabulary-shortlist).
    per_source: int = 10
    frequent: int = 50
    iterations: int = 5
    min_probability: float = 0.02

    def __post_init__(self) -> None:
        for name in ("per_source", "frequent", "iterations"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"shortlist {name} must be an integer >= 0, got {value!r}")
        if not 0.0 <= self.min_probability <= 1.0:
            raise ValueError(
                f"shortlist min_probability must be in [0, 1], got {self.min_probability!r}"
            )


@dataclass(frozen=True)
class Vocabulary:
    """What learning needs of a tokenizer: its size, pieces and special ids."""

    size: int
    id_to_piece: Callable[[int], str]
    specials: frozenset[int]  # pad, unk, bos, eos (and sep): never counted
    eos: int
    bytes: tuple[int, ...] = ()


def learn_shortlist(
    pairs: Iterable[tuple[Sequence[int], Sequence[int]]],
    vocabulary: Vocabulary,
    settings: ShortlistSettings = ShortlistSettings(),  # noqa: B008 (frozen)
    progress: Callable[[int], None] | None = None,
) -> Shortlist:
    """The shortlist of (source ids, target ids) ``pairs``; ``progress`` is told the pairs
    read and then each EM round's pairs."""
    links = Links.of(pairs, vocabulary, progress)
    probability = links.model_1(settings.iterations, progress)
    best = links.best_targets(probability, settings.per_source, settings.min_probability)
    pieces = {vocabulary.id_to_piece(t): t for t in range(vocabulary.size)}
    candidates = {}
    for source in range(vocabulary.size):
        if source in vocabulary.specials:
            continue
        copies = _spellings(vocabulary.id_to_piece(source), pieces)
        candidates[source] = [*copies, *best.get(source, ())]
    frequent = [t for t, _ in links.target_counts.most_common(settings.frequent)]
    always = [*frequent, *vocabulary.bytes]
    return Shortlist(always, candidates, vocabulary.size, vocabulary.eos)


def _spellings(piece: str, pieces: dict[str, int]) -> list[int]:
    """The piece itself, and the same text with or without its word start (a word copied
    into Chinese starts no word there, and one written after a space does)."""
    bare = piece.removeprefix(WORD_START)
    return [pieces[p] for p in dict.fromkeys((piece, bare, WORD_START + bare)) if p in pieces]


class Links:
    """Every (source piece or NULL, target piece) link of a corpus's pairs, in chunks, each
    link as the index of its distinct (source, target) pair (``keys``)."""

    def __init__(self, vocab: int) -> None:
        self.null = vocab  # NULL's id: one past the vocabulary
        self.width = vocab + 1
        # (links, sources per target occurrence, pairs) of each chunk
        self.chunks: list[tuple[np.ndarray, np.ndarray, int]] = []
        self.target_counts: Counter[int] = Counter()
        self.pairs = 0

    @classmethod
    def of(
        cls,
        pairs: Iterable[tuple[Sequence[int], Sequence[int]]],
        vocabulary: Vocabulary,
        progress: Callable[[int], None] | None = None,
    ) -> Links:
        """The links of ``pairs``, special ids left out; then ``keys`` and the link indices."""
        links, chunk = cls(vocabulary.size), []
        for source, target in pairs:
            chunk.append(_without(source, target, vocabulary.specials))
            if len(chunk) == CHUNK:
                links._add(chunk, progress)
                chunk = []
        if chunk:
            links._add(chunk, progress)
        if not links.pairs:
            raise ValueError("no sentence pairs to learn a shortlist from")
        links._index()
        return links

    def _add(self, chunk: list[tuple[list[int], list[int]]], progress) -> None:  # noqa: ANN001
        """Lay out a chunk's links, target occurrence by target occurrence: for each, the
        pieces of its source and NULL."""
        sources = [[*source, self.null] for source, _ in chunk]
        targets = [target for _, target in chunk]
        for target in targets:
            self.target_counts.update(target)
        keys = [
            (np.asarray(s, dtype=np.int64)[None, :] * self.width + np.asarray(t)[:, None]).ravel()
            for s, t in zip(sources, targets, strict=True)
            if t
        ]
        per_target = np.concatenate(
            [np.full(len(t), len(s), dtype=np.int64) for s, t in zip(sources, targets, strict=True)]
        )
        links = np.concatenate(keys) if keys else np.zeros(0, np.int64)
        self.chunks.append((links, per_target, len(chunk)))
        self.pairs += len(chunk)
        if progress is not None:
            progress(len(chunk))

    def _index(self) -> None:
        """``keys``: the distinct links, sorted; each chunk's links become indices into them."""
        self.keys = np.unique(np.concatenate([np.unique(keys) for keys, _, _ in self.chunks]))
        self.chunks = [
            (np.searchsorted(self.keys, keys).astype(np.int32), per_target, pairs)
            for keys, per_target, pairs in self.chunks
        ]

    def model_1(self, iterations: int, progress: Callable[[int], None] | None = None) -> np.ndarray:
        """p(target | source) of each distinct link after ``iterations`` rounds of EM (from
        uniform: the first round's counts are co-occurrences shared among each target's
        sources)."""
        sources = self.keys // self.width
        probability = np.ones(len(self.keys))
        for _ in range(iterations):
            counts = np.zeros(len(self.keys))
            for index, per_target, pairs in self.chunks:
                weights = probability[index]
                starts = np.cumsum(per_target) - per_target
                # Each target occurrence's weight shared among the sources that may explain it.
                shares = np.add.reduceat(weights, starts) if len(starts) else weights[:0]
                counts += np.bincount(
                    index, weights / np.repeat(shares, per_target), minlength=len(self.keys)
                )
                if progress is not None:
                    progress(pairs)
            totals = np.bincount(sources, counts)
            probability = counts / totals[sources]
        return probability

    def best_targets(
        self, probability: np.ndarray, per_source: int, floor: float
    ) -> dict[int, list[int]]:
        """Source id -> its ``per_source`` most probable targets (at least ``floor``), NULL's
        left out."""
        sources, targets = self.keys // self.width, self.keys % self.width
        order = np.lexsort((-probability, sources))  # by source, most probable first
        sources, targets, probability = sources[order], targets[order], probability[order]
        first = np.searchsorted(sources, sources)  # where each source's run starts
        rank = np.arange(len(sources)) - first
        kept = (rank < per_source) & (probability >= floor) & (sources != self.null)
        best: dict[int, list[int]] = {}
        for source, target in zip(sources[kept].tolist(), targets[kept].tolist(), strict=True):
            best.setdefault(source, []).append(target)
        return best


def _without(
    source: Sequence[int], target: Sequence[int], specials: frozenset[int]
) -> tuple[list[int], list[int]]:
    return (
        [int(t) for t in source if int(t) not in specials],
        [int(t) for t in target if int(t) not in specials],
    )
