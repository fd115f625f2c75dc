"""XML read for translation: checked by a hardened parser, then cut into tokens with their
exact source offsets, so that a writer gives back every byte it does not translate.

Why two passes: a tree parser (ElementTree, lxml) re-serialises the whole document (quoting,
namespace prefixes, empty-element forms, character references), where XLIFF and office files
must come back byte for byte but for their translated text. ``check`` runs expat over the
document first, refusing what an XML bomb or an external-entity attack needs (any entity
declaration, an external entity or DTD reference, an entity not defined), as ``defusedxml``
does; once it passes, the document is well formed and ``tokens`` can cut it with plain
regular expressions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from xml.parsers import expat

from seq2seq.errors import DataError


class _Refused(Exception):
    """Raised from an expat handler: the document asks for something never done."""


def check(text: str | bytes, source: str) -> None:
    """Whether ``text`` is well-formed XML that asks for no entity expansion.

    Raises:
        DataError: naming ``source``, the line and the problem: XML that does not parse, an
            entity declaration (entities are never expanded: the "billion laughs"), an
            external entity or DTD (never fetched), an entity reference not defined.
    """
    parser = expat.ParserCreate(encoding="utf-8" if isinstance(text, str) else None)
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)

    def refuse(problem: str):  # noqa: ANN202 (an expat handler)
        def handler(*_args) -> None:
            raise _Refused(problem)

        return handler

    parser.EntityDeclHandler = refuse(
        "XML declares an entity (refused: entities are never expanded)"
    )
    parser.UnparsedEntityDeclHandler = refuse("XML declares an unparsed entity (refused)")
    parser.ExternalEntityRefHandler = refuse("XML refers to an external entity (refused)")
    parser.SkippedEntityHandler = refuse("XML uses an entity it does not define (refused)")
    data = text.encode("utf-8") if isinstance(text, str) else text
    try:
        parser.Parse(data, True)
    except _Refused as refused:
        raise DataError.at(source, parser.CurrentLineNumber, str(refused)) from None
    except expat.ExpatError as error:
        problem = expat.ErrorString(error.code)
        raise DataError.at(source, error.lineno, f"XML does not parse: {problem}") from None


@dataclass
class Token:
    """One piece of a document: ``kind`` is ``start``, ``end``, ``empty`` (``<x/>``),
    ``text`` or ``other`` (a comment, CDATA, processing instruction, declaration, doctype);
    ``raw`` is ``text[start:end]`` as written."""

    kind: str
    start: int
    end: int
    raw: str
    name: str = ""  # the local name, without its prefix (w:t -> t)
    attrs: dict[str, str] = field(default_factory=dict)  # by qualified name, unescaped


_OTHER = re.compile(r"<!--.*?-->|<!\[CDATA\[.*?\]\]>|<\?.*?\?>|<!DOCTYPE(?:[^\[>]|\[.*?\])*>", re.S)
_TAG = re.compile(r"""<(/?)([^\s/>!?]+)((?:\s+[^\s=/>]+\s*=\s*(?:"[^"]*"|'[^']*'))*)\s*(/?)>""")
_ATTR = re.compile(r"""([^\s=]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")


def tokens(text: str) -> list[Token]:
    """``text`` (XML that passed ``check``) as tokens covering it end to end."""
    found: list[Token] = []
    position = 0
    while position < len(text):
        angle = text.find("<", position)
        if angle < 0:
            angle = len(text)
        if angle > position:
            found.append(Token("text", position, angle, text[position:angle]))
            position = angle
            continue
        other = _OTHER.match(text, position)
        if other:
            found.append(Token("other", position, other.end(), other.group()))
            position = other.end()
            continue
        tag = _TAG.match(text, position)
        if tag is None:  # cannot happen in XML that passed check()
            raise ValueError(f"not XML at offset {position}: {text[position : position + 20]!r}")
        kind = "end" if tag.group(1) else "empty" if tag.group(4) else "start"
        attrs = {
            m.group(1): unescape(m.group(2) or m.group(3) or "")
            for m in _ATTR.finditer(tag.group(3))
        }
        name = tag.group(2).rsplit(":", 1)[-1]
        found.append(Token(kind, position, tag.end(), tag.group(), name, attrs))
        position = tag.end()
    return found


_REFERENCE = re.compile(r"&(?:#x([0-9a-fA-F]+)|#([0-9]+)|(lt|gt|amp|quot|apos));")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}


def unescape(text: str) -> str:
    """XML text with its character references and the five predefined entities decoded
    (no other entity can be left: ``check`` refuses them)."""

    def decode(found: re.Match) -> str:
        if found.group(1):
            return chr(int(found.group(1), 16))
        if found.group(2):
            return chr(int(found.group(2)))
        return _NAMED[found.group(3)]

    return _REFERENCE.sub(decode, text)


def text_of(token: Token) -> str:
    """What a reader sees of a ``text`` or CDATA token."""
    if token.kind == "other" and token.raw.startswith("<![CDATA["):
        return token.raw[9:-3]
    return unescape(token.raw) if token.kind == "text" else ""


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def escape(text: str) -> str:
    """Text written into element content (``&``, ``<`` and ``>`` escaped); the characters
    XML 1.0 cannot hold (C0 controls but tab and newlines, which a model can write) dropped."""
    text = _NOT_XML.sub("", text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_attribute(text: str) -> str:
    return escape(text).replace('"', "&quot;")


def matching_end(found: list[Token], index: int) -> int:
    """The index of the token that closes the element started at ``found[index]`` (itself for
    an empty element)."""
    if found[index].kind == "empty":
        return index
    depth = 0
    for j in range(index, len(found)):
        if found[j].kind == "start":
            depth += 1
        elif found[j].kind == "end":
            depth -= 1
            if not depth:
                return j
    raise ValueError(f"element {found[index].raw!r} is not closed")


def set_attribute(tag: str, name: str, value: str) -> str:
    """A start tag (``<file ...>``) with attribute ``name`` set to ``value``: replaced in
    place where it is, else added before the tag's end; the rest as written."""
    pattern = re.compile(rf"""(\s{re.escape(name)}\s*=\s*)("[^"]*"|'[^']*')""")
    quoted = f'"{escape_attribute(value)}"'
    if pattern.search(tag):
        return pattern.sub(lambda m: m.group(1) + quoted, tag, count=1)
    end = len(tag) - (2 if tag.endswith("/>") else 1)
    while end > 0 and tag[end - 1].isspace():
        end -= 1
    return f"{tag[:end]} {name}={quoted}{tag[end:]}"
