"""The glossary side of a translation: each piece's terms, and how they reach the search.

``GlossaryTerms`` gives ``Translator`` (``seq2seq.inference.translator``) its glossary steps:
``piece_terms`` (each piece's terms, ``glossary.piece_terms``), ``constraints`` (what each
piece's output must hold, for the constrained beam search) and ``annotation_alone`` (a model
trained with term annotation reading its terms in the source, with no constrained search).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from seq2seq.decoding.constrained import Constraints
from seq2seq.inference.engines import Engine
from seq2seq.inference.glossary import Glossary, Term, piece_terms, sentence_constraints
from seq2seq.inference.pieces import Piece


class GlossaryTerms:
    """``Translator``'s glossary steps (a base of it; it sets these attributes)."""

    engine: Engine
    tokenizer: Any
    annotates_terms: bool  # the model reads a glossary's terms in its source
    constrain_terms: bool  # ... and the constrained search still guarantees them

    @property
    def annotation_alone(self) -> bool:
        """A glossary's terms reach this model by the source annotation alone, with no
        constrained search: a model trained with term annotation, and the search switched off
        (``constrain_terms``) or missing from the engine (CTranslate2)."""
        return self.annotates_terms and not (
            self.constrain_terms and getattr(self.engine, "constrains", False)
        )

    def piece_terms(
        self, sentences: Sequence[str], plans: list[list[Piece]], glossary: Glossary | None
    ) -> list[list[Term]]:
        """The glossary terms of each piece, in plan order (``glossary.piece_terms``)."""
        return piece_terms(glossary, sentences, plans)

    def constraints(
        self, terms: Sequence[Sequence[Term]], sources: Sequence[str] | None = None
    ) -> list[Constraints | None] | None:
        """Each piece's constraints (None where it has no term); None when no piece has any.
        ``sources``: each piece's English (``piece_texts``), which keeps another word of it
        free to take a translation the terms' other words share (``beside_texts``)."""
        if not any(terms):
            return None
        if self.annotation_alone:
            return None
        if not getattr(self.engine, "constrains", False):
            raise ValueError(
                "glossaries need the torch engine (CTranslate2 has no constrained beam search)"
            )
        return sentence_constraints(self.tokenizer, terms, sources or [None] * len(terms))
