"""Zipped packages of XML parts (Excel workbooks, OpenDocument files, EPUB books) read for the
formats that translate them: the zip within ``zipped``'s limits, refused in one line naming
the kind of file, and a part as checked UTF-8 XML (``xml_scan.check``: no entity expanded).
Pure bytes: no model."""

from __future__ import annotations

from seq2seq.errors import DataError
from seq2seq.formats.xml_scan import check
from seq2seq.formats.zipped import Member, read_zip


def open_package(data: bytes, source: str, kind: str) -> list[Member]:
    """The members of the zip ``data``, a ``kind`` of file ("an Excel workbook").

    Raises:
        DataError: ``source: not KIND (problem)``: not a zip, a truncated, corrupt or
            encrypted one, or one past the limits (a zip bomb).
    """
    try:
        return read_zip(data, source)
    except DataError as error:
        message = str(error)
        problem = message[len(source) + 2 :] if message.startswith(f"{source}: ") else message
        raise DataError(f"{source}: not {kind} ({problem})") from None


def member(members: list[Member], name: str) -> Member | None:
    """The member called ``name`` (None: the zip has none)."""
    return next((m for m in members if m.info.filename == name), None)


def xml_text(part: Member, source: str) -> str:
    """A part's XML as text, once checked to be well formed and to declare no entity.

    Raises:
        DataError: ``source:member:line: problem``: XML that does not parse or declares
            entities, or that is not UTF-8.
    """
    check(part.data, f"{source}:{part.info.filename}")
    return decoded(part, source)


def decoded(part: Member, source: str) -> str:
    """A part's bytes as UTF-8 text (a byte-order mark kept as its first character).

    Raises:
        DataError: ``source:member: not UTF-8 (...)``.
    """
    try:
        return part.data.decode("utf-8")
    except UnicodeDecodeError:
        where = f"{source}:{part.info.filename}"
        raise DataError(f"{where}: not UTF-8 (the only encoding read in a package)") from None
