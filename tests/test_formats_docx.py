"""Word documents (.docx): real files nobody here wrote (tests/data/office/, python-docx's test
files) read and written back by the identity and by a fake translator, checked by an
independent reader (ElementTree, not the scanner that wrote them): members, paragraphs,
tables, cells, hyperlinks, images and formatting runs kept; bad files refused in one line;
the CLI and /translate_file write a .docx Word's readers open."""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ElementTree
import zipfile
from pathlib import Path

import httpx
import pytest

from seq2seq.errors import DataError
from seq2seq.formats import format_of, read_zipped, segments
from seq2seq.formats.office import PARTS, read_docx
from tests.fake_translation import identity, translate, upper
from tests.helpers import cli_translate
from tests.office import assert_same_members, cli_refusal, members

OFFICE = Path(__file__).parent / "data" / "office"
DOCX = sorted(OFFICE.glob("*.docx"))
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
SPACES = re.compile(r"\s+")


def paragraphs(xml: bytes) -> list[list[tuple[str, str]]]:
    """Each paragraph as its runs' (formatting, text), read by ElementTree; the formatting is
    the run's properties without proofing language and marks (not formatting)."""
    root = ElementTree.fromstring(xml)
    found = []
    for paragraph in root.iter(f"{W}p"):
        runs = []
        for run in paragraph.iter(f"{W}r"):
            props = run.find(f"{W}rPr")
            shown = []
            for prop in [] if props is None else list(props):
                if prop.tag not in (f"{W}lang", f"{W}noProof"):
                    shown.append(prop.tag + repr(sorted(prop.attrib.items())))
            text = "".join(t.text or "" for t in run.findall(f"{W}t"))
            runs.append(("".join(shown), text))
        found.append(runs)
    return found


def chars(xml: bytes) -> list[list[tuple[str, str]]]:
    """Each paragraph's visible characters with their run's formatting (white space aside:
    sentences are joined without a space, as Chinese writes them)."""
    return [
        [(shown, c) for shown, text in runs for c in text if not c.isspace()]
        for runs in paragraphs(xml)
    ]


def rewrite(data: bytes, change) -> bytes:
    documents, write = read_docx(data, "in.docx")
    return write(translate(documents, change))


@pytest.mark.parametrize("path", DOCX, ids=lambda p: p.name)
def test_identity_gives_back_every_member_and_every_run(path):
    data = path.read_bytes()
    before, after = members(data), members(rewrite(data, identity))
    assert PARTS.fullmatch("word/document.xml")
    # the same paragraphs, each character in a run formatted as before; styles, rels, media:
    # byte for byte
    assert_same_members(before, after, PARTS.fullmatch, chars)
    with zipfile.ZipFile(io.BytesIO(rewrite(data, identity))) as archive:
        assert archive.testzip() is None


def count(xml: bytes, tag: str) -> int:
    return sum(1 for _ in ElementTree.fromstring(xml).iter(f"{W}{tag}"))


@pytest.mark.parametrize("path", DOCX, ids=lambda p: p.name)
def test_every_paragraph_is_translated_and_the_structure_kept(path):
    data = path.read_bytes()
    before, after = members(data), members(rewrite(data, upper))
    for name in (n for n in before if PARTS.fullmatch(n)):
        for tag in ("p", "tbl", "tc", "hyperlink", "drawing", "bookmarkStart", "tab", "br"):
            assert count(after[name], tag) == count(before[name], tag), (name, tag)
        old, new = chars(before[name]), chars(after[name])
        for source, output in zip(old, new, strict=True):
            text = "".join(c for _, c in source)
            if "://" not in text:  # a URL is kept as written (verbatim)
                assert "".join(c for _, c in output) == text.upper()
            assert [s for s, _ in output] == [s for s, _ in source]  # formatting where it was
    for name in before:  # hyperlink targets, images, styles
        if name.endswith(".rels") or name.startswith("word/media/") or name == "word/styles.xml":
            assert after[name] == before[name]


def docx(body: str) -> bytes:
    """A minimal Word document around ``body`` (the paragraphs of word/document.xml)."""
    document = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
        'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
        f"<w:body>{body}</w:body></w:document>"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", document)
    return out.getvalue()


BOLD = (
    '<w:p><w:pPr><w:jc w:val="center"/></w:pPr>'
    '<w:r w:rsidR="001"><w:t xml:space="preserve">I like </w:t></w:r>'
    "<w:r><w:rPr><w:b/></w:rPr><w:t>green</w:t></w:r>"
    '<w:proofErr w:type="spellStart"/>'
    '<w:r w:rsidR="002"><w:t xml:space="preserve"> te</w:t></w:r>'
    '<w:r w:rsidR="003"><w:t>a.</w:t></w:r><w:proofErr w:type="spellEnd"/></w:p>'
)


@pytest.mark.parametrize("path", DOCX[:3], ids=lambda p: p.name)
def test_a_file_read_open_and_written_into_a_file_is_the_same_as_from_bytes(path, tmp_path):
    """The Python API's streamed path (an open file in, ``write(..., into=file)`` out) writes
    the bytes the in-memory path returns."""
    documents, write = read_zipped(path.read_bytes(), "docx", path.name)
    expected = write(translate(documents, upper))
    with open(path, "rb") as source, open(tmp_path / "out.docx", "wb") as target:
        documents, write = read_zipped(source, "docx", path.name)
        assert write(translate(documents, upper), into=target) is None
    assert (tmp_path / "out.docx").read_bytes() == expected != path.read_bytes()


def test_a_bold_word_stays_bold_and_split_runs_read_as_one_sentence():
    documents, write = read_docx(docx(BOLD), "bold.docx")
    [segment] = segments(documents[0])
    assert segment.text == "I like green tea."  # runs split by rsid and spell-check: one text
    xml = members(write(translate(documents, upper)))["word/document.xml"]
    [runs] = paragraphs(xml)
    assert [(s, t) for s, t in runs if t] == [
        ("", "I LIKE "),
        (f"{W}b[]", "GREEN"),
        ("", " TEA."),
    ]
    assert b'<w:pPr><w:jc w:val="center"/></w:pPr>' in xml  # paragraph properties as written
    assert b'<w:t xml:space="preserve">I LIKE </w:t>' in xml and b"<w:t>GREEN</w:t>" in xml


def test_fields_and_breaks_are_kept_as_written():
    field = (
        '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> PAGE </w:instrText>'
        '</w:r><w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>7</w:t></w:r>'
        '<w:r><w:fldChar w:fldCharType="end"/></w:r>'
    )
    body = f"<w:p><w:r><w:t>Page</w:t></w:r>{field}<w:r><w:br/><w:t>Next line.</w:t></w:r></w:p>"
    documents, write = read_docx(docx(body), "field.docx")
    [segment] = segments(documents[0])
    assert segment.text == "Page\nNext line."  # the field's result is not read as text
    xml = members(write(translate(documents, upper)))["word/document.xml"].decode()
    assert field in xml and "<w:br/>" in xml and "NEXT LINE." in xml


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"PK\x03\x04 not really", "not a Word document (not a zip file"),
        (b"Hello, world.", "not a Word document (not a zip file"),
        (b"", "not a Word document"),
    ],
)
def test_what_is_not_a_zip_is_refused_in_one_line(data, problem):
    with pytest.raises(DataError) as error:
        read_docx(data, "x.docx")
    assert str(error.value).startswith("x.docx: ") and problem in str(error.value)
    assert "\n" not in str(error.value)


def test_a_zip_without_a_document_and_xml_with_entities_are_refused():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("content.xml", "<office/>")  # an OpenDocument file, renamed
    with pytest.raises(DataError, match=r"^x\.docx: not a Word document \(no word/document"):
        read_docx(out.getvalue(), "x.docx")
    parts = members(docx("<w:p/>"))
    parts["word/document.xml"] = (
        b'<?xml version="1.0"?><!DOCTYPE w [<!ENTITY a "aaaa">]><w:document>&a;</w:document>'
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, body in parts.items():
            archive.writestr(name, body)
    with pytest.raises(DataError, match=r"x\.docx:word/document\.xml:1: XML declares an entity"):
        read_docx(out.getvalue(), "x.docx")


def test_the_format_comes_from_the_extension_and_is_read_as_bytes():
    assert format_of("Report.DOCX") == "docx"
    documents, _ = read_zipped((OFFICE / "python-docx--fnt-color.docx").read_bytes(), "docx")
    assert [s.text for s in segments(documents[0])][0].startswith("Text with no color")
    with pytest.raises(ValueError, match="bytes, not text"):
        from seq2seq.formats import parse

        parse("PK", "docx")


def test_the_cli_writes_a_docx_with_every_paragraph(translation_checkpoint, tmp_path, capsys):
    source, out = OFFICE / "python-docx--tbl-having-applied-style.docx", tmp_path / "out.docx"
    assert cli_translate(translation_checkpoint, source, out) == 0
    before, after = members(source.read_bytes()), members(out.read_bytes())
    assert count(after["word/document.xml"], "p") == count(before["word/document.xml"], "p")
    assert count(after["word/document.xml"], "tc") == count(before["word/document.xml"], "tc")
    assert "not a Word document" in cli_refusal(translation_checkpoint, tmp_path, ".docx", capsys)
    assert (
        cli_translate(translation_checkpoint, source, tmp_path / "x.docx", "--encoding", "latin-1")
        != 0
    )
    assert "--encoding takes a text document, not --format docx" in capsys.readouterr().err


def test_a_corrupt_image_found_while_writing_leaves_the_output_as_it_was(
    translation_checkpoint, tmp_path, capsys
):
    """An image is streamed from the input as the file is written; a corrupt one is found
    then, and the output already there is left as it was, with no temporary file beside it."""
    path = tmp_path / "in.docx"
    with zipfile.ZipFile(OFFICE / "python-docx--fnt-color.docx") as source:
        with zipfile.ZipFile(path, "w") as target:
            for info in source.infolist():
                target.writestr(info, source.read(info))
            target.writestr("word/media/x.bin", b"\1" * 4096, zipfile.ZIP_STORED)
    data = bytearray(path.read_bytes())
    start = data.index(b"\1" * 4096)
    data[start : start + 8] = b"\2" * 8  # its CRC no longer holds
    path.write_bytes(bytes(data))
    out = tmp_path / "out.docx"
    out.write_bytes(b"before")
    assert cli_translate(translation_checkpoint, path, out) != 0
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "corrupt zip member word/media/x.bin" in err and str(path) in err
    assert out.read_bytes() == b"before" and sorted(tmp_path.iterdir()) == [path, out]


@pytest.mark.slow
@pytest.mark.serial
def test_translate_file_answers_a_docx(http):
    pytest.importorskip("fastapi")
    source = (OFFICE / "python-docx--run-char-style.docx").read_bytes()
    upload = {"file": ("run.docx", source, "application/octet-stream")}
    answer = http.post("/translate_file", data={"source": "en", "target": "zh"}, files=upload)
    assert answer.status_code == 200, answer.text
    fetched = httpx.get(answer.json()["translatedFileUrl"], timeout=60)
    assert fetched.headers["content-type"].startswith("application/vnd.openxmlformats")
    after = members(fetched.content)
    assert list(after) == list(members(source))
    assert count(after["word/document.xml"], "p") == count(
        members(source)["word/document.xml"], "p"
    )
    bad = {"file": ("bad.docx", b"Hello.", "application/octet-stream")}
    answer = http.post("/translate_file", data={"source": "en", "target": "zh"}, files=bad)
    assert answer.status_code == 400 and "not a Word document" in answer.json()["error"]
