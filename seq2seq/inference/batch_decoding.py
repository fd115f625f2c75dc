"""The decoding side of a translation: sources already encoded decoded in token batches, and
their hypotheses finished into sentence translations.

``BatchDecoding`` gives ``Translator`` (``seq2seq.inference.translator``) its decoding steps
over its engine: ``decode_encoded`` (sources batched by tokens and by beam, a batch out of
memory split and retried), ``finish`` (pieces' hypotheses back into sentences, aligned where
asked: ``finishing.finish_sentences``) and ``text`` (output tokens as one line of text).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from seq2seq.decoding.constrained import Constraints
from seq2seq.decoding.search import Hypothesis
from seq2seq.inference.documents import SentenceTranslation
from seq2seq.inference.engines import Engine
from seq2seq.inference.finishing import finish_sentences
from seq2seq.inference.glossary import Term, constrained_beam
from seq2seq.inference.memory_split import split_on_oom
from seq2seq.inference.pieces import MAX_TOKENS, Piece, token_batches
from seq2seq.inference.word_alignment import attention_ahead, needed_alignments
from seq2seq.textio import one_line


class BatchDecoding:
    """``Translator``'s decoding steps (a base of it; it sets these attributes)."""

    engine: Engine
    tokenizer: Any
    _split_batches: int  # batches split after running out of memory, in the last call

    def decode_encoded(
        self,
        encoded: Sequence[list[int]],
        beam_size: int = 5,
        max_tokens: int = MAX_TOKENS,
        n_best: int = 1,
        on_batch: Callable[[int], None] | None = None,
        constraints: Sequence[Constraints | None] | None = None,
    ) -> list[list[Hypothesis]]:
        """``translate_hypotheses`` of sources already encoded by ``encode`` (a server
        encodes each request as it arrives and decodes many requests' sources together).

        ``constraints[i]``: what source i's output must hold. Sources are batched by their
        beam (``constrained_beam`` for those with constraints): a source without constraints
        decodes exactly as without them, whatever its batch holds (the constrained search
        leaves its beams to plain beam search), and sharing batches saves decoder steps.
        """
        outputs: list[list[Hypothesis]] = [[] for _ in encoded]
        self._split_batches = 0
        constraints = constraints or [None] * len(encoded)
        groups: dict[int, list[int]] = {}  # beam -> sources
        for i, c in enumerate(constraints):
            beam = beam_size if c is None else constrained_beam(beam_size, c)
            groups.setdefault(beam, []).append(i)
        for beam, group in sorted(groups.items()):
            budget = self.engine.batch_budget(max_tokens, beam)
            for batch in token_batches([encoded[i] for i in group], budget):
                rows = [group[i] for i in batch]
                wanted = [constraints[i] for i in rows]
                if all(c is None for c in wanted):
                    wanted = None  # engines without constrained search take none
                found, splits = split_on_oom(
                    self.engine, [encoded[i] for i in rows], beam, n_best, wanted
                )
                self._split_batches += splits
                for index, hyps in zip(rows, found, strict=True):
                    outputs[index] = hyps
                if on_batch is not None:
                    on_batch(len(batch))
        if self._split_batches:
            print(
                f"warning: {self._split_batches} batch(es) ran out of memory and were split and "
                "retried; a smaller --max-tokens avoids the retries",
                file=sys.stderr,
            )
        return outputs

    def finish(
        self,
        sentences: Sequence[str],
        plans: list[list[Piece]],
        found: list[list[Hypothesis]],
        n_best: int = 1,
        aligned: Sequence[bool | tuple[str, ...]] | None = None,
        terms: Sequence[Sequence[Term]] | None = None,
    ) -> list[SentenceTranslation]:
        """Sentence translations from their pieces' hypotheses (``found``, in plan order);
        ``aligned``: which to align (a sentence whose verbatim spans its translation holds is
        not: ``needed_alignments``); ``terms`` (per piece, ``piece_terms``): each sentence's
        ``missing`` are those of its terms its best translation does not hold
        (``finishing.finish_sentences``)."""
        attention = getattr(self.engine, "attention", None)  # CTranslate2 has none
        aligned = needed_alignments(aligned, plans, found, self.tokenizer)
        attentions = getattr(self.engine, "attentions", None)  # many at once
        if attentions is not None and aligned is not None and any(aligned):
            attention = attention_ahead(attentions, plans, found, aligned)
        return finish_sentences(
            sentences, plans, found, self.tokenizer, attention, n_best, aligned, terms
        )

    def text(self, tokens: Sequence[int]) -> str:
        """The text of output tokens, on one line."""
        return one_line(self.tokenizer.decode(tokens))
