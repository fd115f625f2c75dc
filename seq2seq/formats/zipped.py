"""Zip containers (office documents, EPUB) read within limits and written back member for
member: the layer under the office formats (issue 57). Pure bytes: no model.

Reading refuses, in one line naming the file, what would make a translator unsafe or wrong: a
file that is not a zip or is truncated, an encrypted member, and a zip bomb (more members than
``MAX_MEMBERS``, more than ``MAX_TOTAL`` bytes once expanded, or a large member expanding more
than ``MAX_RATIO`` times its compressed size). The sizes the zip's directory declares are
checked before anything is read; as the directory can lie, the bytes are counted again as
members are expanded.

Only the members a format asks for (``Member.data``: its XML parts) are read into memory; the
others (images, fonts, media) are streamed from the input to the output a chunk at a time when
the file is written, so memory does not grow with them. Writing gives back every member in its
order, with its name, date, attributes and compression; a member not replaced comes back with
the same bytes.
"""

from __future__ import annotations

import copy
import io
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from seq2seq.errors import DataError

MAX_MEMBERS = 10_000
MAX_TOTAL = 512 * 1024 * 1024  # bytes expanded, all members together
MAX_RATIO = 200  # expanded / compressed, for a member over RATIO_FROM bytes
RATIO_FROM = 1024 * 1024
_CHUNK = 1024 * 1024


class Write(Protocol):
    """Writes a zipped document back given its parts rebuilt (``inline.rebuild``): as bytes,
    or into a seekable binary file (``into``; then None)."""

    def __call__(self, outputs: list[str], into: BinaryIO | None = None) -> bytes | None: ...


@dataclass
class Limits:
    """How far a zip may expand before it is refused as a bomb."""

    members: int = MAX_MEMBERS
    total: int = MAX_TOTAL
    ratio: int = MAX_RATIO
    ratio_from: int = RATIO_FROM


class _Archive:
    """An open input zip and the bytes expanded from it so far (each member counted once)."""

    def __init__(self, archive: zipfile.ZipFile, source: str, limits: Limits) -> None:
        self.archive, self.source, self.limits, self.expanded = archive, source, limits, 0

    def chunks(self, info: zipfile.ZipInfo) -> Iterator[bytes]:
        """One member's bytes a chunk at a time, refused as soon as they pass a limit."""
        size = 0
        try:
            with self.archive.open(info) as stream:
                while chunk := stream.read(_CHUNK):
                    size += len(chunk)
                    self.expanded += len(chunk)
                    self.check(info, size, self.expanded)
                    yield chunk
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as error:
            raise self.refused(f"corrupt zip member {info.filename} ({error})") from None

    def check(self, info: zipfile.ZipInfo, size: int, total: int) -> None:
        """Refuse the zip where ``info`` at ``size`` bytes, or all members at ``total``, pass a
        limit: declared by the directory before reading, or counted while expanding."""
        limits = self.limits
        if total > limits.total:
            raise self.refused(f"expands past {limits.total} bytes (a zip bomb?)")
        if size > limits.ratio_from and size / max(1, info.compress_size) > limits.ratio:
            raise self.refused(f"{info.filename} expands over {limits.ratio} times (a zip bomb?)")

    def refused(self, problem: str) -> DataError:
        return DataError.at(self.source, None, problem)


class Member:
    """One member of a zip: its ``info`` and its bytes (``data``), read from the input zip
    when first asked for, else streamed from it when written (``write_zip``)."""

    def __init__(
        self, info: zipfile.ZipInfo, data: bytes | None = None, archive: _Archive | None = None
    ) -> None:
        if data is None and archive is None:
            raise ValueError("a member needs its bytes or the archive that holds them")
        self.info, self._data, self._archive = info, data, archive

    @property
    def data(self) -> bytes:
        if self._data is None:
            self._data = b"".join(self._archive.chunks(self.info))  # type: ignore[union-attr]
        return self._data

    def chunks(self) -> Iterator[bytes]:
        """The bytes in chunks: those held, or streamed from the input zip (not kept)."""
        if self._data is not None:
            yield self._data
        else:
            yield from self._archive.chunks(self.info)  # type: ignore[union-attr]


def read_zip(data: bytes | BinaryIO, source: str, limits: Limits | None = None) -> list[Member]:
    """Every member of the zip ``data`` (its bytes, or a binary file open for reading, which
    must stay open until the zip is written back), in its order; their bytes are read when
    asked for.

    Raises:
        DataError: ``source: problem`` for a file that is not a zip, a corrupt or truncated
            one, an encrypted member, or one past the limits (a zip bomb).
    """
    limits = limits or Limits()
    try:
        archive = zipfile.ZipFile(io.BytesIO(data) if isinstance(data, bytes) else data)
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise DataError.at(source, None, f"not a zip file, or a truncated one ({error})") from None
    opened = _Archive(archive, source, limits)
    infos = archive.infolist()
    if len(infos) > limits.members:
        raise opened.refused(f"{len(infos)} zip members, over the limit of {limits.members}")
    declared = 0
    for info in infos:
        if info.flag_bits & 0x1:
            raise opened.refused(f"{info.filename} is encrypted (not read)")
        declared += info.file_size
        opened.check(info, info.file_size, declared)
    return [Member(info, archive=opened) for info in infos]


def write_zip(
    members: list[Member], replaced: dict[str, bytes] | None = None, into: BinaryIO | None = None
) -> bytes | None:
    """The zip of ``members`` in their order, ``replaced`` giving new bytes for some by name;
    each keeps its name, date, attributes and compression (a stored ``mimetype`` first in an
    EPUB or OpenDocument stays stored and first). Returned as bytes, or written into the
    seekable binary file ``into`` (then None), the members not replaced streamed through.

    Raises:
        DataError: a member streamed from the input zip is corrupt or past the limits (its
            directory lied): ``into`` then holds a partial zip, for the caller to discard.
    """
    replaced = replaced or {}
    out = into if into is not None else io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for member in members:
            # Writing sets a ZipInfo's sizes and offset: a copy, as the input's is still read.
            info = copy.copy(member.info)
            if info.filename in replaced:
                archive.writestr(info, replaced[info.filename], info.compress_type)
                continue
            with archive.open(info, "w") as target:  # info's compression, sizes set on close
                for chunk in member.chunks():
                    target.write(chunk)
    return None if into is not None else out.getvalue()
