"""OpenDocument files (``.odt`` text, ``.odp`` presentations, ``.ods`` spreadsheets) as
``Document``\\ s: each paragraph a segment, its spans and links inline markup, every other
byte of the file kept (issue 57). Pure bytes: no model.

Translated: the ``<text:p>`` and ``<text:h>`` paragraphs of ``content.xml`` and of
``styles.xml`` (headers, footers, master pages), wherever they are: body, tables, lists,
frames and text boxes, slides and their speaker notes (``presentation:notes``), annotations.

- Inline: ``<text:span>`` and ``<text:a>`` (its ``xlink:href`` untouched) are elements placed
  where the translation puts their words, as HTML's ``<b>`` and ``<a>`` are; ``<text:s/>``,
  ``<text:tab/>`` and ``<text:line-break/>`` are written as they were between the words they
  separate (a tab or line break ends the text before it, as a Word break does); any other
  element inside a paragraph (fields, bookmarks, page breaks, images) is kept whole where it
  stood, its text untranslated.
- An element inside a paragraph that holds paragraphs of its own (a footnote or endnote,
  ``<text:note>``; a frame with a text box; an annotation) is kept in its place, and its
  paragraphs are translated as paragraphs of their own: each such element is a document of
  its own, its place in the paragraph a point marked ``\\x02N\\x03`` (characters XML cannot
  hold) that writing fills with it rebuilt.
- Spreadsheet cells: only those of ``office:value-type="string"`` without a formula; numbers,
  dates, percentages, currencies, booleans and formula results are never read.
- Kept byte for byte: every other member (``mimetype``, stored first as the format wants it,
  ``META-INF/manifest.xml``, ``meta.xml``, ``settings.xml``, pictures, embedded objects), the
  XML outside the translated paragraphs, sheet and slide names.
"""

from __future__ import annotations

import re
from typing import BinaryIO

from seq2seq.errors import DataError
from seq2seq.formats.inline import Document, Markup, Segment, shift
from seq2seq.formats.packages import member, open_package, xml_text
from seq2seq.formats.xml_scan import Token, escape, matching_end, text_of, tokens
from seq2seq.formats.zipped import Write, write_zip

KINDS = {
    "odt": ("an OpenDocument text", "application/vnd.oasis.opendocument.text"),
    "odp": ("an OpenDocument presentation", "application/vnd.oasis.opendocument.presentation"),
    "ods": ("an OpenDocument spreadsheet", "application/vnd.oasis.opendocument.spreadsheet"),
}
PARTS = ("content.xml", "styles.xml")
PARAGRAPHS = frozenset({"p", "h"})
ELEMENTS = frozenset({"span", "a"})  # placed around their words
BREAKS = frozenset({"tab", "line-break"})  # the words either side read apart
_PLACE = re.compile("\x02([0-9]+)\x03")
_SPACE = re.compile(r"\s+")


def read_opendocument(data: bytes, source: str, format: str) -> tuple[list[Document], Write]:
    """The paragraphs of the OpenDocument file ``data`` (``KINDS[format]``) as documents: for
    each of ``content.xml`` and ``styles.xml``, its own document and one per element in a
    paragraph that holds paragraphs (a note, a text box); and the function that writes the
    file back given each document rebuilt.

    Raises:
        DataError: ``source: problem``: not a zip (or a corrupt, encrypted, oversized one),
            not this kind of file, a part that is not UTF-8 XML or that declares entities.
    """
    kind, mimetype = KINDS[format]
    members = open_package(data, source, kind)
    _check_kind(members, source, kind, mimetype)
    parts = [m for m in members if m.info.filename in PARTS]
    readers = [_Reader(xml_text(part, source)) for part in parts]
    documents = [document for reader in readers for document in reader.documents]

    def write(outputs: list[str], into: BinaryIO | None = None) -> bytes | None:
        if len(outputs) != len(documents):
            raise ValueError(f"{len(outputs)} outputs for {len(documents)} documents")
        replaced, start = {}, 0
        for part, reader in zip(parts, readers, strict=True):
            mine = outputs[start : start + len(reader.documents)]
            replaced[part.info.filename] = _filled(mine, 0).encode("utf-8")
            start += len(reader.documents)
        return write_zip(members, replaced, into)

    return documents, write


def _check_kind(members: list, source: str, kind: str, mimetype: str) -> None:
    if member(members, "content.xml") is None:
        raise DataError(f"{source}: not {kind} (no content.xml in the zip)")
    found = member(members, "mimetype")
    said = found.data.decode("ascii", "replace").strip() if found else mimetype
    if not said.startswith(mimetype):  # a template (…text-template) is one too
        raise DataError(f"{source}: not {kind} (its mimetype is {said[:80]})")


def _filled(outputs: list[str], index: int) -> str:
    """Document ``index`` rebuilt with the documents of its notes and frames in their places."""
    return _PLACE.sub(lambda found: _filled(outputs, int(found.group(1))), outputs[index])


def _attribute(token: Token, name: str) -> str | None:
    """An attribute by its local name, whatever its prefix."""
    return next((v for k, v in token.attrs.items() if k.rsplit(":", 1)[-1] == name), None)


def _skipped(token: Token) -> bool:
    """An element whose text is never translated: a cell holding a number, date, boolean or
    formula result; tracked changes (deleted text)."""
    if token.name in ("table-cell", "covered-table-cell"):
        kind = _attribute(token, "value-type")
        return (kind is not None and kind != "string") or _attribute(token, "formula") is not None
    return token.name == "tracked-changes"


class _Reader:
    """One XML part read into documents: the part, then one per element in a paragraph that
    holds paragraphs (``documents[0]`` is the part)."""

    def __init__(self, text: str) -> None:
        self.text, self.found = text, tokens(text)
        self.documents: list[Document] = []
        self.number = 0
        self.region(0, len(self.found) - 1)

    def region(self, first: int, last: int) -> int:
        """``found[first..last]`` as a document of its own; its index in ``documents``."""
        index = len(self.documents)
        self.documents.append([])
        found, parts = self.found, []
        position, at = found[first].start, first
        while at <= last:
            token = found[at]
            if token.kind == "start" and _skipped(token):
                at = matching_end(found, at) + 1
                continue
            if token.kind == "start" and token.name in PARAGRAPHS:
                end = matching_end(found, at)
                parts += [self.text[position : token.end], *self._paragraph(at, end)]
                position, at = found[end].start, end
            at += 1
        parts.append(self.text[position : found[last].end])
        self.documents[index] = [part for part in parts if part != ""]
        return index

    def _paragraph(self, first: int, last: int) -> Document:
        """A paragraph's content as ``[lead, segment, trail]``, or kept as written (with its
        notes' and frames' places marked) when it has no text."""
        self.number += 1
        reading = _Paragraph(self)
        top = reading.children(first, last)
        whole = "".join(reading.text)
        body = whole.strip(" ")  # a break's newline at an edge stays: its tag is written there
        if not body.strip():
            return ["".join(reading.raw)]
        lead = len(whole) - len(whole.lstrip(" "))
        shift(top, -lead, len(body))
        opening, closing = whole[:lead], whole[lead + len(body) :]
        while len(top) == 1 and top[0].close and (top[0].start, top[0].end) == (0, len(body)):
            # a span around the whole paragraph (LibreOffice writes many) is its formatting,
            # not an element to place: written around the translation as it was
            opening, closing, top = opening + top[0].open, top[0].close + closing, top[0].children
        segment = Segment(body, top, escape=escape, line=self.number)
        return [opening, segment, closing]

    def holds_paragraphs(self, first: int, last: int) -> bool:
        return any(
            t.kind in ("start", "empty") and t.name in PARAGRAPHS
            for t in self.found[first + 1 : last]
        )


class _Paragraph:
    """The inline content of one paragraph: its text, its markup, and as written (``raw``,
    with the places of its notes and frames marked) for a paragraph with no text."""

    def __init__(self, reader: _Reader) -> None:
        self.reader = reader
        self.text: list[str] = []
        self.length = 0
        self.raw: list[str] = []

    def children(self, first: int, last: int) -> list[Markup]:
        """The content between ``found[first]`` and ``found[last]`` as markup over the text."""
        found, markups, at = self.reader.found, [], first + 1
        while at < last:
            token = found[at]
            if token.kind not in ("start", "empty"):
                self.raw.append(token.raw)
                self._add(_SPACE.sub(" ", text_of(token)))
                at += 1
                continue
            end = matching_end(found, at)
            markups.append(self._element(at, end))
            at = end + 1
        return markups

    def _add(self, text: str) -> None:
        if text.startswith(" ") and self.text and self.text[-1].endswith((" ", "\n")):
            text = text[1:]
        self.text.append(text)
        self.length += len(text)

    def _element(self, first: int, last: int) -> Markup:
        found, token = self.reader.found, self.reader.found[first]
        whole = "".join(t.raw for t in found[first : last + 1])
        if token.name in ELEMENTS and token.kind == "start":
            self.raw.append(token.raw)
            markup = Markup(self.length, self.length, token.raw, found[last].raw)
            markup.children = self.children(first, last)
            markup.end = self.length
            self.raw.append(found[last].raw)
            return markup
        spaced = self.length == 0 or "".join(self.text[-1:]).endswith((" ", "\n"))
        if token.name in BREAKS or (token.name == "s" and not spaced):
            # written in place of the newline (or space) the model reads between the words
            self.raw.append(whole)
            markup = Markup(self.length, self.length + 1, whole, literal="")
            self.text.append(" " if token.name == "s" else "\n")
            self.length += 1
            return markup
        if self.reader.holds_paragraphs(first, last):  # a note, a text box: a document
            whole = f"\x02{self.reader.region(first, last)}\x03"
        self.raw.append(whole)
        return Markup(self.length, self.length, whole)
