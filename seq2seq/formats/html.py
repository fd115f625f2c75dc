"""HTML as a ``Document``: the text of each block is a segment, its inline tags markup, and
everything else (block tags, attributes, comments, ``<script>``, ``<pre>``...) stays byte for
byte.

The parser is the standard library's ``html.parser`` (BeautifulSoup's default tree builder),
used for its events and their exact source positions: lxml and BeautifulSoup re-serialise a
whole document (quoting, entity forms, implied tags), where a translator must give back every
byte it does not translate as it came. Entities in translated text are decoded for the model
and the translation is escaped again (``&`` -> ``&amp;``); in untouched parts they stay as
written (``&nbsp;`` stays ``&nbsp;``).

Left untouched: ``<script>``, ``<style>``, ``<pre>``, ``<code>`` (inline code is kept as
written where its words went), ``<textarea>``, ``<svg>``, ``<math>``, ``<template>`` and any
element with ``translate="no"`` or class ``notranslate``. Attribute values (``alt``,
``title``) are not translated.
"""

from __future__ import annotations

import bisect
import html
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from seq2seq.errors import DataError
from seq2seq.formats.inline import Document, Markup, Segment

INLINE = frozenset(
    "a abbr b bdi bdo big br cite code data del dfn em font i img ins kbd label mark q s samp "
    "small span strike strong sub sup time tt u var wbr".split()
)
VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
# Kept as written: code and what reads as code in manuals (texinfo writes <var>, older pages <tt>).
UNTOUCHED = frozenset("script style pre code textarea svg math template kbd samp tt var".split())
_SPACE = re.compile(r"\s+")
MAX_DEPTH = 64  # inline elements nested deeper are kept where they stand, not placed


@dataclass
class _Event:
    kind: str  # start, end, startend, data, entity, comment, decl
    start: int  # offset in the document
    tag: str = ""
    attrs: dict[str, str | None] = field(default_factory=dict)
    end: int = 0  # set once the next event is known


class _Events(HTMLParser):
    """Every parser event with its source offset."""

    def __init__(self, document: str, source: str) -> None:
        super().__init__(convert_charrefs=False)
        self.document, self.source = document, source
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", document)]
        self.events: list[_Event] = []

    def _add(self, kind: str, tag: str = "", attrs=None) -> None:
        line, column = self.getpos()
        offset = self.line_starts[line - 1] + column
        self.events.append(_Event(kind, offset, tag.lower(), dict(attrs or {})))

    def handle_starttag(self, tag, attrs):
        self._add("start", tag, attrs)

    def handle_startendtag(self, tag, attrs):
        self._add("startend", tag, attrs)

    def handle_endtag(self, tag):
        self._add("end", tag)

    def handle_data(self, data):
        self._add("data")

    def handle_entityref(self, name):  # &amp; and &#38; alike: kept as written, raw
        self._add("entity")

    def handle_comment(self, data):
        self._add("comment")

    def handle_decl(self, decl):  # <!DOCTYPE>, <?pi>, <![CDATA[: block-level, raw
        self._add("decl")

    handle_charref = handle_entityref
    handle_pi = unknown_decl = handle_decl

    def parse(self) -> list[_Event]:
        self.feed(self.document)
        left = self.rawdata[self._position() :] if self.rawdata else ""
        if re.match(r"<[A-Za-z/!?]", left):
            line = self.document.count("\n", 0, len(self.document) - len(left)) + 1
            raise DataError.at(
                self.source,
                line,
                f"HTML does not parse: unterminated {left.split()[0][:20]!r} at the end",
            )
        self.close()
        for event, following in zip(self.events, self.events[1:], strict=False):
            event.end = following.start
        if self.events:
            self.events[-1].end = len(self.document)
        return self.events

    def _position(self) -> int:
        line, column = self.getpos()
        return self.line_starts[line - 1] + column - (len(self.document) - len(self.rawdata))


def parse_html(document: str, source: str = "<html>") -> Document:
    """``document`` as raw parts and segments (one per block of text).

    Raises:
        DataError: markup that does not parse (a tag, comment or declaration left unterminated
            at the end of the file), naming ``source`` and the line. An end tag that closes
            nothing open is kept as written (browsers ignore it).
    """
    events = _Events(document, source).parse()
    builder = _Builder(document, source)
    index = 0
    while index < len(events):
        index = builder.take(events, index)
    builder.flush()
    return builder.parts


_HTML_TAG = re.compile(r"<html\b[^>]*>", re.IGNORECASE)
_LANG = re.compile(r"""(\s(?:xml:)?lang\s*=\s*)("[^"]*"|'[^']*'|[^\s"'>]+)""", re.IGNORECASE)


def with_lang(document: Document, tag: str) -> Document:
    """``document`` whose ``<html>`` element says it is in ``tag`` (its ``lang`` and
    ``xml:lang`` values, quoted as they were); a page without either is left as it is."""

    def retag(found: re.Match) -> str:
        quote = found.group(2)[0] if found.group(2)[0] in "\"'" else ""
        return f"{found.group(1)}{quote}{tag}{quote}"

    for index, part in enumerate(document):
        if isinstance(part, str) and (element := _HTML_TAG.match(part.lstrip())):
            start = part.index(element.group())
            retagged = _LANG.sub(retag, element.group())
            end = start + len(element.group())
            return [*document[:index], part[:start] + retagged + part[end:], *document[index + 1 :]]
    return document


def _untouched(event: _Event) -> bool:
    classes = (event.attrs.get("class") or "").split()
    return (
        event.tag in UNTOUCHED
        or (event.attrs.get("translate") or "").lower() == "no"
        or "notranslate" in classes
    )


class _Builder:
    """Walks the events: raw parts between blocks, one segment per run of inline content."""

    def __init__(self, document: str, source: str) -> None:
        self.document, self.source = document, source
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", document)]
        self.parts: Document = []
        # ("event", _Event) or ("literal", [_Event, ...]: an untouched inline element)
        self.run: list[tuple[str, object]] = []

    def raw(self, event: _Event) -> str:
        return self.document[event.start : event.end]

    def take(self, events: list[_Event], index: int) -> int:
        """Handle ``events[index]``; the index of the next event to handle."""
        event = events[index]
        if event.kind == "start" and _untouched(event) and event.tag not in VOID:
            end = _matching_end(events, index, inline=event.tag in INLINE)
            if event.tag in INLINE:
                self.run.append(("literal", events[index : end + 1]))
            else:
                self.flush()
                self.parts.append(self.document[event.start : events[end].end])
            return end + 1
        inline = event.tag in INLINE or event.kind in ("data", "entity", "comment")
        if inline:
            self.run.append(("event", event))
        else:
            self.flush()
            self.parts.append(self.raw(event))  # block tags, stray end tags included
        return index + 1

    def flush(self) -> None:
        """The pending run of inline content as raw white space around one segment."""
        if not self.run:
            return
        run, self.run = self.run, []
        segment, before, after = _RunReader(self).read(run)
        if segment is None:
            self.parts.append(before)
            return
        self.parts += [before, segment, after]


def _matching_end(events: list[_Event], index: int, inline: bool = False) -> int:
    """The index of the end tag that closes ``events[index]``; left open, the last event of
    the document, or for an inline element the last one before a block tag."""
    tag, depth = events[index].tag, 0
    for j in range(index, len(events)):
        block = events[j].kind in ("start", "end", "startend") and events[j].tag not in INLINE
        if inline and block and j > index:
            return j - 1
        if events[j].tag == tag and events[j].kind == "start":
            depth += 1
        elif events[j].tag == tag and events[j].kind == "end":
            depth -= 1
            if not depth:
                return j
    return len(events) - 1


class _RunReader:
    """One run of inline events into (segment or None, raw before, raw after)."""

    def __init__(self, builder: _Builder) -> None:
        self.builder = builder
        self.text: list[str] = []
        self.length = 0
        self.stack: list[Markup] = []
        self.top: list[Markup] = []

    def read(self, run) -> tuple[Segment | None, str, str]:
        raws = []
        for kind, item in run:
            if kind == "literal":
                raws.append(self.builder.document[item[0].start : item[-1].end])
            else:
                raws.append(self.builder.raw(item))
        whole = "".join(raws)
        if not whole.strip() or not self._has_text(run):
            return None, whole, ""
        for kind, item in run:
            self._read_item(kind, item)
        for markup in self.stack:  # left open at the block's end, as written (no close tag)
            markup.end = self.length
        # White space at the run's edges stays as written, outside the segment.
        before = _edge(raws[0], run[0], leading=True)
        after = _edge(raws[-1], run[-1], leading=False)
        text = "".join(self.text)
        lead = len(text) - len(text.lstrip())
        segment = _trim(Segment(text.rstrip(), self.top, escape=_escape), lead)
        _clamp(segment.markup, len(segment.text))  # an element of white space is a point
        first = run[0][1][0] if run[0][0] == "literal" else run[0][1]
        segment.line = bisect.bisect_right(self.builder.line_starts, first.start + len(before))
        return segment, before, after

    def _has_text(self, run) -> bool:
        for kind, item in run:
            if kind == "event" and item.kind in ("data", "entity"):
                if html.unescape(self.builder.raw(item)).strip():
                    return True
        return False

    def _add_text(self, text: str) -> None:
        text = _SPACE.sub(" ", text)
        if self.text and self.text[-1].endswith((" ", "\n")) and text.startswith(" "):
            text = text[1:]
        self.text.append(text)
        self.length += len(text)

    def _line_break(self, raw: str) -> None:
        """A ``<br>``: a newline in the text, so that the lines it separates are translated as
        sentences of their own and come back on lines of their own; the tag is written in
        place of the newline's translation (``seq2seq.inference.documents`` aligns it)."""
        self._attach(Markup(self.length, self.length + 1, raw, literal=""))
        self.text.append("\n")
        self.length += 1

    def _attach(self, markup: Markup) -> None:
        (self.stack[-1].children if self.stack else self.top).append(markup)

    def _read_item(self, kind: str, item) -> None:
        if kind == "literal":
            self._read_literal(item)
            return
        event: _Event = item
        raw = self.builder.raw(event)
        if event.kind in ("data", "entity"):
            self._add_text(html.unescape(raw))
        elif event.tag == "br":
            self._line_break(raw)
        elif event.kind == "comment" or event.kind == "startend" or event.tag in VOID:
            self._attach(Markup(self.length, self.length, raw))
        elif event.kind == "start" and len(self.stack) >= MAX_DEPTH:
            self._attach(Markup(self.length, self.length, raw))  # deeper tags kept in place
        elif event.kind == "start":
            markup = Markup(self.length, self.length, raw)
            self._attach(markup)
            self.stack.append(markup)
        elif event.kind == "end":
            self._close(event, raw)

    def _read_literal(self, events: list[_Event]) -> None:
        """An untouched inline element: its text for the model, its inside kept as written."""
        first, last, raw = events[0], events[-1], self.builder.raw
        closed = len(events) > 1 and last.kind == "end" and last.tag == first.tag
        inner = events[1:-1] if closed else events[1:]
        start = self.length
        self._add_text(
            "".join(html.unescape(raw(e)) for e in inner if e.kind in ("data", "entity"))
        )
        literal = self.builder.document[first.end : last.start if closed else last.end]
        self._attach(
            Markup(start, self.length, raw(first), raw(last) if closed else "", literal=literal)
        )

    def _close(self, event: _Event, raw: str) -> None:
        tags = [m.open[1:].split(None, 1)[0].rstrip(">/").lower() for m in self.stack]
        if event.tag not in tags:  # closes nothing open (misnested): kept as written, in place
            self._attach(Markup(self.length, self.length, raw))
            return
        while self.stack:
            markup = self.stack.pop()
            markup.end = self.length
            if tags.pop() == event.tag:
                markup.close = raw
                return


def _edge(raw: str, item, leading: bool) -> str:
    """The white space a run starts (or ends) with, when that edge is text."""
    kind, event = item
    if kind != "event" or event.kind != "data":
        return ""
    kept = raw.lstrip() if leading else raw.rstrip()
    return raw[: len(raw) - len(kept)] if leading else raw[len(kept) :]


def _trim(segment: Segment, lead: int) -> Segment:
    """The segment without leading white space (kept raw by the caller's parts)."""
    if not lead:
        return segment
    segment.text = segment.text[lead:]
    _shift(segment.markup, -lead)
    return segment


def _clamp(markups: list[Markup], length: int) -> None:
    for markup in markups:
        markup.start, markup.end = min(markup.start, length), min(markup.end, length)
        _clamp(markup.children, length)


def _shift(markups: list[Markup], by: int) -> None:
    for markup in markups:
        markup.start, markup.end = max(0, markup.start + by), max(0, markup.end + by)
        _shift(markup.children, by)


def _escape(text: str) -> str:
    return html.escape(text, quote=False)
