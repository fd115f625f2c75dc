"""``scripts/bench.py documents-office``: its counts on the real files of tests/data/office
against themselves (nothing lost, every unit left untranslated) and on outputs changed by
hand (a link, an image, a placeholder, a catalog msgfmt refuses), each a known count."""

from __future__ import annotations

import importlib
import zipfile
from pathlib import Path

import pytest

for _reader in ("docx", "pptx", "polib"):  # the bench extra's readers
    pytest.importorskip(_reader)
ROOT = Path(__file__).resolve().parents[1]
OFFICE = ROOT / "tests" / "data" / "office"
bench = importlib.import_module("benchmarks.documents_office")
readers = importlib.import_module("benchmarks.documents_office_readers")
RAN = {"returncode": 0, "seconds": 1.0, "error": ""}


@pytest.mark.parametrize("path", bench.documents(OFFICE), ids=lambda p: p.name)
def test_a_file_against_itself_loses_nothing_and_translates_nothing(path):
    row = bench.compare_one(path, path, RAN)
    assert row.returncode == 0, row.error
    assert row.units_in == row.units_out
    assert row.counts_changed == [] and row.members_changed == []
    assert (row.links_lost, row.links_added, row.styles_changed, row.runs_changed) == (0,) * 4
    assert row.formats_lost == 0
    if row.kind not in ("po", "xliff"):  # a catalog's sources are compared with its targets
        assert row.untranslated == row.translatable


def test_every_format_has_real_files_with_text():
    rows = [bench.compare_one(p, p, RAN) for p in bench.documents(OFFICE)]
    kinds = {row.kind for row in rows if row.translatable}
    assert kinds == set(readers.READERS)
    assert len(rows) >= 25


def _rewritten(source: Path, target: Path, change) -> None:
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for info in old.infolist():
            new.writestr(info, change(info.filename, old.read(info)))


def test_a_bold_word_come_back_plain_is_a_format_lost(tmp_path):
    import docx

    document = docx.Document()
    paragraph = document.add_paragraph("I like ")
    paragraph.add_run("green").bold = True
    paragraph.add_run(" tea.")
    document.add_paragraph("Plain.")
    source, output = tmp_path / "in.docx", tmp_path / "out.docx"
    document.save(source)

    def change(name: str, data: bytes) -> bytes:  # the same runs, the bold one made plain
        return data.replace(b"<w:b/>", b"") if name == "word/document.xml" else data

    _rewritten(source, output, change)
    row = bench.compare_one(source, output, RAN)
    assert (row.formats_lost, row.runs_changed) == (1, 0)
    assert bench.compare_one(source, source, RAN).formats_lost == 0


def test_a_lost_link_and_a_changed_image_are_counted(tmp_path):
    source = OFFICE / "python-docx--par-hlink-frags.docx"
    output = tmp_path / source.name

    def change(name: str, data: bytes) -> bytes:
        if name == "word/_rels/document.xml.rels":
            return data.replace(b"https://foo.com?q=bar#baz", b"https://elsewhere.example")
        return data + b"\0" if name == "docProps/thumbnail.jpeg" else data

    _rewritten(source, output, change)
    row = bench.compare_one(source, output, RAN)
    assert (row.links_lost, row.links_added) == (1, 1)
    has_thumbnail = "docProps/thumbnail.jpeg" in zipfile.ZipFile(source).namelist()
    assert row.members_changed == (["docProps/thumbnail.jpeg"] if has_thumbnail else [])


def test_po_placeholders_lost_and_msgfmt_refusals_are_counted(tmp_path):
    source = tmp_path / "in.po"
    header = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
    entry = '#, python-format\nmsgid "Hello %(name)s, {count} new"\n'
    source.write_text(header + 'msgid "Hello %(name)s, {count} new"\nmsgstr ""\n')
    output = tmp_path / "out.po"
    output.write_text(header + entry + 'msgstr "你好 {count}"\n')
    row = bench.compare_one(source, output, RAN)
    assert (row.placeholders, row.placeholders_lost) == (2, 1)
    assert (row.translatable, row.untranslated) == (1, 0)
    assert row.check.startswith("msgfmt -c:")  # msgfmt -c refuses the lost %(name)s too
    output.write_text(header + entry + 'msgstr "%(name)s {count}"\n')
    assert bench.compare_one(source, output, RAN).check == "msgfmt -c ok"


def test_the_table_has_a_row_per_file_totals_and_failures(tmp_path):
    path = OFFICE / "symfony--resources.xlf"
    failed = RAN | {"returncode": 1, "error": "boom"}
    rows = [bench.compare_one(path, path, RAN), bench.compare_one(path, path, failed)]
    text = bench.table(rows)
    assert text.count("\n| symfony--resources.xlf |") == 2
    assert "**total (2 files)**" in text and "1 failed" in text
    assert "- `symfony--resources.xlf`: exit 1: boom" in text


def test_a_changed_number_on_a_second_sheet_is_counted_once(tmp_path):
    import openpyxl

    source = OFFICE / "markitdown--test.xlsx"
    book = openpyxl.load_workbook(source)
    sheet = book.worksheets[1]
    cell = next(c for row in sheet.iter_rows() for c in row if isinstance(c.value, int | float))
    cell.value += 1  # the same coordinate on the first sheet keeps its value
    book.save(tmp_path / source.name)
    row = bench.compare_one(source, tmp_path / source.name, RAN)
    assert row.check == "1 / 106 other cells changed"
