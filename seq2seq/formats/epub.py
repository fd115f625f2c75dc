"""EPUB books (``.epub``) as ``Document``\\ s: each content document read as the HTML format
reads a page, the tables of contents and the title translated, every other byte of the book
kept (issue 57). Pure bytes: no model.

The parts are found as a reading system finds them: ``META-INF/container.xml`` names each
package document (the ``.opf``), whose manifest and spine name the rest. Translated:

- each XHTML content document of the spine, and the EPUB 3 navigation document (the item
  with ``properties="nav"``), read by ``html.parse_html``: headings, paragraphs, list items,
  table cells and the page's ``<title>`` are segments, inline elements (``<em>``, ``<a>``,
  ``<span>``) are placed where the translation puts their words; code, images and attribute
  values are kept; the ``<html>`` element's ``lang`` and ``xml:lang`` say the target;
- the EPUB 2 table of contents (the NCX): the ``<text>`` of each ``<navLabel>`` and of the
  ``<docTitle>``, each a segment; its ``<ncx xml:lang>`` says the target;
- the package document's ``<dc:title>``; its first ``<dc:language>`` says the target.

The XHTML is not checked by an XML parser: ``&nbsp;`` and the other HTML entities, which the
XHTML DTD declares, are common, and an XML parser that reads no DTD refuses them. The
container, the package documents and the NCX are checked (``xml_scan.check``: no entity
ever expanded). Translated text is escaped as XML and loses the characters XML cannot hold,
so a well-formed page stays well formed. Kept byte for byte: every other member (the
``mimetype``, written first and stored as the format wants it; stylesheets, images, fonts,
SVG), the manifest and spine, and all markup outside the translated text.
"""

from __future__ import annotations

import copy
import posixpath
import re
import zipfile
from typing import BinaryIO
from urllib.parse import unquote

from seq2seq.errors import DataError
from seq2seq.formats.chinese_script import SIMPLIFIED
from seq2seq.formats.html import parse_html
from seq2seq.formats.html import with_lang as page_with_lang
from seq2seq.formats.inline import Document, Segment, segments
from seq2seq.formats.packages import decoded, member, open_package, xml_text
from seq2seq.formats.xml_scan import Token, escape, tokens, unescape
from seq2seq.formats.zipped import Member, Write, write_zip

KIND = "an EPUB book"
MIMETYPE = "application/epub+zip"
CONTAINER = "META-INF/container.xml"
ENCRYPTION = "META-INF/encryption.xml"
PACKAGE_TYPE = "application/oebps-package+xml"
PAGE_TYPES = frozenset({"application/xhtml+xml", "text/html"})
NCX_TYPE = "application/x-dtbncx+xml"
# The element whose text is a segment, and the elements it is translated inside, by part.
LABELS = {"ncx": ("text", frozenset({"navLabel", "docTitle"})), "package": ("title", {"metadata"})}


def read_epub(data: bytes, source: str) -> tuple[list[Document], Write]:
    """The translated parts of the book ``data`` as documents, in member order, each saying
    it is in Simplified Chinese (``with_lang`` retags them for another target), and the
    function that writes the book back given each document rebuilt.

    Raises:
        DataError: ``source: problem``: not a zip (or a corrupt, encrypted, oversized one),
            not an EPUB book (no ``mimetype`` saying so, no container, a package document
            missing), XML that does not parse or declares entities, a part not in UTF-8, a page
            encrypted (DRM).
    """
    members = open_package(data, source, KIND)
    _check_mimetype(members, source)
    kinds: dict[str, str] = {}
    for package in _packages(members, source):
        kinds |= _translated_parts(package, source)
    _check_not_encrypted(members, kinds, source)
    parts = [m for m in members if m.info.filename in kinds]
    documents = [_read(part, kinds[part.info.filename], source) for part in parts]
    documents = [with_lang(document, SIMPLIFIED) for document in documents]

    def write(outputs: list[str], into: BinaryIO | None = None) -> bytes | None:
        if len(outputs) != len(parts):
            raise ValueError(f"{len(outputs)} outputs for {len(parts)} parts")
        replaced = {
            part.info.filename: output.encode("utf-8")
            for part, output in zip(parts, outputs, strict=True)
        }
        return write_zip(_mimetype_first(members), replaced, into)

    return documents, write


def _check_mimetype(members: list[Member], source: str) -> None:
    found = member(members, "mimetype")
    if found is None:
        raise DataError(f"{source}: not {KIND} (no mimetype in the zip)")
    said = found.data.decode("ascii", "replace").strip()
    if said != MIMETYPE:
        raise DataError(f"{source}: not {KIND} (its mimetype is {said[:80]})")


def _packages(members: list[Member], source: str) -> list[Member]:
    """The package documents the container names (a book with several renditions has one
    for each)."""
    container = member(members, CONTAINER)
    if container is None:
        raise DataError(f"{source}: not {KIND} (no {CONTAINER} in the zip)")
    paths = [
        token.attrs["full-path"]
        for token in _elements(tokens(xml_text(container, source)), "rootfile")
        if token.attrs.get("full-path")
        and token.attrs.get("media-type", PACKAGE_TYPE) == PACKAGE_TYPE
    ]
    if not paths:
        raise DataError(f"{source}:{CONTAINER}: names no package document (<rootfile>)")
    packages = []
    for path in paths:
        package = member(members, path)
        if package is None:
            raise DataError(f"{source}: not {KIND} (its package document {path} is not in it)")
        packages.append(package)
    return packages


def _elements(found: list[Token], name: str) -> list[Token]:
    return [t for t in found if t.kind in ("start", "empty") and t.name == name]


def _translated_parts(package: Member, source: str) -> dict[str, str]:
    """The members a package document names that are translated, by the kind of part: the
    package itself, the pages of its spine and its navigation document, its NCX."""
    found = tokens(xml_text(package, source))
    base = posixpath.dirname(package.info.filename)
    spine = {token.attrs.get("idref") for token in _elements(found, "itemref")}
    kinds = {package.info.filename: "package"}
    for item in _elements(found, "item"):
        href, media = item.attrs.get("href"), item.attrs.get("media-type", "")
        if not href or "://" in href:  # a remote resource: not in the book
            continue
        name = posixpath.normpath(posixpath.join(base, unquote(href.split("#")[0])))
        navigation = "nav" in item.attrs.get("properties", "").split()
        if media in PAGE_TYPES and (item.attrs.get("id") in spine or navigation):
            kinds[name] = "page"
        elif media == NCX_TYPE:
            kinds[name] = "ncx"
    return kinds


def _check_not_encrypted(members: list[Member], kinds: dict[str, str], source: str) -> None:
    """Refuses a book whose translated parts are encrypted (DRM), whose bytes would otherwise
    be taken for text; fonts obfuscated as the format allows are kept like any member."""
    found = member(members, ENCRYPTION)
    if found is None:
        return
    for reference in _elements(tokens(xml_text(found, source)), "CipherReference"):
        name = posixpath.normpath(unquote(reference.attrs.get("URI", "")))
        if name in kinds:
            raise DataError(f"{source}: {name} is encrypted (DRM: the book cannot be read)")


def _read(part: Member, kind: str, source: str) -> Document:
    if kind == "page":
        return _page(part, source)
    element, parents = LABELS[kind]
    return _labels(xml_text(part, source), element, parents)


def _page(part: Member, source: str) -> Document:
    """An XHTML page read as HTML, its translated text written as XML (``xml_scan.escape``:
    ``&``, ``<``, ``>`` escaped, characters XML cannot hold dropped)."""
    text = decoded(part, source)
    mark = "\ufeff" if text.startswith("\ufeff") else ""  # a byte-order mark: kept, not read
    document = parse_html(text[len(mark) :], f"{source}:{part.info.filename}")
    for segment in segments(document):
        segment.escape = escape
    return [mark, *document] if mark else document


def _labels(text: str, element: str, parents: frozenset[str] | set[str]) -> Document:
    """A part (checked XML) with the text of each ``element`` directly inside one of
    ``parents`` a segment; one that holds anything but text is kept as written."""
    found = tokens(text)
    parts: Document = []
    position, open_names = 0, []
    for index, token in enumerate(found):
        if token.kind == "end":
            open_names.pop()
            continue
        if token.kind != "start":
            continue
        inside = open_names[-1] if open_names else ""
        open_names.append(token.name)
        if token.name != element or inside not in parents:
            continue
        content, after = found[index + 1], found[index + 2]  # the parent's end follows
        if content.kind != "text" or after.kind != "end" or not content.raw.strip():
            continue
        lead = len(content.raw) - len(content.raw.lstrip())
        trail = len(content.raw) - len(content.raw.rstrip())
        body = " ".join(unescape(content.raw).split())
        line = text.count("\n", 0, content.start + lead) + 1
        parts += [text[position : content.start + lead], Segment(body, escape=escape, line=line)]
        position = content.end - trail
    parts.append(text[position:])
    return [part for part in parts if part != ""]


_LANGUAGE = re.compile(r"(<(?:\w+:)?language(?=[\s>])[^>]*(?<!/)>)[^<]*(?=<)")
# Elements whose text is now the translation: an xml:lang on them says the target.
_LANG_HOLDER = re.compile(r"<(?:\w+:)?(?:ncx|title)(?=[\s/>])[^>]*>")
_XML_LANG = re.compile(r"""(\sxml:lang\s*=\s*)("[^"]*"|'[^']*')""")


def with_lang(document: Document, target: str) -> Document:
    """``document`` (a part ``read_epub`` read) saying it is in ``target`` (a
    ``chinese_script`` target): a page's ``<html lang xml:lang>`` (``html.with_lang``), a
    package's first ``<dc:language>``, the ``xml:lang`` of an ``<ncx>`` or a title where
    there is one."""
    retagged: Document = []
    language_said = False
    for part in page_with_lang(document, target):
        if isinstance(part, str):
            if not language_said:
                part, count = _LANGUAGE.subn(lambda found: found.group(1) + target, part, 1)
                language_said = count > 0
            part = _LANG_HOLDER.sub(lambda found: _with_xml_lang(found.group(), target), part)
        retagged.append(part)
    return retagged


def _with_xml_lang(tag: str, target: str) -> str:
    def retag(found: re.Match) -> str:
        quote = found.group(2)[0]
        return f"{found.group(1)}{quote}{target}{quote}"

    return _XML_LANG.sub(retag, tag)


def _mimetype_first(members: list[Member]) -> list[Member]:
    """The members with ``mimetype`` first and stored, as a reading system looks for it
    (a book that had it elsewhere, or compressed, is given it so)."""
    found = member(members, "mimetype")
    if members[0] is found and found.info.compress_type == zipfile.ZIP_STORED:
        return members
    info = copy.copy(found.info)
    info.compress_type = zipfile.ZIP_STORED
    return [Member(info, found.data), *(m for m in members if m is not found)]
