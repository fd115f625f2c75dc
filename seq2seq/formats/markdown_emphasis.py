"""Markdown emphasis written so that it renders beside Chinese (:mod:`seq2seq.formats.markdown`
reads the blocks; this module writes a segment's ``*``, ``**`` and ``~~``).

A delimiter run renders only where CommonMark's flanking rules let it open or close, and
Chinese breaks them where English never did: no spaces between words, punctuation of its own.
The markers are first placed with the rest of the markup (by alignment), then settled where
they landed:

- two spans of the same marker side by side are written apart (``**绿色****和**``, a run of
  four stars, is not two spans; ``**绿色** **和**`` is), and two different ones where together
  they would not render (``*甲***（**``);
- white space just inside a marker goes outside it (``** NodeJS**`` does not open);
- where punctuation is just inside a marker and a letter just outside (``是*“很”*的``,
  ``在**`--help`**``: a code span starts with punctuation), a space is written outside the
  marker, which then flanks (``是 *“很”* 的``), as Chinese text sets Latin words and code
  apart anyway.

Each segment is then parsed again: if its emphasis is still not the one written (the same
em/strong/strikethrough, in the same order), the whole segment is written with HTML tags
instead (``<em>``, ``<strong>``, ``<del>``), which CommonMark renders wherever they stand but a
renderer with raw HTML off does not: hence markers first.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from seq2seq.formats.inline import Alignment, Markup, Segment, render
from seq2seq.formats.markdown_inline import parser

_HTML = {"*": ("<em>", "</em>"), "**": ("<strong>", "</strong>"), "~~": ("<del>", "</del>")}
_EMPHASIS = {"*": "em", "**": "strong", "~~": "s"}  # marker: markdown-it's token name
# Markers are placed as noncharacters around the marker (never in text, never escaped) and
# settled once the translation is written around them.
_OPEN, _CLOSE, _END = "\ufdd0", "\ufdd1", "\ufdd2"
_PLACED = re.compile(f"([{_OPEN}{_CLOSE}])([*~]+){_END}")
# White space as markdown-it reads it beside a marker (its isWhiteSpace)
_WHITE = " \t\n\r\f\v\u00a0\u1680\u202f\u205f\u3000" + "".join(map(chr, range(0x2000, 0x200B)))


@dataclass
class _Marker:
    opens: bool
    marker: str


@dataclass
class MarkdownSegment(Segment):
    """A segment of Markdown, whose emphasis markers are settled where they would not render,
    else written as HTML tags."""

    def render(self, translation: str, alignment: Alignment) -> str:
        if next(_source_emphasis(self.markup), None) is None:
            return render(self, translation, alignment)
        if not any(c in self.text + translation for c in (_OPEN, _CLOSE, _END)):
            placeholders = replace(self, markup=_placeholders(self.markup))
            placed = _pieces(render(placeholders, translation, alignment))
            for care in range(3):
                pieces = _settled(placed, care)
                written = "".join(p if isinstance(p, str) else p.marker for p in pieces)
                if _rendered_emphasis(written) == _written_emphasis(pieces):
                    return written
        return render(replace(self, markup=_as_html(self.markup)), translation, alignment)


def _rendered_emphasis(text: str) -> list[str]:
    """The emphasis markdown-it reads in ``text`` (``_emphasis``)."""
    [inline] = parser().parseInline(text)
    names = {f"{name}_{end}" for name in _EMPHASIS.values() for end in ("open", "close")}
    tokens = [t for t in inline.children or [] if t.content or t.type != "text"]
    return _emphasis(t.type if t.type in names else "" for t in tokens)


def _emphasis(read: Iterable[str]) -> list[str]:
    """Emphasis tokens in order, "" for any text between them, in a form that two readings
    of the same emphasis share: one "" for a stretch of text, and a run of openings (or of
    closings) in sorted order (``***甲***`` is read em in strong or strong in em: it shows
    the same)."""
    kinds: list[str] = []
    run: list[str] = []  # openings (or closings) side by side
    for kind in read:
        if kind and run and run[-1].endswith("_open") != kind.endswith("_open"):
            kinds += sorted(run)
            run = []
        if kind:
            run.append(kind)
            continue
        kinds += sorted(run)
        run = []
        if not kinds or kinds[-1]:
            kinds.append("")
    return kinds + sorted(run)


def _source_emphasis(markups: list[Markup]) -> Iterator[str]:
    """The emphasis tokens the markup stands for, in order."""
    for markup in markups:
        name = _EMPHASIS.get(markup.open) if markup.literal is None else None
        if name:
            yield f"{name}_open"
        yield from _source_emphasis(markup.children)
        if name:
            yield f"{name}_close"


def _written_emphasis(pieces: list[str | _Marker]) -> list[str]:
    """The emphasis settled markers stand for (``_emphasis``)."""
    return _emphasis(
        f"{_EMPHASIS[p.marker]}_{'open' if p.opens else 'close'}" if isinstance(p, _Marker) else ""
        for p in pieces
        if p != ""
    )


def _as_html(markups: list[Markup]) -> list[Markup]:
    """A copy of the markup with emphasis markers replaced by HTML tags."""
    return _replaced(markups, lambda marker: _HTML[marker])


def _placeholders(markups: list[Markup]) -> list[Markup]:
    """A copy of the markup with each emphasis marker written as a placeholder."""
    return _replaced(markups, lambda marker: (_OPEN + marker + _END, _CLOSE + marker + _END))


def _replaced(markups: list[Markup], tags) -> list[Markup]:
    copied = []
    for markup in markups:
        emphasis = markup.literal is None and markup.open in _EMPHASIS
        opening, closing = tags(markup.open) if emphasis else (markup.open, markup.close)
        children = _replaced(markup.children, tags)
        copied.append(replace(markup, open=opening, close=closing, children=children))
    return copied


def _pieces(placed: str) -> list[str | _Marker]:
    """The rendered text cut into text and placed markers."""
    pieces: list[str | _Marker] = []
    position = 0
    for found in _PLACED.finditer(placed):
        pieces += [placed[position : found.start()], _Marker(found[1] == _OPEN, found[2])]
        position = found.end()
    pieces.append(placed[position:])
    # text between markers only where there is some; text at both ends (maybe empty)
    middle = [p for p in pieces[1:-1] if p != ""] if len(pieces) > 1 else []
    return [pieces[0], *middle, pieces[-1]] if len(pieces) > 1 else pieces


def _settled(pieces: list[str | _Marker], care: int) -> list[str | _Marker]:
    """The markers settled where they landed (the module's rules): a space between two spans
    of the same marker side by side, white space moved out, a space outside a marker between
    punctuation and a letter. With more ``care`` (tried where less did not render), 1: also
    a space between a span and a different one right after it (``*甲*`` and ``**（**``
    written together, ``*甲***（**``, are one run of three stars); 2: also before a marker that
    opens between two letters, which could close a span before it (``***甲**乙**丙**丁***``)."""
    spaced: list[str | _Marker] = []
    for piece in _unblanked(pieces):
        last = spaced[-1] if spaced else None
        closes = isinstance(last, _Marker) and not last.opens and isinstance(piece, _Marker)
        if closes and piece.opens and (care or piece.marker == last.marker):
            spaced.append(" ")  # **a****b** is one span of a**b: **a** **b** is two
        spaced.append(piece)
    for index, piece in enumerate(spaced):
        if isinstance(piece, _Marker):
            _flank(spaced, index, opening_apart=care > 1)
    return spaced


def _unblanked(pieces: list[str | _Marker]) -> list[str | _Marker]:
    """The pieces without the markers of a span of white space alone (``** **`` is never
    emphasis; what it would show is nothing)."""
    kept: list[str | _Marker] = []
    for piece in pieces:
        blank = len(kept) >= 2 and isinstance(kept[-1], str) and not kept[-1].strip()
        opened = blank and isinstance(kept[-2], _Marker) and kept[-2].opens
        if opened and isinstance(piece, _Marker) and not piece.opens:
            piece = kept.pop()
            kept.pop()
        if isinstance(piece, str) and kept and isinstance(kept[-1], str):
            kept[-1] += piece  # text the markers of a blank span stood between
        else:
            kept.append(piece)
    return kept


def _flank(pieces: list[str | _Marker], index: int, opening_apart: bool) -> None:
    """Makes the marker at ``index`` flank, where it is the first of a run of markers that
    all open (or the last of a run that all close) between a letter outside and white space
    or punctuation inside (``opening_apart``: or anything inside, for a run that opens)."""
    first, last = index, index
    while last + 1 < len(pieces) and isinstance(pieces[last + 1], _Marker):
        last += 1
    if isinstance(pieces[first - 1], _Marker):
        return  # not the first of its run (text begins and ends the pieces)
    run = pieces[first : last + 1]
    # *~~甲~~*: the star's neighbour inside is a tilde, punctuation
    mixed = len({m.marker[0] for m in run}) > 1
    if all(m.opens for m in run):
        _apart(
            pieces, inside=last + 1, outside=first - 1, after=False, mixed=mixed or opening_apart
        )
    elif all(not m.opens for m in run):
        _apart(pieces, inside=first - 1, outside=last + 1, after=True, mixed=mixed)


def _apart(pieces: list, inside: int, outside: int, after: bool, mixed: bool) -> None:
    """The text ``inside`` a run of markers loses the white space that touches them to the
    text ``outside`` (written there); a space goes outside where punctuation inside (or, with
    ``mixed``, anything: a marker of another character) meets a letter outside. ``after``:
    the run closes (inside is before it)."""
    text = pieces[inside]
    kept = text.rstrip(_WHITE) if after else text.lstrip(_WHITE)
    moved = text[len(kept) :] if after else text[: len(text) - len(kept)]
    inner = kept[-1:] if after else kept[:1]
    beyond = pieces[outside]  # "" at the segment's edge, beside its line's start or end
    letter = beyond[:1] if after else beyond[-1:]
    punctuated = mixed or _punctuation(inner)
    space = " " if punctuated and not moved and _letter(letter) else ""
    pieces[inside] = kept
    pieces[outside] = (moved + space + beyond) if after else (beyond + space + moved)


def _punctuation(char: str) -> bool:
    return len(char) == 1 and unicodedata.category(char)[0] in "PS"


def _letter(char: str) -> bool:
    return len(char) == 1 and char not in _WHITE and not _punctuation(char)
