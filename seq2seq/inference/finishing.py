"""Pieces' hypotheses back into sentence translations: the last step of ``Translator``.

A sentence longer than the model takes is decoded as several pieces (``pieces.py``); what the
engine returns is one n-best list per piece, in plan order. ``finish_sentences`` regroups those
lists by sentence, joins each sentence's pieces into its n-best texts, aligns the best text to
the sentence's words where asked (``word_alignment.py``) and names the glossary terms the best
text lacks (``glossary.py``). A server calls it through ``Translator.finish`` after decoding
many requests' pieces together.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from seq2seq.data.tokenizer import TokenizerLike
from seq2seq.decoding.search import Hypothesis
from seq2seq.inference.confidence import signals
from seq2seq.inference.documents import SentenceTranslation, combine_hypotheses
from seq2seq.inference.glossary import Term, missing_terms
from seq2seq.inference.pieces import Piece
from seq2seq.inference.word_alignment import Attention, piece_alignment
from seq2seq.textio import one_line


def finish_sentences(
    sentences: Sequence[str],
    plans: list[list[Piece]],
    found: list[list[Hypothesis]],
    tokenizer: TokenizerLike,
    attention: Attention | None,
    n_best: int = 1,
    aligned: Sequence[bool] | None = None,
    terms: Sequence[Sequence[Term]] | None = None,
) -> list[SentenceTranslation]:
    """Sentence translations from their pieces' hypotheses (``found``, in plan order).

    ``aligned[i]``: also align sentence i's best text to its words, by ``attention`` (the
    engine's; None where it has none). ``terms`` (per piece, ``piece_terms``): each
    sentence's ``missing`` are those of its terms its best translation does not hold.
    """
    results, start = [], 0
    for index, (sentence, plan) in enumerate(zip(sentences, plans, strict=True)):
        end = start + len(plan)
        align = bool(aligned and aligned[index])
        result = sentence_translation(
            sentence, plan, found[start:end], n_best, tokenizer, align, attention
        )
        if terms is not None:
            best = result.texts[0] if result.texts else ""
            result.terms = _distinct_terms(terms[start:end])
            result.missing = missing_terms(result.terms, best)
        start = end
        results.append(result)
    return results


def sentence_translation(
    sentence: str,
    plan: list[Piece],
    hyps: list[list[Hypothesis]],
    n_best: int,
    tokenizer: TokenizerLike,
    align: bool,
    attention: Attention | None,
) -> SentenceTranslation:
    """One sentence's translation from its pieces' n-best lists: the k-th text joins each
    piece's k-th hypothesis (its last where a piece has fewer). ``align``: also align the best
    text to the sentence's words, by ``attention`` (monotonically where it is None)."""
    combined = combine_hypotheses(hyps, n_best)
    texts = [
        "".join(_text(found[min(k, len(found) - 1)].tokens, tokenizer) for found in hyps if found)
        for k in range(len(combined))
    ]
    result = SentenceTranslation(
        combined, texts, pieces=len(plan), windowed=any(p.windowed for p in plan)
    )
    if combined:  # a piece's eos is a step of its own: the steps are tokens + pieces
        best, source = combined[0], sum(len(piece.ids) for piece in plan)
        result.signals = signals(best.log_prob, len(best.tokens) + len(plan), source)
    if align and combined:
        words = [m.span() for m in re.finditer(r"\S+", sentence)]
        result.alignment = [
            span
            for piece, found in zip(plan, hyps, strict=True)
            if found
            for span in piece_alignment(piece, found[0], words, tokenizer, attention)
        ]
    return result


def _text(tokens: Sequence[int], tokenizer: TokenizerLike) -> str:
    """The text of output tokens, on one line (as ``Translator.text``)."""
    return one_line(tokenizer.decode(tokens))


def _distinct_terms(piece_terms: Sequence[Sequence[Term]]) -> list[Term]:
    """A sentence's terms: those of each of its pieces, each once, in order of appearance."""
    return list(dict.fromkeys(term for terms in piece_terms for term in terms))
