"""Office Open XML files (Word ``.docx``, PowerPoint ``.pptx``) as ``Document``\\ s: each
paragraph a segment, its formatting runs inline markup, every other byte of the file kept
(issue 57). Pure bytes: no model.

The zip is read within limits and written back member for member (``zipped``); the XML is
checked (no entity is ever expanded) and cut at exact offsets (``xml_scan``). Translated:
``word/document.xml`` and the headers, footers, footnotes, endnotes and comments. In them each
innermost ``<w:p>`` with text is one segment: its runs' ``<w:t>`` texts read as one sentence,
so a sentence Word split into runs (spell-check marks, revision ids) is translated whole.

- Runs formatted as the paragraph's first run (the base) are its text; a run formatted
  otherwise (bold, italic, a character style; ``w:rsid*``, ``w:lang`` and ``w:noProof`` are
  not formatting) is an element placed where the translation puts its words, as an HTML ``<b>``
  is, so a bold word stays bold. Neighbouring runs formatted alike are one element.
- A ``<w:hyperlink>`` (also ``w:smartTag``, ``w:ins``, ``w:customXml``) wraps its runs: the
  link follows its words, its target untouched.
- Kept as points where they stood: bookmarks, spell-check and comment marks, tabs, breaks,
  drawings, footnote references; fields (``w:fldSimple``, and ``w:fldChar`` ... ``w:instrText``
  ... ``w:fldChar`` with their result), tracked deletions, content controls, equations, written
  as they were (their text untranslated).
- A paragraph holding paragraphs (a text box in a drawing) is left as written around the
  inner ones, which are translated (its own text, if any, is not).
- PowerPoint: the slides' and speaker notes' ``<a:p>`` are read the same way (DrawingML's
  ``<a:r>``, ``<a:rPr>``, ``<a:t>``; a hyperlink is in a run's properties; ``<a:br>`` is a
  break, ``<a:fld>`` a field kept, ``<a:endParaRPr>`` stays last).

Writing: the text between elements goes into runs with the base's ``<w:rPr>``, each element's
words into runs with its own; ``xml:space="preserve"`` where a text has spaces at an edge;
runs left empty are dropped. Everything outside the translated paragraphs is byte-identical.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import BinaryIO

from seq2seq.errors import DataError
from seq2seq.formats.inline import Document, Markup, Segment, shift
from seq2seq.formats.xml_scan import Token, check, escape, matching_end, text_of, tokens
from seq2seq.formats.zipped import Member, Write, read_zip, write_zip

PARTS = re.compile(r"word/(document|header\d*|footer\d*|footnotes|endnotes|comments)\.xml")
SLIDES = re.compile(r"ppt/(slides/slide|notesSlides/notesSlide)\d+\.xml")
CONTAINERS = frozenset({"hyperlink", "smartTag", "ins", "customXml"})
# A generated <w:t>, marked with a character XML cannot hold (and ``escape`` removes from any
# translated text), so that writing can tell its own runs from the document's: those left
# empty are dropped, the others get xml:space="preserve" only where they need it.
_MARK = "\x01"
_NOT_FORMATTING = re.compile(
    r'\s+w:rsid\w*="[^"]*"|<w:lang\b[^>]*/>|<w:noProof\s*/>|>\s+<'
    r'|\s(?:lang|altLang|dirty|err|noProof|smtClean|smtId)="[^"]*"'  # DrawingML's
)
_NO_PROPERTIES = re.compile(r"<(\w+):rPr\s*/>|<(\w+):rPr></\2:rPr>")


@dataclass(frozen=True)
class Kind:
    """What is translated in one kind of Office file."""

    name: str  # as an error names the file: "a Word document"
    required: str  # the member every such file has
    parts: re.Pattern  # the members translated
    preserve: bool  # xml:space="preserve" on a text with spaces at an edge (Word's <w:t>)


KINDS = {
    "docx": Kind("Word document", "word/document.xml", PARTS, True),
    "pptx": Kind("PowerPoint presentation", "ppt/presentation.xml", SLIDES, False),
}


def read_docx(data: bytes, source: str) -> tuple[list[Document], Write]:
    """``read_office`` for a Word document."""
    return read_office(data, source, "docx")


def read_office(data: bytes, source: str, format: str) -> tuple[list[Document], Write]:
    """The translated parts of the Office file ``data`` (``KINDS[format]``) as documents, in
    member order, and the function that writes the file back given each document rebuilt
    (``inline.rebuild``).

    Raises:
        DataError: ``source: problem``: not a zip (or a corrupt, encrypted, oversized one),
            not this kind of file, a part that is not UTF-8 XML or that declares entities.
    """
    kind = KINDS[format]
    try:
        members = read_zip(data, source)
    except DataError as error:
        raise DataError(f"{source}: not a {kind.name} ({_problem(error, source)})") from None
    if not any(m.info.filename == kind.required for m in members):
        raise DataError(f"{source}: not a {kind.name} (no {kind.required} in the zip)")
    parts = [m for m in members if kind.parts.fullmatch(m.info.filename)]
    documents = [_part(member, source) for member in parts]

    def write(outputs: list[str], into: BinaryIO | None = None) -> bytes | None:
        if len(outputs) != len(parts):
            raise ValueError(f"{len(outputs)} outputs for {len(parts)} parts")
        replaced = {
            member.info.filename: finish(output, kind.preserve).encode("utf-8")
            for member, output in zip(parts, outputs, strict=True)
        }
        return write_zip(members, replaced, into)

    return documents, write


def _problem(error: DataError, source: str) -> str:
    message = str(error)
    return message[len(source) + 2 :] if message.startswith(f"{source}: ") else message


def _part(member: Member, source: str) -> Document:
    where = f"{source}:{member.info.filename}"
    check(member.data, where)
    try:
        text = member.data.decode("utf-8")
    except UnicodeDecodeError:
        raise DataError(f"{where}: not UTF-8 (Office writes its parts in UTF-8)") from None
    return parse_part(text)


# A generated run with no text; its properties never reach past their own run.
_EMPTY_RUN = re.compile(
    r"<(\w+):r>(?:<\1:rPr\b[^>]*/>|<\1:rPr\b[^>]*(?<!/)>(?:(?!</\1:rPr>|</\1:r>).)*</\1:rPr>)?"
    r"<\1:t\x01></\1:t></\1:r>",
    re.S,
)
# Run content the model reads as a line break: a newline of the text, written as the element.
_BREAKS = frozenset({"tab", "br", "cr", "ptab"})
_QNAME = re.compile(r"<([^\s>/]+)")
_GENERATED = re.compile(r"<(\w+):t\x01>([^<]*)</\1:t>")


def finish(xml: str, preserve: bool = True) -> str:
    """A rebuilt part with its generated runs settled: empty ones dropped, the others' text
    tags as the format writes them (``preserve``: Word's ``xml:space="preserve"`` where a
    text has spaces at an edge; DrawingML keeps spaces without it)."""
    xml = _EMPTY_RUN.sub("", xml)

    def tag(found: re.Match) -> str:
        prefix, body = found.group(1), found.group(2)
        space = ' xml:space="preserve"' if preserve and body != body.strip() else ""
        return f"<{prefix}:t{space}>{body}</{prefix}:t>"

    return _GENERATED.sub(tag, xml)


def parse_part(text: str) -> Document:
    """One XML part (checked) as raw parts and a segment per innermost paragraph with text."""
    found = tokens(text)
    parts: Document = []
    position, index, number = 0, 0, 0
    while index < len(found):
        token = found[index]
        if token.kind != "start" or token.name != "p":
            index += 1
            continue
        end = matching_end(found, index)
        inner = found[index + 1 : end]
        if any(t.kind in ("start", "empty") and t.name == "p" for t in inner):
            index += 1  # holds paragraphs (a text box): they are read, it is kept
            continue
        number += 1
        qualified = _QNAME.match(token.raw).group(1)
        prefix = qualified.rsplit(":", 1)[0] if ":" in qualified else ""
        paragraph = _Paragraph(found, index, end, prefix, number)
        pieces = paragraph.read()
        if pieces is not None:
            start = paragraph.body_start
            parts.append(text[position:start])
            parts += pieces
            position = paragraph.body_end
        index = end + 1
    parts.append(text[position:])
    return [part for part in parts if part != ""]


class _Paragraph:
    """One ``<w:p>`` (``found[first]`` to ``found[last]``) read into text and markup."""

    def __init__(self, found: list[Token], first: int, last: int, prefix: str, number: int):
        self.found, self.first, self.last, self.number = found, first, last, number
        self.p = f"{prefix}:" if prefix else ""
        self.text: list[str] = []
        self.length = 0
        self.keys: dict[int, str] = {}  # id(markup) -> the formatting of a run element
        self.body_start, self.body_end = found[first].end, found[last].start

    def read(self) -> Document | None:
        """``[base run opening + lead, segment, trail + closing]``, or None: no text."""
        start = self.first + 1
        children = self._children(start, self.last)
        if children and self.found[children[0][0]].name == "pPr":
            self.body_start = self.found[children[0][1]].end
            children = children[1:]
        if children and self.found[children[-1][0]].name == "endParaRPr":
            # DrawingML's last child of a paragraph, by its schema: kept out of the text
            self.body_end = self.found[children[-1][0]].start
            children = children[:-1]
        base = self._base(children)
        top: list[Markup] = []
        self._container(children, base, top)
        whole = "".join(self.text)
        body = whole.strip()
        if not body:
            return None
        lead = len(whole) - len(whole.lstrip())
        shift(top, -lead, len(body))
        segment = Segment(body, top, escape=_escape, line=self.number)
        opening = f"<{self.p}r>{base}<{self.p}t{_MARK}>"
        closing = f"</{self.p}t></{self.p}r>"
        return [
            opening + _escape(whole[:lead]),
            segment,
            _escape(whole[lead + len(body) :]) + closing,
        ]

    def _children(self, start: int, end: int) -> list[tuple[int, int]]:
        """The direct child elements between ``found[start]`` and ``found[end]``: (first, last)."""
        children, index = [], start
        while index < end:
            if self.found[index].kind in ("start", "empty"):
                last = matching_end(self.found, index)
                children.append((index, last))
                index = last
            index += 1
        return children

    def _raw(self, first: int, last: int) -> str:
        return "".join(t.raw for t in self.found[first : last + 1])

    def _rpr(self, first: int, last: int) -> str:
        """A run's ``<w:rPr>`` as written ("" for none)."""
        for child, end in self._children(first + 1, last):
            if self.found[child].name == "rPr":
                return self._raw(child, end)
        return ""

    def _run_text(self, first: int, last: int) -> str:
        return "".join(
            text_of(t)
            for child, end in self._children(first + 1, last)
            if self.found[child].name == "t"
            for t in self.found[child + 1 : end]
        )

    def _base(self, children: list[tuple[int, int]]) -> str:
        """The formatting of the paragraph's first run with text (a link's run if none other)."""
        later = ""
        for first, last in children:
            token = self.found[first]
            if token.name == "r" and self._run_text(first, last).strip():
                return self._rpr(first, last)
            if token.name in CONTAINERS and not later:
                later = self._base(self._children(first + 1, last))
        return later

    def _container(self, children: list[tuple[int, int]], context: str, siblings: list) -> None:
        """Children of the paragraph (or of a link) read with ``context`` the formatting of
        the text between elements."""
        index = 0
        while index < len(children):
            first, last = children[index]
            token = self.found[first]
            if token.name == "r" and self._field_begins(first, last):
                end = self._field_end(children, index)
                raw = self._raw(first, children[end][1])
                siblings.append(self._point(raw, context))
                index = end + 1
                continue
            if token.name == "r":
                self._run(first, last, context, siblings)
            elif token.name in _BREAKS:  # DrawingML's <a:br>: the words either side apart
                siblings.append(self._point(self._raw(first, last), context))
                self._break(siblings[-1])
            elif token.name in CONTAINERS and token.kind == "start":
                self._wrapper(first, last, context, siblings)
            else:  # bookmarks, marks, fields, deletions, content controls: as written
                siblings.append(self._point(self._raw(first, last), context))
            index += 1

    def _break(self, point: Markup) -> None:
        """A break or tab read as a newline of the text (written by ``point``, in its place)."""
        point.end += 1
        self.text.append("\n")
        self.length += 1

    def _point(self, raw: str, context: str) -> Markup:
        """Paragraph content kept whole, between the runs of the text around it."""
        p = self.p
        return Markup(
            self.length, self.length, f"</{p}t></{p}r>{raw}<{p}r>{context}<{p}t{_MARK}>", "", ""
        )

    def _field_begins(self, first: int, last: int) -> bool:
        return any(
            t.name == "fldChar" and t.attrs.get(f"{self.p}fldCharType") == "begin"
            for t in self.found[first:last]
        )

    def _field_end(self, children: list[tuple[int, int]], index: int) -> int:
        """The index of the child whose run ends the field begun at ``children[index]`` (the
        last child when it is not closed there: all kept as written)."""
        depth = 0
        for j in range(index, len(children)):
            first, last = children[j]
            for t in self.found[first:last]:
                kind = t.attrs.get(f"{self.p}fldCharType") if t.name == "fldChar" else None
                depth += {"begin": 1, "end": -1}.get(kind, 0)
            if depth <= 0:
                return j
        return len(children) - 1

    def _run(self, first: int, last: int, context: str, siblings: list) -> None:
        """A run: its text, at this level when formatted as ``context``, else in an element
        (the previous one when it ends here and is formatted alike)."""
        rpr = self._rpr(first, last)
        key = _formatting(rpr)
        text = self._run_text(first, last)
        target = siblings
        if key != _formatting(context) and text.strip():
            previous = siblings[-1] if siblings else None
            alike = previous is not None and self.keys.get(id(previous)) == key
            if alike and previous.end == self.length:
                target = previous.children
            else:
                p = self.p
                element = Markup(
                    self.length,
                    self.length,
                    f"</{p}t></{p}r><{p}r>{rpr}<{p}t{_MARK}>",
                    f"</{p}t></{p}r><{p}r>{context}<{p}t{_MARK}>",
                )
                self.keys[id(element)] = key
                siblings.append(element)
                target = element.children
        for child, end in self._children(first + 1, last):
            name = self.found[child].name
            if name == "t":
                piece = "".join(text_of(t) for t in self.found[child + 1 : end])
                self.text.append(piece)
                self.length += len(piece)
            elif name != "rPr":  # a tab, a break, a drawing: in a run of its own formatting
                after = rpr if target is not siblings else context
                target.append(self._run_point(self._raw(child, end), rpr, after))
                if name in _BREAKS:  # the words either side read apart (as an HTML <br>)
                    self._break(target[-1])
        if target is not siblings:
            siblings[-1].end = self.length

    def _run_point(self, raw: str, rpr: str, after: str) -> Markup:
        """Run content that is not text (a tab, a break, a drawing) in a run of its own
        formatting, the text after it in ``after``'s."""
        p, mark = self.p, _MARK
        return Markup(
            self.length,
            self.length,
            f"</{p}t></{p}r><{p}r>{rpr}{raw}</{p}r><{p}r>{after}<{p}t{mark}>",
            "",
            "",
        )

    def _wrapper(self, first: int, last: int, context: str, siblings: list) -> None:
        """A link (or another element around runs): an element around its runs' words."""
        children = self._children(first + 1, last)
        if not any(self._run_text(*c).strip() for c in children if self.found[c[0]].name == "r"):
            siblings.append(self._point(self._raw(first, last), context))
            return
        opening = self.found[first].raw
        if children and self.found[children[0][0]].name.endswith("Pr"):
            opening += self._raw(*children[0])
            children = children[1:]
        inner = self._base(children)
        p = self.p
        element = Markup(
            self.length,
            self.length,
            f"</{p}t></{p}r>{opening}<{p}r>{inner}<{p}t{_MARK}>",
            f"</{p}t></{p}r>{self.found[last].raw}<{p}r>{context}<{p}t{_MARK}>",
        )
        siblings.append(element)
        self._container(children, inner, element.children)
        element.end = self.length


def _escape(text: str) -> str:
    """Translated text in a ``<w:t>``: a newline of the text is a break or tab written by its
    element, never a character of a run (Word would show it as a space)."""
    return escape(text.replace("\n", ""))


def _formatting(rpr: str) -> str:
    """What of a ``<w:rPr>`` shows: without revision ids, proofing language and marks (and
    ``<a:rPr lang="en-US" dirty="0"/>`` is no formatting at all)."""
    shown = _NOT_FORMATTING.sub(lambda m: "><" if m.group().startswith(">") else "", rpr)
    return "" if _NO_PROPERTIES.fullmatch(shown) else shown
