"""Excel workbooks (.xlsx): real files nobody here wrote (tests/data/office/: XlsxWriter's
Excel-made comparison files, pyexcel-xlsx's and markitdown's test files) read and written back
by the identity and by a fake translator, checked by an independent reader (openpyxl, and
ElementTree where it is absent): sheets, cells, formulas, numbers, dates, booleans, styles,
merged cells, hyperlinks and rich-text runs kept, strings and comments translated; bad files
refused in one line; the CLI writes an .xlsx."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ElementTree
import zipfile
from pathlib import Path

import pytest

from seq2seq.errors import DataError
from seq2seq.formats import format_of, read_zipped, segments
from seq2seq.formats.spreadsheet import string_element
from tests.fake_translation import identity, translate, upper
from tests.helpers import cli_translate
from tests.office import assert_same_members, members

OFFICE = Path(__file__).parent / "data" / "office"
XLSX = sorted(OFFICE.glob("*.xlsx"))
S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"


def rewrite(data: bytes, change) -> bytes:
    documents, write = read_zipped(data, "xlsx", "in.xlsx")
    return write(translate(documents, change))


def strings(xml: bytes) -> list[list[tuple[str, str]]]:
    """Each string (shared, inline or comment) as its characters with their run's formatting,
    read by ElementTree (white space aside: Chinese joins sentences without)."""
    found = []
    for string in ElementTree.fromstring(xml).iter():
        if string.tag not in (f"{S}si", f"{S}is", f"{S}text"):
            continue
        row = [("", c) for t in string.findall(f"{S}t") for c in (t.text or "")]
        for run in string.findall(f"{S}r"):
            props = run.find(f"{S}rPr")
            shown = "" if props is None else ElementTree.tostring(props).decode()
            row += [(shown, c) for t in run.findall(f"{S}t") for c in (t.text or "")]
        found.append([(shown, c) for shown, c in row if not c.isspace()])
    return found


def cells(data: bytes) -> dict[tuple[str, str], tuple]:
    """Every cell of every sheet, read by openpyxl: (sheet, coordinate) -> (value, type,
    style, number format, hyperlink target, comment text)."""
    openpyxl = pytest.importorskip("openpyxl")
    workbook = openpyxl.load_workbook(io.BytesIO(data))
    found = {}
    for sheet in workbook:
        for row in sheet.iter_rows():
            for cell in row:
                link = cell.hyperlink.target if cell.hyperlink else None
                note = cell.comment.text if cell.comment else None
                found[sheet.title, cell.coordinate] = (
                    cell.value,
                    cell.data_type,
                    cell.style_id,
                    cell.number_format,
                    link,
                    note,
                )
    return found


def sheets(data: bytes) -> list[tuple[str, str, list[str]]]:
    openpyxl = pytest.importorskip("openpyxl")
    workbook = openpyxl.load_workbook(io.BytesIO(data))
    return [(s.title, s.dimensions, sorted(map(str, s.merged_cells.ranges))) for s in workbook]


@pytest.mark.parametrize("path", XLSX, ids=lambda p: p.name)
def test_identity_gives_back_every_member(path):
    data = path.read_bytes()
    # the strings' elements: the same strings; the workbook (sheet names), styles, drawings,
    # formulas' chains: as they were
    before, after = members(data), members(rewrite(data, identity))
    assert_same_members(before, after, string_element, strings)


@pytest.mark.parametrize("path", XLSX, ids=lambda p: p.name)
def test_strings_are_translated_and_nothing_else(path):
    data = path.read_bytes()
    before, after = members(data), members(rewrite(data, upper))
    for name in (n for n in before if string_element(n)):
        for source, output in zip(strings(before[name]), strings(after[name]), strict=True):
            text, shown = "".join(c for _, c in source), "".join(c for _, c in output)
            # verbatim spans (URLs, numbers, _x0000_ escapes) are kept as written
            assert shown.upper() == text.upper()
            assert sum(c.isupper() for c in shown) >= sum(c.isupper() for c in text)
            assert [s for s, _ in output] == [s for s, _ in source]  # each run's formatting
    assert sheets(rewrite(data, upper)) == sheets(data)  # names, dimensions, merged cells


@pytest.mark.parametrize("path", XLSX, ids=lambda p: p.name)
def test_an_independent_reader_sees_only_string_cells_changed(path):
    data = path.read_bytes()
    before, after = cells(data), cells(rewrite(data, upper))
    assert list(after) == list(before)
    for key, (value, kind, *kept) in before.items():
        new_value, new_kind, *new_kept = after[key]
        assert new_kind == kind and new_kept[:3] == kept[:3], key  # style, format, link
        if kind == "s" and isinstance(value, str):
            assert new_value.upper() == value.upper(), key
        else:  # numbers, dates, booleans, errors, formulas (their text starts "=")
            assert new_value == value, key
        if kept[3] is not None:
            assert new_kept[3].upper() == kept[3].upper(), key  # comments translated


def test_shared_strings_rich_runs_and_formulas():
    data = (OFFICE / "xlsxwriter--rich_string07.xlsx").read_bytes()
    documents, _ = read_zipped(data, "xlsx", "rich.xlsx")
    [shared] = [segments(d) for d in documents if segments(d)]
    assert [s.text for s in shared] == ["Foo", "Bar", "abcdefg", "abcdefg", "abcdefg", "abcdefg"]
    assert [len(s.markup) for s in shared] == [0, 0, 2, 2, 2, 1]  # bold, italic, plain runs
    formulas = (OFFICE / "xlsxwriter--formula_results01.xlsx").read_bytes()
    documents, _ = read_zipped(formulas, "xlsx", "f.xlsx")
    assert not any(segments(d) for d in documents)  # t="str" results of formulas: never
    inline = (OFFICE / "xlsxwriter--optimize06.xlsx").read_bytes()
    documents, _ = read_zipped(inline, "xlsx", "i.xlsx")
    assert sum(len(segments(d)) for d in documents) == 124  # inline strings with text


def test_what_is_not_a_workbook_is_refused_in_one_line():
    with pytest.raises(DataError, match=r"^x\.xlsx: not an Excel workbook \(not a zip"):
        read_zipped(b"Hello.", "xlsx", "x.xlsx")
    data = (OFFICE / "xlsxwriter--merge_range01.xlsx").read_bytes()
    with pytest.raises(DataError, match=r"^x\.xlsx: not an Excel workbook \(not a zip"):
        read_zipped(data[: len(data) // 2], "xlsx", "x.xlsx")  # truncated
    word = (OFFICE / "python-docx--fnt-color.docx").read_bytes()
    with pytest.raises(DataError, match=r"no xl/workbook\.xml in the zip"):
        read_zipped(word, "xlsx", "x.xlsx")
    parts = members(data)
    parts["xl/sharedStrings.xml"] = b'<!DOCTYPE s [<!ENTITY a "aaaa">]><sst>&a;</sst>'
    with pytest.raises(DataError, match=r"^x\.xlsx:xl/sharedStrings\.xml:1: XML declares"):
        read_zipped(_zip(parts), "xlsx", "x.xlsx")
    parts["xl/sharedStrings.xml"] = b"\0" * 3_000_000  # a zip bomb
    with pytest.raises(DataError, match=r"^x\.xlsx: not an Excel workbook \(.*expands over"):
        read_zipped(_zip(parts), "xlsx", "x.xlsx")
    assert format_of("Budget.XLSX") == "xlsx"


def _zip(parts: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, body in parts.items():
            archive.writestr(name, body)
    return out.getvalue()


def test_the_cli_writes_an_xlsx(translation_checkpoint, tmp_path):
    source, out = OFFICE / "markitdown--test.xlsx", tmp_path / "out.xlsx"
    assert cli_translate(translation_checkpoint, source, out) == 0
    assert sheets(out.read_bytes()) == sheets(source.read_bytes())
    before, after = cells(source.read_bytes()), cells(out.read_bytes())
    assert list(after) == list(before)
    numbers = [k for k, v in before.items() if v[1] == "n"]
    assert numbers and all(after[k] == before[k] for k in numbers)
