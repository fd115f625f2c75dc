"""The encoding side of a translation: what ``Translator``'s model reads, and how a batch of
sentences becomes its pieces' source ids.

``SourceEncoding`` gives ``Translator`` (``seq2seq.inference.translator``) its encoding steps
over its tokenizer, truecaser and engine's source limit: ``plan`` (the pieces each sentence is
decoded as, ``reading.plan_sentences``), ``encode_pieces`` (their ids, a glossary's terms
annotated inline for a model trained so), ``encode`` and ``encode_sentence`` (lines and
sentences as a server or a test encodes them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from seq2seq.data.truecase import Truecaser
from seq2seq.inference.engines import Engine
from seq2seq.inference.glossary import Term, annotate_pieces
from seq2seq.inference.pieces import Piece, encode_sentence
from seq2seq.inference.reading import encode_lines, plan_sentences


class SourceEncoding:
    """``Translator``'s encoding steps (a base of it; it sets these attributes)."""

    engine: Engine
    tokenizer: Any
    truecaser: Truecaser
    annotates_terms: bool

    def plan(self, sentences: Sequence[str]) -> list[list[Piece]]:
        """The pieces each sentence is decoded as: itself, or for a sentence longer than the
        engine takes, its clauses (cut after , ; : and before dashes) packed up to the limit,
        and a clause still too long cut into windows of tokens at word starts. A SHOUTED or
        Title Cased sentence is read in sentence case (``self.truecaser``; same words)."""
        limit = self.engine.source_limit()
        return plan_sentences(sentences, self.tokenizer, self.truecaser, limit)

    def encode_pieces(
        self, sentences: Sequence[str], plans: list[list[Piece]], terms: Sequence[Sequence[Term]]
    ) -> list[list[int]]:
        """Each piece's source ids, in plan order; with a model trained on term annotation,
        its glossary ``terms`` annotated inline (``annotate_pieces``), as it was trained."""
        if self.annotates_terms and any(terms):
            limit = self.engine.source_limit()
            return annotate_pieces(self.tokenizer, sentences, plans, terms, self.truecaser, limit)
        return [piece.ids for plan in plans for piece in plan]

    def encode(self, lines: Sequence[str]) -> list[list[int]]:
        """Normalised, truecased, tokenised sources, cut to the engine's source limit (with a
        warning naming the lines cut: ``reading.encode_lines``)."""
        return encode_lines(lines, self.tokenizer, self.truecaser, self.engine.source_limit())

    def encode_sentence(self, text: str) -> list[int]:
        """Source ids of one sentence (normalised, truecased; [] for white space), not cut."""
        return encode_sentence(self.truecaser.normalize(text), self.tokenizer)
