"""Each character of a translation aligned to the source word it was translated from.

A sentence's translation is aligned piece by piece (``piece_alignment``): each output token
takes the source token it attends to most (an engine's ``attention``: mean cross-attention over
layers and heads), and that token's characters in the sentence. An engine without attention
(CTranslate2) gets a monotonic alignment over the piece's words. ``documents.py`` places inline
markup by these alignments; ``needed_alignments`` skips a sentence whose verbatim spans its
translation already holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from seq2seq.data.tokenizer import TokenizerLike
from seq2seq.decoding.search import Hypothesis
from seq2seq.formats.inline import Alignment, monotonic_alignment
from seq2seq.formats.verbatim_placement import copied
from seq2seq.inference.pieces import WORD_START, Piece
from seq2seq.textio import one_line

Span = tuple[int, int]  # characters [start, end) of the sentence
# (source ids, output ids) -> (T + 1, S) attention of each output token (and eos) over the source
Attention = Callable[[list[int], list[int]], torch.Tensor]
# Many (source ids, output ids) pairs -> their attentions, in one go (``TorchEngine.attentions``)
Attentions = Callable[[list[tuple[list[int], list[int]]]], list[torch.Tensor]]


def attention_ahead(
    attentions: Attentions,
    plans: list[list[Piece]],
    found: list[list[Hypothesis]],
    aligned: Sequence[bool],
) -> Attention:
    """The attention every piece of the ``aligned`` sentences will ask ``piece_alignment``
    for, computed together (a forward pass per batch of pieces, not one per piece: a Word
    file with a bold word in each paragraph aligns every sentence), answered from a table."""
    pairs, start = {}, 0
    for align, plan in zip(aligned, plans, strict=True):
        for piece, hyps in zip(plan, found[start : start + len(plan)], strict=True):
            if align and hyps and piece.ids:
                pairs[tuple(piece.ids), tuple(hyps[0].tokens)] = None
        start += len(plan)
    keys = list(pairs)
    table = dict(zip(keys, attentions([(list(s), list(t)) for s, t in keys]), strict=True))
    return lambda source, target: table[tuple(source), tuple(target)]


def piece_alignment(
    piece: Piece,
    best: Hypothesis,
    words: list[Span],
    tokenizer: TokenizerLike,
    attention: Attention | None,
) -> Alignment:
    """For each character of ``best``'s text (``piece``'s translation): the span of the
    sentence word its token attends to most; ``words``: the sentence's word spans."""
    first, last = piece.words
    own = words[first : max(first + 1, last)] or [(0, 0)]
    text = one_line(tokenizer.decode(best.tokens))
    if attention is None or not piece.ids:
        low, high = own[0][0], own[-1][1]
        return [
            None if span is None else (low + span[0], low + span[1])
            for span in monotonic_alignment(high - low, len(text))
        ]
    weights = attention(piece.ids, list(best.tokens))  # (T + 1, S)
    token_span = _source_spans(piece.ids, tokenizer, own)
    spans: Alignment = []
    start = 0
    for t, end in enumerate(_token_ends(best, tokenizer)):
        span = token_span[int(weights[t].argmax())]
        end = min(end, len(text))
        chunk = text[start:end]
        space = len(chunk) - len(chunk.lstrip())  # a word's leading space is between words
        spans += [None] * space + [span] * (end - start - space)
        start = end
    return spans + [None] * (len(text) - len(spans))


def _token_ends(best: Hypothesis, tokenizer: TokenizerLike) -> list[int]:
    """Where each output token's text ends in the decoded output (kept monotone: a piece can
    change how the text before it decodes)."""
    ends, longest = [], 0
    for k in range(1, len(best.tokens) + 1):
        longest = max(longest, len(tokenizer.decode(best.tokens[:k])))
        ends.append(longest)
    return ends


def _source_spans(ids: list[int], tokenizer: TokenizerLike, words: list[Span]) -> list[Span | None]:
    """For each source token, the characters of the sentence it spells: its word's, narrowed
    by the lengths of the pieces before it in the word (so "." in "tea." is apart from
    "tea"). None before the first word (a language token); an eos counts with the last word."""
    spans: list[Span | None] = []
    word, position = -1, 0
    for token in ids:
        piece = tokenizer.id_to_piece(token)
        if piece.startswith(WORD_START) and word + 1 < len(words):
            word += 1
            position = words[word][0]
        if word < 0:
            spans.append(None)
            continue
        byte_piece = piece.startswith("<") and piece.endswith(">")
        surface = 1 if byte_piece else len(piece.lstrip(WORD_START))
        start, end = words[word]
        low = min(position, end - 1)
        spans.append((low, max(low + 1, min(end, position + surface))))
        position += surface
    return spans


def needed_alignments(
    aligned: Sequence[bool | tuple[str, ...]] | None,
    plans: list[list[Piece]],
    found: list[list[Hypothesis]],
    tokenizer: TokenizerLike,
) -> list[bool] | None:
    """Which sentences to align (``TextBatch.aligned``, settled on the best translations,
    ``found`` per piece in plan order): a sentence whose only markup is verbatim spans needs
    no alignment when its translation holds each span whole (``verbatim_placement.copied``: placing
    them would change nothing; the alignment costs a forward pass per sentence)."""
    if aligned is None:
        return None
    needed, start = [], 0
    for flag, plan in zip(aligned, plans, strict=True):
        pieces = found[start : start + len(plan)]
        start += len(plan)
        if isinstance(flag, bool):
            needed.append(flag)
            continue
        text = "".join(one_line(tokenizer.decode(hyps[0].tokens)) for hyps in pieces if hyps)
        needed.append(not copied(flag, text))
    return needed
