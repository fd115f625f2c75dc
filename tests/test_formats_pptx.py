"""PowerPoint presentations (.pptx): real files nobody here wrote (tests/data/office/,
python-pptx's test files) read and written back by the identity and by a fake translator,
checked by ElementTree: members, paragraphs, tables, cells, breaks, hyperlinks and each
character's run formatting kept, slides and speaker notes translated; bad files refused in
one line; the CLI writes a .pptx."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from seq2seq.errors import DataError
from seq2seq.formats import format_of, read_zipped, segments
from seq2seq.formats.office import SLIDES
from tests.fake_translation import identity, translate, upper
from tests.helpers import cli_translate
from tests.office import assert_same_members, members

OFFICE = Path(__file__).parent / "data" / "office"
PPTX = sorted(OFFICE.glob("*.pptx"))
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
NOT_SHOWN = {"lang", "altLang", "dirty", "err", "noProof", "smtClean", "smtId"}


def chars(xml: bytes) -> list[list[tuple[str, str]]]:
    """Each paragraph's visible characters with their run's formatting (the run properties
    but proofing language and marks; white space aside: Chinese joins sentences without)."""
    found = []
    for paragraph in ElementTree.fromstring(xml).iter(f"{A}p"):
        row = []
        for run in paragraph.iter(f"{A}r"):
            props = run.find(f"{A}rPr")
            shown = ""
            if props is not None:
                shown = repr(sorted((k, v) for k, v in props.attrib.items() if k not in NOT_SHOWN))
                shown += "".join(ElementTree.tostring(child).decode() for child in props)
            text = "".join(t.text or "" for t in run.findall(f"{A}t"))
            row += [(shown if shown != "[]" else "", c) for c in text if not c.isspace()]
        found.append(row)
    return found


def count(xml: bytes, tag: str) -> int:
    return sum(1 for _ in ElementTree.fromstring(xml).iter(f"{A}{tag}"))


def rewrite(data: bytes, change) -> bytes:
    documents, write = read_zipped(data, "pptx", "in.pptx")
    return write(translate(documents, change))


@pytest.mark.parametrize("path", PPTX, ids=lambda p: p.name)
def test_identity_gives_back_every_member_and_every_run(path):
    data = path.read_bytes()
    # slides: every character in a run formatted as before; masters, layouts, rels, media:
    # byte for byte
    before, after = members(data), members(rewrite(data, identity))
    assert_same_members(before, after, SLIDES.fullmatch, chars)


@pytest.mark.parametrize("path", PPTX, ids=lambda p: p.name)
def test_every_paragraph_is_translated_and_the_structure_kept(path):
    data = path.read_bytes()
    before, after = members(data), members(rewrite(data, upper))
    slides = [name for name in before if SLIDES.fullmatch(name)]
    assert slides
    for name in slides:
        for tag in ("p", "tbl", "tc", "br", "hlinkClick", "fld"):
            assert count(after[name], tag) == count(before[name], tag), (name, tag)
        for source, output in zip(chars(before[name]), chars(after[name]), strict=True):
            text = "".join(c for _, c in source)
            shown = "".join(c for _, c in output)
            # verbatim spans (yahoo.com, 42pt, GitHub) are kept as written
            assert shown.upper() == text.upper() and sum(c.isupper() for c in shown) >= sum(
                c.isupper() for c in text
            )
            assert [s for s, _ in output] == [s for s, _ in source]


def test_speaker_notes_are_translated():
    data = (OFFICE / "python-pptx--sld-notes.pptx").read_bytes()
    documents, _ = read_zipped(data, "pptx", "notes.pptx")
    names = [n for n in members(data) if SLIDES.fullmatch(n)]
    assert any("notesSlide" in n for n in names)
    assert sum(len(segments(d)) for d in documents) > 0


# Not a presentation (a file of tests/data/office, or None: b"Hello."), and what is said.
REFUSED = {
    "not-a-zip": (None, r"^x\.pptx: not a PowerPoint presentation \(not a zip"),
    "a-word-document": ("python-docx--fnt-color.docx", r"no ppt/presentation\.xml in the zip"),
}


@pytest.mark.parametrize("name, message", REFUSED.values(), ids=REFUSED)
def test_what_is_not_a_presentation_is_refused_in_one_line(name, message):
    data = (OFFICE / name).read_bytes() if name else b"Hello."
    with pytest.raises(DataError, match=message):
        read_zipped(data, "pptx", "x.pptx")


def test_the_extension_names_the_format_in_any_case():
    assert format_of("deck.PPTX") == format_of("deck.pptx") == "pptx"


def test_the_cli_writes_a_pptx(translation_checkpoint, tmp_path):
    source, out = OFFICE / "python-pptx--tbl-cell.pptx", tmp_path / "out.pptx"
    assert cli_translate(translation_checkpoint, source, out) == 0
    before, after = members(source.read_bytes()), members(out.read_bytes())
    assert list(after) == list(before)
    for name in (n for n in before if SLIDES.fullmatch(n)):
        assert count(after[name], "p") == count(before[name], "p")
        assert count(after[name], "tc") == count(before[name], "tc")
