"""Shared by the tests of the zipped formats (Word, PowerPoint, Excel, OpenDocument, EPUB):
a zip's members, what an identity translation must give back, and the CLI's refusal of a file
that is not one."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.helpers import cli_translate


def members(data: bytes) -> dict[str, bytes]:
    """A zip's members by name, in the zip's order."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


def entries(data: bytes) -> list[tuple[str, int, bytes]]:
    """A zip's members with their compression, in order (ODF and EPUB: ``mimetype`` first,
    stored)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return [(i.filename, i.compress_type, archive.read(i)) for i in archive.infolist()]


def assert_same_members(
    before: dict[str, bytes],
    after: dict[str, bytes],
    translated: Callable[[str], Any],
    text: Callable[[bytes], Any],
) -> None:
    """Every member back in order: those ``translated`` names with the same ``text`` (an
    identity translation may rewrite their XML), every other one byte for byte."""
    assert list(after) == list(before)
    for name in before:
        if translated(name):
            assert text(after[name]) == text(before[name]), name
        else:
            assert after[name] == before[name], name


def cli_refusal(checkpoint: Path, tmp_path: Path, suffix: str, capsys) -> str:  # noqa: ANN001
    """``seq2seq translate`` of a text file named ``bad.SUFFIX``: it fails, writes nothing,
    and says why in one line, which is returned."""
    capsys.readouterr()
    bad, out = tmp_path / f"bad{suffix}", tmp_path / f"no{suffix}"
    bad.write_text("Hello.", encoding="utf-8")
    assert cli_translate(checkpoint, bad, out) != 0
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and not out.exists()  # one line, nothing written
    return err
