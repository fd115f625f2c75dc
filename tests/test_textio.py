"""Text lines in and out (textio.py): one line per ``\\n``, whatever else a line holds."""

import io
import sys

import pytest

from seq2seq.errors import DataError
from seq2seq.textio import numbered_lines, one_line, read_lines, read_text, warn_lines, write_lines

# A BOM, Windows endings, characters that str.splitlines would split at (U+2028, U+2029, a form
# feed, NEL, a file separator) inside lines, a blank line, and no newline after the last line.
AWKWARD = (
    "\ufeffone\r\n"
    "two\u2028still two\u2029and two\r\n"
    "\n"
    "form\x0cfeed \x85 nel \x1c fs\n"
    "  \t \n"
    "last, no newline"
).encode()
EXPECTED = [
    "one",
    "two\u2028still two\u2029and two",
    "",
    "form\x0cfeed \x85 nel \x1c fs",
    "  \t ",
    "last, no newline",
]


def test_read_lines_keeps_one_line_per_newline(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(AWKWARD)
    assert read_lines(path) == EXPECTED
    assert read_lines(path, strict=True) == EXPECTED
    assert [number for number, _ in numbered_lines(path)] == list(range(1, 7))
    path.write_bytes(AWKWARD + b"\n")  # a final newline ends the last line, adds none
    assert read_lines(path) == read_lines(path, strict=True) == EXPECTED
    path.write_bytes(b"a\n\n")
    assert read_lines(path) == read_lines(path, strict=True) == ["a", ""]
    path.write_bytes(b"")
    assert read_lines(path) == read_lines(path, strict=True) == []


def test_invalid_utf8_is_replaced_leniently_and_named_strictly(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\nbad \xff\xfe bytes\nfine\n")
    assert read_lines(path) == ["fine", "bad \ufffd\ufffd bytes", "fine"]
    with pytest.raises(DataError, match="not valid UTF-8") as error:
        read_lines(path, strict=True)
    assert str(error.value).startswith(f"{path}:2: ") and "\n" not in str(error.value)


@pytest.mark.parametrize("strict", [False, True])
def test_a_missing_file_is_a_one_line_data_error(tmp_path, strict):
    missing = tmp_path / "missing.txt"
    with pytest.raises(DataError, match="file not found") as error:
        read_lines(missing, strict=strict)
    assert str(error.value) == f"{missing}: file not found"


def test_write_lines_then_read_lines_round_trips(tmp_path, capsys, monkeypatch):
    lines = EXPECTED[1:] + ["中文。", "tab\there", "mid\rdle", "", ""]
    path = tmp_path / "out.txt"
    write_lines(lines, path)
    assert path.read_bytes().count(b"\n") == len(lines)
    assert read_lines(path) == lines
    write_lines(lines, None)  # stdout
    written = capsys.readouterr().out
    assert written == path.read_bytes().decode("utf-8")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(written.encode())))
    assert read_lines(None) == lines  # stdin


def test_one_line_removes_every_line_break_and_keeps_the_words():
    text = "a\nb\r\nc\rd\u2028e\u2029f\x0bg\x0ch\x1ci\x85j\n\nk\n"
    out = one_line(text)
    assert out.splitlines() == [out] and "\n" not in out and "\r" not in out
    assert out.split() == list("abcdefghijk")
    assert one_line("no break") == "no break" and one_line("") == ""


def test_warn_lines_names_at_most_twenty_lines_in_one_line(capsys):
    warn_lines("truncated", [3, 9])
    assert capsys.readouterr().err == "warning: truncated: line 3, 9\n"
    warn_lines("truncated", list(range(1, 31)))
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith(", 20 ...\n") and ", 21" not in err


def test_a_document_written_whole_has_the_permissions_a_plain_write_gives(tmp_path):
    """``write_whole`` writes under a private temporary name, then renames: the file still
    gets what ``open(path, "w")`` gives (a new file: 0666 less the umask; an old one: its own),
    and a failure leaves the old file and no temporary one."""
    import os

    from seq2seq.textio import write_whole

    plain, whole = tmp_path / "plain.docx", tmp_path / "whole.docx"
    plain.write_bytes(b"x")
    write_whole(whole, lambda into: into.write(b"x"))
    assert whole.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777
    os.chmod(whole, 0o640)
    write_whole(whole, lambda into: into.write(b"y"))
    assert whole.stat().st_mode & 0o777 == 0o640 and whole.read_bytes() == b"y"

    def failing(into):
        into.write(b"half")
        raise DataError("x.docx: corrupt")

    with pytest.raises(DataError):
        write_whole(whole, failing)
    assert whole.read_bytes() == b"y" and sorted(tmp_path.iterdir()) == [plain, whole]


def test_read_text_reads_utf8_or_says_in_one_line_why_not(tmp_path):
    good = tmp_path / "terms.tsv"
    good.write_text("老师\tteacher\n", encoding="utf-8")
    assert read_text(good, "glossary file") == "老师\tteacher\n"
    latin = tmp_path / "latin.tsv"
    latin.write_bytes("café\n".encode("latin-1"))
    for path, message in [
        (tmp_path / "missing.tsv", "no such glossary file"),
        (latin, "glossary file: not UTF-8 text"),
        (tmp_path, "cannot read glossary file"),  # a directory
    ]:
        with pytest.raises(DataError, match=message) as error:
            read_text(path, "glossary file")
        assert str(path) in str(error.value) and "\n" not in str(error.value)
