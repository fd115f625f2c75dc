"""Bytes to text for ``documents-wild``: the encoding of an input (the manifest's, its
byte-order mark, its declared charset, UTF-8, else windows-1252) and of an output, and what an
output got wrong about its own encoding."""

from __future__ import annotations

import codecs
import re

BOMS = [  # longest first: UTF-32-LE starts with the UTF-16-LE mark
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
]
_CHARSET = re.compile(rb"""<meta\b[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_XML_ENCODING = re.compile(rb"""\A(?:\xef\xbb\xbf)?\s*<\?xml\b[^>]*?encoding\s*=\s*["']([^"']+)""")


def bom_of(raw: bytes) -> str:
    """The encoding a byte-order mark at the start names ("" when none)."""
    for mark, name in BOMS:
        if raw.startswith(mark):
            return name
    return ""


def declared_charsets(raw: bytes) -> list[str]:
    """The charsets an HTML document declares, lower-cased: ``<meta charset>`` and
    ``<meta http-equiv content="...; charset=...">`` first, then an XML declaration's."""
    labels = [m.group(1) for m in _CHARSET.finditer(raw)]
    labels += [m.group(1) for m in _XML_ENCODING.finditer(raw)]
    return [label.decode("ascii", "replace").strip().lower() for label in labels]


def codec_of(label: str) -> str | None:
    """Python's codec for an encoding label, None for a label it does not know."""
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


def _body(raw: bytes) -> tuple[bytes, str]:
    """The bytes after a byte-order mark and the encoding the mark names."""
    bom = bom_of(raw)
    mark = next((m for m, name in BOMS if name == bom), b"")
    return raw[len(mark) :], bom


def input_codec(raw: bytes, format: str, encoding: str | None = None) -> str:
    """The codec a source document is read in: ``encoding`` when known (the manifest records
    it), else its byte-order mark's, else (HTML) its declared charset's, else UTF-8 if its bytes
    are UTF-8, else windows-1252."""
    if encoding:
        return codec_of(encoding) or "utf-8"
    bom = bom_of(raw)
    if bom:
        return bom
    for label in declared_charsets(raw) if format == "html" else []:
        if codec_of(label):
            return _latin(label)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return "cp1252"
    return "utf-8"


def _latin(label: str) -> str:
    """ASCII and Latin-1 labels read as windows-1252, as browsers read them."""
    codec = codec_of(label) or "utf-8"
    return "cp1252" if codec in ("ascii", "latin-1", "iso8859-1") else codec


def decode_input(raw: bytes, format: str, encoding: str | None = None) -> str:
    """A source document as its author wrote it (``input_codec``; invalid bytes become U+FFFD,
    a leading U+FEFF is dropped)."""
    _, bom = _body(raw)
    if bom and not encoding:
        return _body(raw)[0].decode(bom, errors="replace")
    codec = input_codec(raw, format, encoding)
    return raw.decode(codec, errors="replace").removeprefix("\ufeff")


def decode_output(raw: bytes, format: str, fallback: str = "utf-8") -> str:
    """A translation as it is: by its byte-order mark, else UTF-8 when its bytes are UTF-8
    (what the translator writes; a declaration saying otherwise is counted by
    ``encoding_mistakes``), else (HTML) by its declared charset, else in ``fallback`` (the
    input's codec: an output kept in the input's encoding); invalid bytes become U+FFFD."""
    body, bom = _body(raw)
    if bom:
        return body.decode(bom, errors="replace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    labels = [label for label in declared_charsets(raw) if codec_of(label)]
    codec = _latin(labels[0]) if format == "html" and labels else fallback
    return raw.decode(codec, errors="replace").removeprefix("\ufeff")


def encoding_mistakes(
    raw_in: bytes, raw_out: bytes, format: str, source_codec: str = "utf-8"
) -> list[str]:
    """What is wrong with the output's encoding, one short phrase per mistake (at most two):
    a byte-order mark of the input dropped or changed (other than to UTF-8's, in an output
    written in UTF-8), and the output not decodable in the
    encoding it declares (its byte-order mark, else for HTML its first declared charset, else
    UTF-8 or the input's own codec) or, decodable there, a declared non-UTF-8 charset over
    bytes that are UTF-8."""
    mistakes = []
    bom_in, bom_out = bom_of(raw_in), bom_of(raw_out)
    # A UTF-16 document translated into UTF-8 keeps its mark as UTF-8's: not a mistake.
    if bom_in and bom_in != bom_out and bom_out != "utf-8":
        mistakes.append(f"{bom_in} BOM dropped" if not bom_out else f"BOM {bom_in}->{bom_out}")
    body, _ = _body(raw_out)
    declared = declared_charsets(raw_out) if format == "html" else []
    label = bom_out or (declared[0] if declared else "utf-8")
    codec = codec_of(label)
    accepted = [codec or "unknown-codec"]
    if not bom_out and not declared:
        accepted.append(source_codec)
    if not any(_decodes(body, name) for name in accepted):
        return [*mistakes, f"not {label}"]
    if bom_out or codec == "utf-8" or body.isascii():
        return mistakes
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return mistakes
    return [*mistakes, f"says {label}, is UTF-8"]


def _decodes(raw: bytes, codec: str) -> bool:
    try:
        raw.decode(codec)
    except (UnicodeDecodeError, LookupError):
        return False
    return True
