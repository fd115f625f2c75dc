"""Zip containers (office documents, EPUB) read within limits and written back member for
member: the layer under the office formats (issue 57, in progress). Pure bytes: no model.

Reading refuses, in one line naming the file, what would make a translator unsafe or wrong: a
file that is not a zip or is truncated, an encrypted member, and a zip bomb (more members than
``MAX_MEMBERS``, more than ``MAX_TOTAL`` bytes once expanded, or a large member expanding more
than ``MAX_RATIO`` times its compressed size). Sizes are counted as members are read, not
taken from the directory, which can lie.

Writing gives back every member in its order, with its name, date, attributes and compression;
a member not replaced comes back with the same bytes.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from dataclasses import dataclass

from seq2seq.errors import DataError

MAX_MEMBERS = 10_000
MAX_TOTAL = 512 * 1024 * 1024  # bytes expanded, all members together
MAX_RATIO = 200  # expanded / compressed, for a member over RATIO_FROM bytes
RATIO_FROM = 1024 * 1024
_CHUNK = 1024 * 1024


@dataclass
class Member:
    info: zipfile.ZipInfo
    data: bytes


@dataclass
class Limits:
    members: int = MAX_MEMBERS
    total: int = MAX_TOTAL
    ratio: int = MAX_RATIO
    ratio_from: int = RATIO_FROM


def read_zip(data: bytes, source: str, limits: Limits | None = None) -> list[Member]:
    """Every member of the zip ``data``, in its order.

    Raises:
        DataError: ``source: problem`` for a file that is not a zip, a corrupt or truncated
            one, an encrypted member, or one past the limits (a zip bomb).
    """
    limits = limits or Limits()
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise DataError.at(source, None, f"not a zip file, or a truncated one ({error})") from None
    infos = archive.infolist()
    if len(infos) > limits.members:
        raise DataError.at(
            source, None, f"{len(infos)} zip members, over the limit of {limits.members}"
        )
    members, total = [], 0
    for info in infos:
        if info.flag_bits & 0x1:
            raise DataError.at(source, None, f"{info.filename} is encrypted (not read)")
        body = _expand(archive, info, source, limits, limits.total - total)
        total += len(body)
        members.append(Member(info, body))
    return members


def _expand(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, source: str, limits: Limits, room: int
) -> bytes:
    """One member's bytes, read a chunk at a time and refused as soon as it passes a limit."""
    chunks, size = [], 0
    try:
        with archive.open(info) as stream:
            while chunk := stream.read(_CHUNK):
                size += len(chunk)
                if size > room:
                    raise DataError.at(
                        source, None, f"expands past {limits.total} bytes (a zip bomb?)"
                    )
                ratio = size / max(1, info.compress_size)
                if size > limits.ratio_from and ratio > limits.ratio:
                    raise DataError.at(
                        source,
                        None,
                        f"{info.filename} expands over {limits.ratio} times (a zip bomb?)",
                    )
                chunks.append(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as error:
        raise DataError.at(source, None, f"corrupt zip member {info.filename} ({error})") from None
    return b"".join(chunks)


def write_zip(members: list[Member], replaced: dict[str, bytes] | None = None) -> bytes:
    """The zip of ``members`` in their order, ``replaced`` giving new bytes for some by name;
    each keeps its name, date, attributes and compression (a stored ``mimetype`` first in an
    EPUB or OpenDocument stays stored and first)."""
    replaced = replaced or {}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for member in members:
            info = member.info
            archive.writestr(info, replaced.get(info.filename, member.data), info.compress_type)
    return out.getvalue()
