"""XLIFF 1.2 and 2.0 (``.xlf``, ``.xliff``) as a ``Document``: each unit's source is a segment
whose translation fills its target; everything else, sources included, stays byte for byte.

- XLIFF 1.2: a ``<trans-unit>`` without a target (or with an empty one) gets
  ``<target state="needs-review-translation" state-qualifier="mt-suggestion">`` after its
  source: the spec's state for a translation whose text still needs a review, and its
  qualifier for "suggested by machine translation". ``<file>`` gets ``target-language``.
- XLIFF 2.0: each ``<segment>`` of a ``<unit>`` gets its ``<target>`` and ``state="translated"``
  (2.0's states are initial, translated, reviewed, final); ``<xliff>`` gets ``trgLang``.
- Inline codes are markup, placed where the translation puts their words (as HTML tags are):
  ``<g>``, ``<pc>`` and ``<mrk>`` wrap words; ``<x/>``, ``<bx/>``, ``<ex/>``, ``<ph>``,
  ``<bpt>``, ``<ept>``, ``<it>``, ``<sc/>``, ``<ec/>``, ``<sm/>``, ``<em/>``, ``<cp/>`` are
  points kept whole (their content is native code, never read as text). A protected
  ``<mrk>`` (1.2 ``mtype="protected"``, 2.0 ``translate="no"``) is kept as written.
- Left alone: a unit with ``translate="no"``, ``<seg-source>`` (its segmentation is not
  followed: the source is translated whole) and, in a file whose target language is Chinese,
  a target that has text already (a person's); in a file for another language every target is
  translated anew (its text is in that language).

The XML is checked first (``xml_scan.check``): an entity declaration or an external entity is
refused, never expanded nor fetched.
"""

from __future__ import annotations

import bisect
import re

from seq2seq.errors import DataError
from seq2seq.formats.inline import Document, Markup, Segment, shift
from seq2seq.formats.xml_scan import (
    Token,
    check,
    escape,
    matching_end,
    set_attribute,
    text_of,
    tokens,
)

PAIRED = frozenset({"g", "pc", "mrk"})  # inline codes around words
STATE_12 = ' state="needs-review-translation" state-qualifier="mt-suggestion"'
_SPACES = re.compile(r"[ \t]+")
_DECLARED = re.compile(r"""(<\?xml[^>]*?encoding\s*=\s*)("[^"]*"|'[^']*')""")


def parse_xliff(document: str, source: str = "<xliff>", language: str = "zh-CN") -> Document:
    """``document`` as raw parts and one segment per unit (1.2) or segment (2.0) to translate.

    Args:
        language: the target language written on the file (``target-language``, ``trgLang``).

    Raises:
        DataError: XML that does not parse or asks for entities, or a document that is not
            XLIFF 1.x or 2.x, naming ``source`` (and the line).
    """
    check(document, source)
    found = tokens(document)
    root = next((t for t in found if t.kind in ("start", "empty")), None)
    if root is None or root.name != "xliff":
        raise DataError.at(source, None, "not XLIFF (its root element is not <xliff>)")
    version = root.attrs.get("version", "")
    if not re.match(r"[12]\.", version):
        raise DataError.at(source, None, f"XLIFF version {version!r} (1.x and 2.x are read)")
    two = version.startswith("2")
    reader = _Reader(document, found, two, language)
    # Targets in Chinese are kept (a person's); in another language they are translated anew.
    declared = root.attrs.get("trgLang", "") if two else _file_language(found)
    reader.keep = declared.lower().startswith("zh")
    return reader.read()


def _file_language(found: list[Token]) -> str:
    first = next((t for t in found if t.kind in ("start", "empty") and t.name == "file"), None)
    return first.attrs.get("target-language", "") if first else ""


class _Reader:
    """Walks the tokens; ``edits`` are (start, end, parts): what replaces text[start:end]."""

    def __init__(self, document: str, found: list[Token], two: bool, language: str) -> None:
        self.document, self.found, self.two, self.language = document, found, two, language
        self.edits: list[tuple[int, int, Document]] = []
        self.keep = False  # targets that have text are kept (they are in Chinese already)
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", document)]

    def read(self) -> Document:
        index = 0
        unit = "segment" if self.two else "trans-unit"
        while index < len(self.found):
            token = self.found[index]
            if token.kind == "start" and token.attrs.get("translate") == "no":
                index = matching_end(self.found, index) + 1  # a unit or group not translated
                continue
            if token.kind in ("start", "empty") and token.name == "xliff" and self.two:
                self._retag(token, "trgLang")
            elif token.kind in ("start", "empty") and token.name == "file" and not self.two:
                self._retag(token, "target-language")
            elif token.kind == "start" and token.name == unit:
                end = matching_end(self.found, index)
                self._unit(index, end)
                index = end
            index += 1
        return self._assemble()

    def _retag(self, token: Token, name: str) -> None:
        self.edits.append((token.start, token.end, [set_attribute(token.raw, name, self.language)]))

    def _children(self, start: int, end: int) -> dict[str, tuple[int, int]]:
        """The direct child elements of ``found[start]`` (up to ``end``) by name: (first, last)."""
        children, index = {}, start + 1
        while index < end:
            token = self.found[index]
            if token.kind in ("start", "empty"):
                last = matching_end(self.found, index)
                children.setdefault(token.name, (index, last))
                index = last
            index += 1
        return children

    def _unit(self, start: int, end: int) -> None:
        children = self._children(start, end)
        if "source" not in children:
            return
        first, last = children["source"]
        target = children.get("target")
        if self.keep and target is not None and self._has_text(*target):
            return  # translated already (by a person): kept
        content = self._content(first, last)
        if content is None:
            return
        if self.two:
            self._retag_state(self.found[start])
        opening = "<target" + ("" if self.two else STATE_12) + ">"
        if target is None:
            # After </source>, on a line of its own indented like the source when it is.
            before = self.found[first - 1]
            indent = before.raw if before.kind == "text" and not before.raw.strip() else ""
            at = self.found[last].end
            self.edits.append((at, at, [indent + opening, *content, "</target>"]))
            return
        tag = self.found[target[0]]
        opening = tag.raw[:-2] + ">" if tag.kind == "empty" else tag.raw
        if not self.two:
            opening = set_attribute(
                set_attribute(opening, "state", "needs-review-translation"),
                "state-qualifier",
                "mt-suggestion",
            )
        self.edits.append((tag.start, self.found[target[1]].end, [opening, *content, "</target>"]))

    def _retag_state(self, token: Token) -> None:
        self.edits.append(
            (token.start, token.end, [set_attribute(token.raw, "state", "translated")])
        )

    def _has_text(self, first: int, last: int) -> bool:
        return any(text_of(t).strip() for t in self.found[first + 1 : last])

    def _content(self, first: int, last: int) -> Document | None:
        """The target's content for the source ``found[first:last + 1]``: white space at its
        edges as written around one segment; a source of codes alone copied as written;
        None for an empty source."""
        inner = self.found[first + 1 : last]
        raw = self.document[self.found[first].end : self.found[last].start]
        if not raw:
            return None
        if not any(text_of(t).strip() for t in _outside_codes(inner)):
            return [raw]
        segment, lead, trail = _segment(inner)
        segment.line = bisect.bisect_right(self.line_starts, self.found[first].start)
        return [escape(lead), segment, escape(trail)]

    def _assemble(self) -> Document:
        parts: Document = []
        position = 0
        for start, end, replacement in sorted(self.edits, key=lambda edit: edit[0]):
            parts.append(self.document[position:start])
            parts += replacement
            position = end
        parts.append(self.document[position:])
        return _declared_utf8([part for part in parts if part != ""])


def _declared_utf8(parts: Document) -> Document:
    """The XML declaration says UTF-8 (the commands write UTF-8); "utf-8" stays as written."""
    if parts and isinstance(parts[0], str):

        def utf8(found: re.Match) -> str:
            quote, name = found.group(2)[0], found.group(2)[1:-1]
            return found.group(1) + (
                found.group(2) if name.lower() in ("utf-8", "utf8") else f"{quote}UTF-8{quote}"
            )

        parts[0] = _DECLARED.sub(utf8, parts[0], count=1)
    return parts


def _outside_codes(inner: list[Token]) -> list[Token]:
    """The tokens read as text: outside point codes (whose content is native code)."""
    kept, depth = [], 0
    for token in inner:
        if depth:
            depth += {"start": 1, "end": -1}.get(token.kind, 0)
            continue
        if token.kind == "start" and token.name not in PAIRED:
            depth = 1
            continue
        kept.append(token)
    return kept


def _segment(inner: list[Token]) -> tuple[Segment, str, str]:
    """The source's tokens as (segment, white space before it, white space after it)."""
    text: list[str] = []
    length = 0
    top: list[Markup] = []
    stack: list[Markup] = []
    index = 0
    while index < len(inner):
        token = inner[index]
        siblings = stack[-1].children if stack else top
        if token.kind in ("text", "other"):
            piece = _SPACES.sub(" ", text_of(token))  # the model reads one space
            if piece.startswith(" ") and text and text[-1].endswith(" "):
                piece = piece[1:]
            text.append(piece)
            length += len(piece)
        elif token.kind == "empty" or (token.kind == "start" and token.name not in PAIRED):
            last = index if token.kind == "empty" else _close(inner, index)
            siblings.append(Markup(length, length, "".join(t.raw for t in inner[index : last + 1])))
            index = last
        elif token.kind == "start" and _protected(token):
            last = _close(inner, index)
            words = "".join(text_of(t) for t in inner[index + 1 : last])
            literal = "".join(t.raw for t in inner[index + 1 : last])
            siblings.append(
                Markup(length, length + len(words), token.raw, inner[last].raw, literal)
            )
            text.append(words)
            length += len(words)
            index = last
        elif token.kind == "start":
            markup = Markup(length, length, token.raw)
            siblings.append(markup)
            stack.append(markup)
        elif token.kind == "end" and stack:
            markup = stack.pop()
            markup.end, markup.close = length, token.raw
        index += 1
    whole = "".join(text)
    lead = len(whole) - len(whole.lstrip())
    body = whole.strip()
    shift(top, -lead, len(body))
    return Segment(body, top, escape=escape), whole[:lead], whole[lead + len(body) :]


def _protected(token: Token) -> bool:
    return token.name == "mrk" and (
        token.attrs.get("mtype") == "protected" or token.attrs.get("translate") == "no"
    )


def _close(inner: list[Token], index: int) -> int:
    """The index in ``inner`` of the end of the element started at ``inner[index]``."""
    return index + matching_end(inner[index:], 0)
