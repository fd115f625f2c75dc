"""Zip containers: read within limits (zip bombs, corrupt and encrypted files refused in one
line) and written back member for member (tests/data/office/README: real documents)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from seq2seq.errors import DataError
from seq2seq.formats.zipped import Limits, read_zip, write_zip

DOCX = Path(__file__).parent / "data" / "office" / "python-docx--par-hlink-frags.docx"


def zipped(*members: tuple[str, bytes], method=zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return out.getvalue()


def test_round_trip_keeps_every_member_and_its_order():
    members = read_zip(DOCX.read_bytes(), "a.docx")
    again = read_zip(write_zip(members), "b.docx")
    assert [m.info.filename for m in again] == [m.info.filename for m in members]
    assert [m.data for m in again] == [m.data for m in members]
    assert [m.info.compress_type for m in again] == [m.info.compress_type for m in members]


def test_a_stored_mimetype_stays_first_and_stored():
    epub = zipped(("mimetype", b"application/epub+zip"), method=zipfile.ZIP_STORED)
    members = read_zip(epub, "a.epub")
    [again] = read_zip(write_zip(members), "b.epub")
    assert again.info.filename == "mimetype" and again.info.compress_type == zipfile.ZIP_STORED


def test_a_replaced_member_alone_changes():
    members = read_zip(zipped(("a.xml", b"<a/>"), ("b.xml", b"<b/>")), "x.docx")
    again = read_zip(write_zip(members, {"b.xml": b"<c/>"}), "y.docx")
    assert [(m.info.filename, m.data) for m in again] == [("a.xml", b"<a/>"), ("b.xml", b"<c/>")]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"Hello, not a zip at all", "not a zip file"),
        (zipped(("a.xml", b"<a/>" * 1000))[:-30], "not a zip file"),
    ],
    ids=["text", "truncated"],
)
def test_not_a_zip_is_one_line(data, problem):
    with pytest.raises(DataError, match=rf"^bad\.docx: {problem}") as raised:
        read_zip(data, "bad.docx")
    assert "\n" not in str(raised.value)


def test_corrupt_member_is_one_line_when_read_or_streamed():
    data = bytearray(zipped(("a.xml", b"<a>" + b"x" * 5000 + b"</a>")))
    data[40:60] = b"\xff" * 20  # inside the compressed stream
    with pytest.raises(DataError, match=r"^bad\.docx: corrupt zip member a\.xml"):
        _ = read_zip(bytes(data), "bad.docx")[0].data  # a part a format reads
    with pytest.raises(DataError, match=r"^bad\.docx: corrupt zip member a\.xml"):
        write_zip(read_zip(bytes(data), "bad.docx"), into=io.BytesIO())  # an image streamed


def test_members_not_asked_for_are_streamed_through_never_held(tmp_path):
    """Only the members read (``data``) are held; the others go from the input file to the
    output file a chunk at a time, and the zip written is the one written from bytes."""
    image = bytes(range(256)) * 8192  # 2 MiB, stored as an image is
    path = tmp_path / "a.docx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("word/document.xml", b"<w:document/>", zipfile.ZIP_DEFLATED)
        archive.writestr("word/media/image1.png", image, zipfile.ZIP_STORED)
    with open(path, "rb") as file:
        members = read_zip(file, "a.docx")
        assert members[0].data == b"<w:document/>"
        streamed = io.BytesIO()
        assert write_zip(members, {"word/document.xml": b"<w:d/>"}, into=streamed) is None
        assert members[1]._data is None  # never held
    whole = read_zip(path.read_bytes(), "a.docx")
    assert streamed.getvalue() == write_zip(whole, {"word/document.xml": b"<w:d/>"})
    again = read_zip(streamed.getvalue(), "b.docx")
    assert again[1].data == image and again[1].info.compress_type == zipfile.ZIP_STORED


def test_a_bomb_is_refused_by_its_declared_sizes_before_a_byte_is_expanded():
    """The directory's sizes are checked first: nothing is expanded (a corrupt stream behind
    them would be named instead)."""
    data = bytearray(zipped(("big.xml", b"\0" * 3_000_000)))
    data[40:60] = b"\xff" * 20
    with pytest.raises(DataError, match=r"^b\.docx: big\.xml expands over 200 times"):
        read_zip(bytes(data), "b.docx")


def test_zip_bombs_are_refused():
    bomb = zipped(("big.xml", b"\0" * 3_000_000))
    with pytest.raises(DataError, match=r"^b\.docx: big\.xml expands over 200 times"):
        read_zip(bomb, "b.docx")
    with pytest.raises(DataError, match=r"^b\.docx: expands past 1000 bytes"):
        read_zip(zipped(("a.xml", b"a" * 2000)), "b.docx", Limits(total=1000))
    many = zipped(*[(f"{i}.xml", b"") for i in range(20)])
    with pytest.raises(DataError, match=r"^b\.docx: 20 zip members, over the limit of 10$"):
        read_zip(many, "b.docx", Limits(members=10))


def test_encrypted_member_is_refused():
    data = bytearray(zipped(("a.xml", b"<a/>"), method=zipfile.ZIP_STORED))
    data[6] |= 1  # the local header's flag bits: encrypted
    central = data.rfind(b"PK\x01\x02")
    data[central + 8] |= 1  # and the central directory's
    with pytest.raises(DataError, match=r"^e\.docx: a\.xml is encrypted"):
        read_zip(bytes(data), "e.docx")
