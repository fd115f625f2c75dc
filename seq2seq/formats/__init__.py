"""Document formats, floor 3 (beside data): each parsed into raw parts kept as written and
segments to translate (``inline.Document``). Pure text: no model.

    inline.py    the Document every format parses into; inline markup put back by alignment
    html.py      HTML
    markdown.py  Markdown (its inline tokens read into text and markup: markdown_inline.py)
    markdown_emphasis.py  Markdown emphasis settled so that it renders beside Chinese
    srt.py       SubRip subtitles
    po.py        gettext catalogs (.po, .pot): msgstr filled, marked fuzzy
    xliff.py     XLIFF 1.2 and 2.0: targets filled, inline codes placed
    xml_scan.py  XML checked (no entity expansion) and cut into tokens at exact offsets
    zipped.py    zip containers (office documents) read within limits, written back exactly
    office.py    Word and PowerPoint (.docx, .pptx): paragraphs translated, runs as markup
    office_language.py  the target's language on translated Word and PowerPoint runs
    spreadsheet.py  Excel (.xlsx): cell strings translated, formulas and numbers never
    opendocument.py  OpenDocument (.odt, .odp, .ods): paragraphs, spans as markup
    epub.py      EPUB books: pages read as HTML, tables of contents, the title
    packages.py  the zip and XML parts of those three read, refused in one line
    verbatim.py  spans kept as written (URLs, numbers, identifiers...), marked literal
    verbatim_placement.py  where each span goes in a translation (never over a glossary term)
    encoding.py  a document's bytes: its encoding found, read exactly, written back
    chinese_script.py  the Chinese written: zh-Hans, or zh-Hant, zh-TW, zh-HK by OpenCC

``parse(text, format)`` reads any of them but the zipped ones (``ZIPPED``: bytes, not text),
which ``read_zipped(data, format)`` reads; ``format_of(path)`` picks one from a file name.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from seq2seq.formats.inline import Document, Segment, rebuild, render, segments
from seq2seq.formats.zipped import Write

FORMATS = (
    *("text", "html", "markdown", "srt", "po", "xliff"),
    *("docx", "pptx", "xlsx", "odt", "odp", "ods", "epub"),
)
# Read from bytes (read_zipped), never decoded as text.
ZIPPED = frozenset({"docx", "pptx", "xlsx", "odt", "odp", "ods", "epub"})
EXTENSIONS = {
    ".txt": "text",
    ".text": "text",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".srt": "srt",
    ".po": "po",
    ".pot": "po",
    ".xlf": "xliff",
    ".xliff": "xliff",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".odt": "odt",
    ".odp": "odp",
    ".ods": "ods",
    ".epub": "epub",
}


def format_of(path: str | Path | None, default: str = "text") -> str:
    """The format a file's extension names (``default`` for stdin or another extension)."""
    if path is None:
        return default
    return EXTENSIONS.get(Path(path).suffix.lower(), default)


def parse(text: str, format: str, source: str = "<input>") -> Document:
    """``text`` in ``format`` as a document.

    Raises:
        DataError: HTML, SRT, PO or XLIFF that does not parse, naming ``source`` and the line.
        ValueError: an unknown format.
    """
    if format == "text":
        return parse_text(text)
    if format == "html":
        from seq2seq.formats.html import parse_html

        return parse_html(text, source)
    if format == "markdown":
        from seq2seq.formats.markdown import parse_markdown

        return parse_markdown(text)
    if format == "srt":
        from seq2seq.formats.srt import parse_srt

        return parse_srt(text, source)
    if format == "po":
        from seq2seq.formats.po import parse_po

        return parse_po(text, source)
    if format == "xliff":
        from seq2seq.formats.xliff import parse_xliff

        return parse_xliff(text, source)
    if format in ZIPPED:
        raise ValueError(f"a {format} document is bytes, not text: read it with read_zipped")
    raise ValueError(f"unknown format {format!r} (formats: {', '.join(FORMATS)})")


def read_zipped(
    data: bytes | BinaryIO, format: str, source: str = "<input>"
) -> tuple[list[Document], Write]:
    """A zipped document (``ZIPPED``; its bytes, or a binary file open for reading, left open
    until the file is written) as the documents of its translated parts, and the function that
    writes the file back given them rebuilt (``inline.rebuild``): as bytes, or into a binary
    file (``zipped.Write``), the members it does not translate streamed from the input.

    Raises:
        DataError: a file that is not one, or is corrupt, too large or unsafe, naming ``source``.
    """
    if format == "xlsx":
        from seq2seq.formats.spreadsheet import read_xlsx

        return read_xlsx(data, source)
    if format in ("odt", "odp", "ods"):
        from seq2seq.formats.opendocument import read_opendocument

        return read_opendocument(data, source, format)
    if format == "epub":
        from seq2seq.formats.epub import read_epub

        return read_epub(data, source)
    if format in ZIPPED:
        from seq2seq.formats.office import read_office

        return read_office(data, source, format)
    raise ValueError(f"{format!r} is not a zipped format ({', '.join(sorted(ZIPPED))})")


def parse_text(text: str) -> Document:
    """Plain text: each line a segment, line breaks and each line's indentation kept (an empty
    line stays empty)."""
    parts: Document = []
    for index, line in enumerate(text.split("\n")):
        if index:
            parts.append("\n")
        body = line.rstrip("\r")
        if body.strip():
            indent = body[: len(body) - len(body.lstrip())]
            if indent:  # code, poems, quoted mail: the line's place is part of it
                parts.append(indent)
            parts.append(Segment(body.strip(), line=index + 1))
        parts.append(line[len(body) :])
    return parts


__all__ = [
    "FORMATS",
    "ZIPPED",
    "Document",
    "Segment",
    "format_of",
    "parse",
    "parse_text",
    "read_zipped",
    "rebuild",
    "render",
    "segments",
]
