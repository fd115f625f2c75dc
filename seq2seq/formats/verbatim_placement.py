"""Verbatim spans put back: where each span (``formats.verbatim``) goes in a translation.

The spans are literal markup, placed by ``inline.render`` over the translation's alignment to
the source. ``settle`` first gives a span the characters where the model wrote it exactly,
and takes from every span the translation's punctuation and the characters of a glossary
term (a span is never written over a term); ``copied`` says when a translation needs no
alignment at all (it holds every span whole). Pure text: no model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from seq2seq.formats.inline import Alignment, Markup, Segment, Span, is_latin
from seq2seq.formats.verbatim import verbatim_markups

# Punctuation of a translation: read as aligned to nothing unless attention put it on the
# source's punctuation (``_punctuation``), so a span placed at the end of a sentence goes
# before its stop, not after it, and never takes the stop into its literal.
STOPS = "。！？；，、：…,.!?;:"  # punctuation, Chinese and English


def settle(
    segment: Segment, translation: str, alignment: Alignment, terms: Iterable[str] = ()
) -> Alignment:
    """``alignment`` (one source span per character of ``translation``) settled for the
    segment's verbatim spans before its markup is placed (``inline.render``): where the
    model wrote a span exactly, those characters are its own (and the others attention put
    into it are not, so they stay as written); punctuation is aligned to nothing; a glossary
    term the translation holds (``terms``: their texts) is kept whole (``_keep_whole``)."""
    spans = sorted(verbatim_markups(segment.markup), key=lambda m: m.start - m.end)  # longest first
    if not spans:
        return alignment
    settled = [
        _punctuation(c, a, segment.text, spans) for c, a in zip(translation, alignment, strict=True)
    ]
    for term in filter(None, terms):
        for match in re.finditer(re.escape(term), translation):
            _keep_whole(settled, range(*match.span()), spans)
    claimed = [False] * len(translation)
    for markup in spans:
        raw = segment.text[markup.start : markup.end]
        copy_at = _copy_of(segment.text, translation, claimed, settled, markup)
        if copy_at is None:
            continue
        for j, span in enumerate(settled):
            if span is not None and _inside(span, markup):
                settled[j] = None
        for j in range(copy_at, copy_at + len(raw)):
            settled[j], claimed[j] = (markup.start, markup.end), True
    return settled


def _punctuation(char: str, span: Span | None, text: str, spans: list[Markup]) -> Span | None:
    """A translation character's alignment, settled: a punctuation mark keeps it only where
    it came from the source's punctuation (the sentence's stop, a comma), and from inside a
    span only from that very character (the dots of ``.spreadsheet.addElement``). Aligned to
    nothing, the stop of a bold sentence fell outside its ``</b>`` and a span starting with a
    dot was written after the translation's own (``<b>doc</b>..spreadsheet``)."""
    if span is None or char not in STOPS:
        return span
    source = text[span[0] : span[1]]
    if source == char:
        return span
    from_punctuation = source != "" and all(c in STOPS for c in source)
    return span if from_punctuation and not any(_inside(span, m) for m in spans) else None


def _keep_whole(settled: Alignment, term: range, spans: list[Markup]) -> None:
    """One alignment for all the characters of a glossary term's occurrence (``term``):
    none where attention put any of them into a span (the span goes elsewhere), else its
    first character's source; a span then goes before or after the term, never into it."""
    found = [settled[j] for j in term if settled[j] is not None]
    into_span = any(_inside(a, markup) for a in found for markup in spans)
    one = None if into_span or not found else found[0]
    for j in term:
        settled[j] = one


def _inside(span: tuple[int, int], markup: Markup) -> bool:
    """Whether source characters ``span`` overlap ``markup``'s."""
    return span[0] < markup.end and markup.start < span[1]


def _copy_of(
    source: str, translation: str, claimed: list[bool], alignment: Alignment, markup: Markup
) -> int | None:
    """Where ``translation`` holds the span's text whole and unclaimed (``_whole_copies``):
    the occurrence nearest to the characters attention aligned into the span (the first,
    when none is)."""
    raw = source[markup.start : markup.end]
    aligned = [j for j, a in enumerate(alignment) if a and _inside(a, markup)]
    beside = (source[markup.start - 1 : markup.start], source[markup.end : markup.end + 1])
    found = _whole_copies(raw, translation, claimed, beside)
    if not found:
        return None
    centre = aligned[0] if aligned else 0
    return min(found, key=lambda start: abs(start - centre))


def _whole_copies(
    raw: str, translation: str, claimed: list[bool], beside: tuple[str, str] = ("", "")
) -> list[int]:
    """Where ``translation`` holds ``raw`` as written, whole (not inside a longer number or
    word, unless the source has it there too: ``beside``, its characters either side in the
    source, in either case; ``100th`` left in English holds the span ``100``) and not inside
    another span's copy (``claimed``)."""
    found = []
    for match in re.finditer(re.escape(raw), translation):
        start, end = match.span()
        before = translation[start - 1] if start else " "
        after = translation[end] if end < len(translation) else " "
        glued = (raw[0].isalnum() and is_latin(before) and before.lower() != beside[0].lower()) or (
            raw[-1].isalnum() and is_latin(after) and after.lower() != beside[1].lower()
        )
        if not glued and not any(claimed[start:end]):
            found.append(start)
    return found


def copied(spans: Iterable[str], translation: str) -> bool:
    """Whether ``translation`` holds each span whole, each copy its own (longest first, as
    ``settle`` claims them): placing the spans would then give the translation back as it
    is, so it needs no alignment."""
    claimed = [False] * len(translation)
    for raw in sorted(spans, key=len, reverse=True):
        found = _whole_copies(raw, translation, claimed)
        if not found:
            return False
        claimed[found[0] : found[0] + len(raw)] = [True] * len(raw)
    return True
