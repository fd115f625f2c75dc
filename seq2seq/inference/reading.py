"""What a model reads: each line normalised (NFKC, white space collapsed), read in sentence case
when it is SHOUTED or Title Cased (the truecaser, :mod:`seq2seq.data.truecase`), tokenised and
fitted to the engine's source limit: a line cut (``encode_lines``), a sentence planned as pieces
(``plan_sentences``). ``Translator.encode`` and ``Translator.plan`` are these over its engine.

Every path reads NFKC first: the truecaser decides on a line's NFKC form, so ``ＷＨＥＲＥ ＩＳ
ＴＯＭ？`` is ``Where is Tom?`` whether it was normalised before (``encode_lines``) or after
(``plan_sentences``, whose pieces ``encode_sentence`` normalises).
"""

from __future__ import annotations

from collections.abc import Sequence

from seq2seq.data.clean import normalize_en
from seq2seq.data.tokenizer import TokenizerLike
from seq2seq.data.truecase import Truecaser
from seq2seq.inference.pieces import Piece, cut_source, sentence_pieces
from seq2seq.textio import warn_lines


def encode_lines(
    lines: Sequence[str], tokenizer: TokenizerLike, truecaser: Truecaser, limit: int
) -> list[list[int]]:
    """Normalised, truecased, tokenised sources, cut to ``limit`` tokens (with a warning
    naming the lines cut)."""
    # A blank line stays blank (a Marian model's tokenizer would give it a language token
    # and an eos to translate).
    texts = [truecaser.normalize(normalize_en(line)) for line in lines]
    encoded = [tokenizer.encode_source(text) if text.strip() else [] for text in texts]
    cut = [i + 1 for i, ids in enumerate(encoded) if len(ids) > limit]
    for i in cut:
        encoded[i - 1] = cut_source(encoded[i - 1], limit, tokenizer)
    if cut:
        warn_lines(f"truncated {len(cut)} over-long input line(s) to {limit} tokens", cut)
    return encoded


def plan_sentences(
    sentences: Sequence[str], tokenizer: TokenizerLike, truecaser: Truecaser, limit: int
) -> list[list[Piece]]:
    """The pieces each sentence is decoded as (``pieces.sentence_pieces``), a SHOUTED or Title
    Cased sentence read in sentence case first (same words, so the pieces' word spans are the
    sentence's as written)."""
    return [sentence_pieces(truecaser.normalize(s), limit, tokenizer) for s in sentences]
