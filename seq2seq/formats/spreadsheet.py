"""Excel workbooks (``.xlsx``) as ``Document``\\ s: each cell string a segment, its rich-text
runs inline markup, every other byte of the file kept (issue 57). Pure bytes: no model.

Translated, each string in SpreadsheetML's rich-string form (a ``<t>``, or ``<r>`` runs each
with its ``<rPr>`` and ``<t>``, then phonetic runs kept as written):

- the shared strings (``xl/sharedStrings.xml``, ``<si>``): the text of every cell of type
  ``s``; a string shared by several cells is translated once, for all of them;
- inline strings (``<c t="inlineStr"><is>`` in ``xl/worksheets/sheet*.xml``);
- cell comments (``xl/comments*.xml``, ``<text>``).

Never touched: formulas (``<f>``) and their cached results (``t="str"``, ``t="b"``,
``t="e"``), numbers and dates (``<v>``), sheet names and defined names (``xl/workbook.xml``:
formulas refer to them), styles, merged cells, charts, drawings. Written back: a rich
string's runs as the Word reader writes them (``office``): the text between elements in runs
formatted as the string's first run, each element's words in runs with its own ``<rPr>``,
runs left empty dropped, ``xml:space="preserve"`` where a text has a space at an edge.
"""

from __future__ import annotations

import re
from typing import BinaryIO

from seq2seq.errors import DataError
from seq2seq.formats.inline import Document, Markup, Segment, shift
from seq2seq.formats.packages import member, open_package, xml_text
from seq2seq.formats.xml_scan import Token, escape, matching_end, text_of, tokens
from seq2seq.formats.zipped import Write, write_zip

# The element that holds a string, by the kind of part it is in.
PARTS = {
    re.compile(r"xl/sharedStrings\.xml"): "si",
    re.compile(r"xl/worksheets/sheet\d+\.xml"): "is",
    re.compile(r"xl/comments\d*\.xml"): "text",
}
_MARK = "\x01"  # a generated <t>: see office._MARK (a character XML cannot hold)


def string_element(name: str) -> str | None:
    """The element holding the strings translated in the part ``name`` (None: not one)."""
    return next((element for part, element in PARTS.items() if part.fullmatch(name)), None)


def read_xlsx(data: bytes, source: str) -> tuple[list[Document], Write]:
    """The translated parts of the workbook ``data`` as documents, in member order, and the
    function that writes the workbook back given each document rebuilt.

    Raises:
        DataError: ``source: problem``: not a zip (or a corrupt, encrypted, oversized one),
            not a workbook, a part that is not UTF-8 XML or that declares entities.
    """
    members = open_package(data, source, "an Excel workbook")
    if member(members, "xl/workbook.xml") is None:
        raise DataError(f"{source}: not an Excel workbook (no xl/workbook.xml in the zip)")
    parts = [m for m in members if string_element(m.info.filename)]
    documents = [
        parse_strings(xml_text(part, source), string_element(part.info.filename)) for part in parts
    ]

    def write(outputs: list[str], into: BinaryIO | None = None) -> bytes | None:
        if len(outputs) != len(parts):
            raise ValueError(f"{len(outputs)} outputs for {len(parts)} parts")
        replaced = {
            part.info.filename: finish(output).encode("utf-8")
            for part, output in zip(parts, outputs, strict=True)
        }
        return write_zip(members, replaced, into)

    return documents, write


def parse_strings(text: str, element: str) -> Document:
    """One part (checked XML) as raw parts and a segment per ``element`` string with text."""
    found = tokens(text)
    parts: Document = []
    position, index, number = 0, 0, 0
    while index < len(found):
        token = found[index]
        if token.kind != "start" or token.name != element:
            index += 1
            continue
        end = matching_end(found, index)
        number += 1
        read = _RichString(found, index, end, number).read()
        if read is not None:
            start, stop, pieces = read
            parts += [text[position:start], *pieces]
            position = stop
        index = end + 1
    parts.append(text[position:])
    return [part for part in parts if part != ""]


class _RichString:
    """One string element (``found[first]`` to ``found[last]``) read into text and markup."""

    def __init__(self, found: list[Token], first: int, last: int, number: int) -> None:
        self.found, self.first, self.last, self.number = found, first, last, number
        qualified = found[first].raw[1:].split(None, 1)[0].rstrip("/>")
        self.p = qualified.rsplit(":", 1)[0] + ":" if ":" in qualified else ""

    def children(self, first: int, last: int) -> list[tuple[int, int]]:
        """The direct child elements between ``found[first]`` and ``found[last]``."""
        found, index, children = self.found, first + 1, []
        while index < last:
            if found[index].kind in ("start", "empty"):
                end = matching_end(found, index)
                children.append((index, end))
                index = end
            index += 1
        return children

    def text(self, first: int, last: int) -> str:
        return "".join(text_of(t) for t in self.found[first + 1 : last])

    def read(self) -> tuple[int, int, Document] | None:
        """(start offset, end offset, the pieces written there), or None: no text."""
        children = self.children(self.first, self.last)
        plain = [c for c in children if self.found[c[0]].name == "t"]
        runs = [c for c in children if self.found[c[0]].name == "r"]
        if plain and plain[0][0] != plain[0][1]:
            first, last = plain[0]
            whole = self.text(first, last)
            if not whole.strip():
                return None
            pieces = _pieces(whole, [], "", "", self.number)
            return self.found[first].end, self.found[last].start, pieces
        if not runs:
            return None
        return self._runs(runs)

    def _runs(self, runs: list[tuple[int, int]]) -> tuple[int, int, Document] | None:
        """Rich text: the runs formatted as the first with text are the text, each other
        formatting an element around its words (neighbouring runs alike one element)."""
        formats = [(self._rpr(first, last), self._run_text(first, last)) for first, last in runs]
        base = next((rpr for rpr, text in formats if text.strip()), formats[0][0])
        p, mark = self.p, _MARK
        text, top, keys = "", [], []
        for rpr, words in formats:
            if rpr != base and words.strip():
                if keys and keys[-1] == rpr and top[-1].end == len(text):
                    top[-1].end += len(words)
                else:
                    opening = f"</{p}t></{p}r><{p}r>{rpr}<{p}t{mark}>"
                    closing = f"</{p}t></{p}r><{p}r>{base}<{p}t{mark}>"
                    top.append(Markup(len(text), len(text) + len(words), opening, closing))
                    keys.append(rpr)
            text += words
        opening, closing = f"<{p}r>{base}<{p}t{mark}>", f"</{p}t></{p}r>"
        pieces = _pieces(text, top, opening, closing, self.number)
        if len(pieces) == 1:
            return None
        start, stop = self.found[runs[0][0]].start, self.found[runs[-1][1]].end
        return start, stop, pieces

    def _rpr(self, first: int, last: int) -> str:
        for child, end in self.children(first, last):
            if self.found[child].name == "rPr":
                return "".join(t.raw for t in self.found[child : end + 1])
        return ""

    def _run_text(self, first: int, last: int) -> str:
        return "".join(
            self.text(child, end)
            for child, end in self.children(first, last)
            if self.found[child].name == "t"
        )


def _pieces(whole: str, top: list[Markup], opening: str, closing: str, number: int) -> Document:
    """``[opening + lead, segment, trail + closing]``; ``[opening + whole + closing]`` (one
    raw piece) when there is no text to translate."""
    body = whole.strip()
    if not body:
        return [opening + escape(whole) + closing]
    lead = len(whole) - len(whole.lstrip())
    shift(top, -lead, len(body))
    segment = Segment(body, top, escape=escape, line=number)
    return [opening + escape(whole[:lead]), segment, escape(whole[lead + len(body) :]) + closing]


_EMPTY_RUN = re.compile(
    r"<((?:\w+:)?)r>(?:<\1rPr\b[^>]*/>|<\1rPr\b[^>]*(?<!/)>(?:(?!</\1rPr>|</\1r>).)*</\1rPr>)?"
    r"<\1t\x01></\1t></\1r>",
    re.S,
)
_GENERATED = re.compile(r"<((?:\w+:)?)t\x01>([^<]*)</\1t>")


def finish(xml: str) -> str:
    """A rebuilt part with its generated runs settled: empty ones dropped, the others' text
    tags written ``<t>``, with ``xml:space="preserve"`` where the text has a space at an edge."""
    xml = _EMPTY_RUN.sub("", xml)

    def tag(found: re.Match) -> str:
        prefix, body = found.group(1), found.group(2)
        space = ' xml:space="preserve"' if body != body.strip() else ""
        return f"<{prefix}t{space}>{body}</{prefix}t>"

    return _GENERATED.sub(tag, xml)
