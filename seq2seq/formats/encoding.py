"""A document's bytes in and out: which encoding they are in, their text read exactly, and the
translation written back, in UTF-8 with the document's declaration saying so (or, asked for, in
the input's own encoding). Pure bytes and text: no model.

Where the encoding comes from, the first found wins:

1. a byte-order mark (UTF-8, UTF-16 LE/BE, UTF-32 LE/BE), the strongest evidence (the HTML
   standard puts it first too): it overrides an encoding asked for, with a warning;
2. the encoding asked for (``seq2seq translate --encoding``), over the document's declaration;
3. the document's declaration (HTML only): the XML declaration at the very start
   (``<?xml version="1.0" encoding="..."?>``, XHTML), else the first ``<meta charset="...">`` or
   ``<meta http-equiv="Content-Type" content="...; charset=...">`` in the first 1024 bytes, as
   a browser's prescan finds it (comments skipped, unknown labels passed over);
4. UTF-8, when the bytes are valid UTF-8;
5. ``charset-normalizer``'s guess, its ties broken towards the encodings of the web
   (``DETECTION_PREFERENCE``).

Labels are read as browsers read them (the WHATWG Encoding Standard), where that differs from
Python's codec of the same name: ``iso-8859-1``, ``latin1`` and ``ascii`` mean windows-1252,
``gb2312`` and ``gbk`` GB18030, ``big5`` Big5-HKSCS, ``shift_jis`` windows-31J (cp932),
``euc-kr`` windows-949, ``utf-16`` UTF-16LE (``SUPERSETS``, ``LABELS``). Every other label is
Python's codec of that name.

Decoding is exact: no U+FFFD is made up. Bytes invalid in the encoding a byte-order mark names
or the user asked for are a one-line ``DataError`` naming the file and line. A declaration is
often wrong on the web: bytes invalid in the declared encoding are read as steps 4 and 5 read
undeclared bytes, with a warning naming the line. NUL bytes outside UTF-16/32, or bytes no text
encoding fits, are a binary file, refused in one line.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, replace

from seq2seq.errors import DataError
from seq2seq.textio import BOMS, is_utf8, sniff_bom

PRESCAN_BYTES = 1024  # where a browser stops looking for <meta charset>
OUTPUT_ENCODINGS = ("utf-8", "input")

# Python codec -> the superset a browser decodes for the labels that name it.
SUPERSETS = {
    "ascii": "cp1252",
    "iso8859-1": "cp1252",
    "iso8859-9": "cp1254",
    "iso8859-11": "cp874",
    "tis-620": "cp874",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "big5": "big5hkscs",
    "shift_jis": "cp932",
    "euc_kr": "cp949",
    "utf-16": "utf-16-le",  # no byte-order mark: little-endian, as the WHATWG label says
    "utf-32": "utf-32-le",
}
# WHATWG labels Python does not know, and the codec each names.
LABELS = {
    "iso88591": "cp1252",
    "x-cp1252": "cp1252",
    "x-user-defined": "cp1252",
    "dos-874": "cp874",
    "windows-874": "cp874",
    "csgb2312": "gb18030",
    "gb_2312": "gb18030",
    "gb_2312-80": "gb18030",
    "x-gbk": "gb18030",
    "cn-big5": "big5hkscs",
    "x-x-big5": "big5hkscs",
    "windows-31j": "cp932",
    "x-sjis": "cp932",
    "cseuckr": "cp949",
    "windows-949": "cp949",
    "unicode": "utf-16-le",
    "unicode-1-1-utf-8": "utf-8",
    "x-mac-roman": "mac-roman",
    "x-mac-cyrillic": "mac-cyrillic",
}
# charset-normalizer often scores several encodings alike on a short file (cp1250 = cp1252,
# cp949 = gb18030): the first of these among the best wins, else its own first.
DETECTION_PREFERENCE = ("cp1252", "gb18030", "big5", "cp932", "shift_jis", "euc_jp", "cp949")
_CP1252_C1 = "seq2seq.cp1252-c1"  # the error handler below

_XML_DECLARATION = re.compile(r"""<\?xml\s[^>]*?\bencoding\s*=\s*(["'])(?P<label>[^"']*)\1""")
_HEAD_ITEM = re.compile(r"<!--.*?(?:-->|\Z)|<meta(?=[\s/>])(?P<attributes>[^>]*)>", re.I | re.S)
_ATTRIBUTE = re.compile(
    r"""(?P<name>[^\s"'>/=]+)(?:\s*=\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<uq>[^\s"'>]+)))?"""
)
_CONTENT_CHARSET = re.compile(
    r"""charset\s*=\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<uq>[^\s;"']+))""", re.I
)
_HEAD_END = re.compile(r"</head\s*>", re.I)


@dataclass(frozen=True)
class Decoded:
    """A document's text and how its bytes were encoded.

    Attributes:
        encoding: the Python codec read (``utf-8``, ``cp1252``, ``utf-16-le``, ``gb18030``...).
        bom: the bytes started with a byte-order mark (written back on output).
        found_by: where the encoding came from: ``byte-order mark``, ``asked for``,
            ``declaration``, ``utf-8`` or ``detection``.
        warnings: one-line warnings for the user (an overridden or a wrong declaration).
    """

    text: str
    encoding: str = "utf-8"
    bom: bool = False
    found_by: str = "utf-8"
    warnings: tuple[str, ...] = ()


def codec_name(label: str) -> str:
    """The Python codec an encoding label names, read as a browser reads it (module docstring):
    ``codec_name("ISO-8859-1") == "cp1252"``.

    Raises:
        ValueError: no text encoding has that name (``rot13`` is not one).
    """
    key = label.strip().lower()
    name = LABELS.get(key, key)
    try:
        "".encode(name)  # LookupError for an unknown name, and for a bytes-to-bytes codec
    except LookupError:
        raise ValueError(f"unknown encoding {label!r}") from None
    name = codecs.lookup(name).name
    return SUPERSETS.get(name, name)


def decode_document(data: bytes, format: str, source: str, encoding: str | None = None) -> Decoded:
    """A document's bytes as text, and how they were encoded (the order in the module
    docstring).

    Args:
        format: ``html`` reads declarations; other formats have none.
        source: the file's name, for errors and warnings.
        encoding: the label of the encoding asked for; None finds it.

    Raises:
        DataError: a binary file, or bytes invalid in the encoding a byte-order mark names or
            that was asked for, naming ``source`` (and the line).
        ValueError: ``encoding`` names no text encoding.
    """
    found = sniff_bom(data)
    if found is not None:
        bom, codec = found
        warnings = ()
        if encoding is not None and codec_name(encoding) != codec:
            warnings = (
                f"{source}: its {_shown(codec)} byte-order mark overrides the encoding asked "
                f"for ({encoding})",
            )
        text = _decoded(data[len(bom) :], codec, source, "as its byte-order mark says")
        return Decoded(text, codec, True, "byte-order mark", warnings)
    if encoding is not None:
        codec = codec_name(encoding)
        _refuse_binary(data, source, codec)
        return Decoded(
            _decoded(data, codec, source, "the encoding asked for"), codec, False, "asked for"
        )
    _refuse_binary(data, source, None)
    return _declared_or_found(data, format, source)


def encode_document(
    text: str,
    format: str,
    decoded: Decoded,
    output_encoding: str = "utf-8",
    destination: str = "<output>",
) -> bytes:
    """A translated document's bytes: UTF-8 with an HTML declaration rewritten to say so, or
    (``output_encoding="input"``) the input's own encoding, declaration untouched. A byte-order
    mark starts them when the input had one.

    Characters the input's encoding cannot hold become numeric character references in HTML
    (``&#20013;``); other formats have none, so there they are an error.

    Raises:
        DataError: a character the input's encoding cannot hold, outside HTML, naming
            ``destination`` and the line.
    """
    if output_encoding not in OUTPUT_ENCODINGS:
        raise ValueError(f"output encoding {output_encoding!r}: not one of {OUTPUT_ENCODINGS}")
    if output_encoding == "utf-8":
        text = declare_utf8(text) if format == "html" else text
        return (codecs.BOM_UTF8 if decoded.bom else b"") + text.encode("utf-8")
    codec = decoded.encoding
    bom = next(bom for bom, name in BOMS if name == codec) if decoded.bom else b""
    if format == "html":
        return bom + text.encode(codec, errors="xmlcharrefreplace")
    try:
        return bom + text.encode(codec)
    except UnicodeEncodeError as error:
        character = text[error.start]
        raise DataError.at(
            destination,
            text.count("\n", 0, error.start) + 1,
            f"{_shown(codec)} (the input's encoding) cannot hold {character!r} "
            f"(U+{ord(character):04X}); write UTF-8 instead",
        ) from None


def check_output_encoding(decoded: Decoded, format: str, output_encoding: str) -> None:
    """Before translating: a format without character references (all but HTML) written in the
    input's encoding must hold the simplified Chinese the model writes, or the translation would
    be lost at the end (Big5 and Shift_JIS hold 中文 but not 这们说). A PO or XLIFF file is
    written in UTF-8 with its header or declaration saying so, whatever it was read in.

    Raises:
        ValueError: it cannot.
    """
    if output_encoding == "input" and format in ("po", "xliff"):
        if decoded.encoding.replace("-", "").lower() not in ("utf8", "utf8sig", "ascii"):
            raise ValueError(
                f"--output-encoding input: a translated {format} file is written in UTF-8 "
                f"(its header or declaration says so), not {_shown(decoded.encoding)}; "
                "leave --output-encoding at utf-8"
            )
        return
    if output_encoding == "input" and format != "html":
        try:
            "中文这们说，。".encode(decoded.encoding)
        except UnicodeEncodeError:
            raise ValueError(
                f"--output-encoding input: {_shown(decoded.encoding)} (the input's encoding) "
                f"cannot hold simplified Chinese, and {format} has no character references; "
                "write UTF-8 (--output-encoding utf-8)"
            ) from None


def declare_utf8(html: str) -> str:
    """``html`` with every encoding declaration in its head (up to ``</head>``, at least the
    first 1024 characters) naming UTF-8; only the labels change (``UTF-8`` for an upper-case
    label)."""
    head_end = _HEAD_END.search(html)
    head = html[: max(head_end.start() if head_end else 0, PRESCAN_BYTES)]
    for declaration in reversed(_declarations(head)):
        if _names_utf8(declaration.label):
            continue
        label = "UTF-8" if declaration.label.isupper() else "utf-8"
        html = html[: declaration.start] + label + html[declaration.end :]
    return html


# -- reading ----------------------------------------------------------------------------------


def _declared_or_found(data: bytes, format: str, source: str) -> Decoded:
    """Bytes with no byte-order mark and no encoding asked for: as declared, else found."""
    warnings: list[str] = []
    declared = _declaration(data, source, warnings) if format == "html" else None
    if declared is None:
        return replace(_found(data, source), warnings=(*warnings,))
    label, codec = declared
    if codec != "utf-8" and not data.isascii() and is_utf8(data):
        warnings.append(
            f"{source}: declares {label} but its bytes are UTF-8; read as UTF-8 "
            f"(--encoding {label} reads it as declared)"
        )
        return Decoded(data.decode("utf-8"), "utf-8", False, "utf-8", (*warnings,))
    try:
        return Decoded(_decode(data, codec), codec, False, "declaration", (*warnings,))
    except UnicodeDecodeError as error:
        found = _found(data, source)
        warnings.append(
            f"{source}:{_line_at(data, error.start, codec)}: not valid {label} as declared "
            f"({_bytes(error)}); read as {_shown(found.encoding)} ({found.found_by})"
        )
        return replace(found, warnings=(*warnings,))


def _declaration(data: bytes, source: str, warnings: list[str]) -> tuple[str, str] | None:
    """The label and codec of the first known declaration in the first 1024 bytes; None
    without one. An unknown label is passed over (warned), as a browser's prescan passes it."""
    head = data[:PRESCAN_BYTES].decode("latin-1")  # one character a byte: offsets are bytes
    for declaration in _declarations(head):
        try:
            codec = codec_name(declaration.label)
        except ValueError:
            warnings.append(f"{source}: declares an unknown encoding {declaration.label!r}")
            continue
        # A declaration read byte by byte is not in UTF-16: WHATWG reads it as UTF-8.
        return declaration.label, "utf-8" if codec.startswith(("utf-16", "utf-32")) else codec
    return None


def _found(data: bytes, source: str) -> Decoded:
    """Undeclared bytes: UTF-8 when they are valid UTF-8, else charset-normalizer's guess."""
    if is_utf8(data):
        return Decoded(data.decode("utf-8"), "utf-8", False, "utf-8")
    for codec in _detected_codecs(data):
        try:
            return Decoded(_decode(data, codec), codec, False, "detection")
        except UnicodeDecodeError:
            continue
    raise DataError.at(source, None, "not a text file (no text encoding fits its bytes)")


def _detected_codecs(data: bytes) -> list[str]:
    """charset-normalizer's encodings for ``data``, best first (``DETECTION_PREFERENCE``
    breaking ties); UTF-16/32 left out (without a byte-order mark they are refused)."""
    from charset_normalizer import from_bytes

    def rank(match) -> tuple:  # noqa: ANN001 (a charset_normalizer CharsetMatch)
        preferred = (*DETECTION_PREFERENCE, match.encoding).index(match.encoding)
        return round(match.chaos, 3), -round(match.coherence, 3), preferred

    # Asked for alone as well: the general pass drops an encoding that reads like one already
    # tried (cp1252 after cp1250), keeping the rarer one.
    matches = {}
    for match in [*from_bytes(data), *from_bytes(data, cp_isolation=[*DETECTION_PREFERENCE])]:
        if not match.encoding.startswith(("utf_16", "utf_32")):
            matches.setdefault(match.encoding, match)
    return [codec_name(match.encoding) for match in sorted(matches.values(), key=rank)]


def _refuse_binary(data: bytes, source: str, codec: str | None) -> None:
    """A one-line ``DataError`` for NUL bytes outside UTF-16/32 (fonts, images, archives)."""
    if b"\x00" in data and not (codec or "").startswith(("utf-16", "utf-32")):
        raise DataError.at(
            source,
            None,
            "not a text file (it holds NUL bytes, and neither a UTF-16 or UTF-32 byte-order "
            "mark nor such an encoding given)",
        )


def _decoded(data: bytes, codec: str, source: str, why: str) -> str:
    """``data`` decoded exactly, or a one-line ``DataError`` naming the line."""
    try:
        return _decode(data, codec)
    except UnicodeDecodeError as error:
        raise DataError.at(
            source,
            _line_at(data, error.start, codec),
            f"not valid {_shown(codec)}, {why} ({_bytes(error)})",
        ) from None


def _decode(data: bytes, codec: str) -> str:
    """Strictly, but for windows-1252's five unassigned bytes, which browsers read as the C1
    controls of the same numbers (Python's cp1252 refuses them)."""
    return data.decode(codec, errors=_CP1252_C1 if codec == "cp1252" else "strict")


def _c1_controls(error: UnicodeError) -> tuple[str, int]:
    if isinstance(error, UnicodeDecodeError) and all(
        0x80 <= byte <= 0x9F for byte in error.object[error.start : error.end]
    ):
        return error.object[error.start : error.end].decode("latin-1"), error.end
    raise error


codecs.register_error(_CP1252_C1, _c1_controls)


def _line_at(data: bytes, offset: int, codec: str) -> int:
    """The 1-based line of byte ``offset``."""
    return data[:offset].decode(codec, errors="replace").count("\n") + 1


def _bytes(error: UnicodeDecodeError) -> str:
    shown = error.object[error.start : min(error.end, error.start + 4)]
    return "byte " + " ".join(f"0x{byte:02x}" for byte in shown)


def _shown(codec: str) -> str:
    """A codec as users know it: ``cp1252`` -> ``windows-1252``."""
    return re.sub(r"^cp(125\d|874)$", r"windows-\1", codec)


# -- declarations -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Declaration:
    label: str
    start: int  # the label's span in the text searched
    end: int


def _names_utf8(label: str) -> bool:
    try:
        return codec_name(label) == "utf-8"
    except ValueError:
        return False


def _declarations(head: str) -> list[_Declaration]:
    """Every encoding declaration in ``head``, in order: the XML declaration's (at the very
    start), then each ``<meta>``'s outside comments."""
    found = []
    if xml := _XML_DECLARATION.match(head):
        found.append(_Declaration(xml["label"], xml.start("label"), xml.end("label")))
    for item in _HEAD_ITEM.finditer(head):
        if item["attributes"] is not None:
            declaration = _meta_declaration(item["attributes"], item.start("attributes"))
            found += [declaration] if declaration else []
    return found


def _meta_declaration(attributes: str, offset: int) -> _Declaration | None:
    """A ``<meta>``'s declaration: its ``charset``, else the charset of its ``content`` when
    ``http-equiv`` is ``Content-Type``; ``offset``: where ``attributes`` starts."""
    values: dict[str, tuple[str, int]] = {}  # name -> (value, where it starts); first wins
    for attribute in _ATTRIBUTE.finditer(attributes):
        group = next((g for g in ("dq", "sq", "uq") if attribute[g] is not None), None)
        value, start = (attribute[group], attribute.start(group)) if group else ("", 0)
        values.setdefault(attribute["name"].lower(), (value, offset + start))
    if "charset" in values:
        label, start = values["charset"]
        return _Declaration(label, start, start + len(label))
    equiv = values.get("http-equiv", ("", 0))[0].strip().lower()
    if equiv != "content-type" or "content" not in values:
        return None
    content, start = values["content"]
    charset = _CONTENT_CHARSET.search(content)
    if charset is None:
        return None
    group = next(g for g in ("dq", "sq", "uq") if charset[g] is not None)
    return _Declaration(charset[group], start + charset.start(group), start + charset.end(group))
