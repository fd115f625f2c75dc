"""``seq2seq translate`` on documents in any encoding: a Latin-1 page written back in UTF-8 with
its declaration saying so (or in Latin-1 with references), UTF-16 files with their BOM, a binary
file refused in one line; and progress as plain lines when stderr is not a terminal."""

from __future__ import annotations

import codecs
import re

import pytest

from seq2seq.cli import main
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.translator import Translator

SENTENCES = ["I will buy apples today.", "She can see the book tomorrow."]
LATIN_PAGE = (
    "<html><head><meta charset=ISO-8859-1><title>Caf\xe9</title></head>\n"
    f"<body><p>{SENTENCES[0]}</p>\n<pre>na\xefve code</pre></body></html>\n"
)
SRT = (
    f"1\n00:00:01,000 --> 00:00:02,000\n{SENTENCES[0]}\n\n"
    f"2\n00:00:03,000 --> 00:00:04,500\n{SENTENCES[1]}\n"
)


@pytest.fixture(scope="module")
def checkpoint(translation_checkpoint) -> str:
    return str(translation_checkpoint)


@pytest.fixture(scope="module")
def translator(checkpoint) -> Translator:
    return Translator.from_checkpoint(checkpoint)


def translate(checkpoint, *args) -> int:
    return main(["translate", "--checkpoint", checkpoint, "--beam-size", "1", *args])


def test_a_latin1_page_comes_back_in_utf8_declared_so(checkpoint, translator, tmp_path):
    source, output = tmp_path / "page.html", tmp_path / "out.html"
    source.write_bytes(LATIN_PAGE.encode("latin-1"))
    assert translate(checkpoint, "--input", str(source), "--output", str(output)) == 0
    expected = translator.translate([LATIN_PAGE], TranslateOptions(beam_size=1, format="html"))[0]
    written = output.read_bytes().decode("utf-8")  # today: UTF-8 under charset=ISO-8859-1
    assert written == expected.replace("charset=ISO-8859-1", "charset=UTF-8")
    assert "<pre>na\xefve code</pre>" in written  # today: na\ufffdve


def test_output_encoding_input_keeps_the_page_and_writes_references(
    checkpoint, tmp_path, monkeypatch
):
    chinese = LATIN_PAGE.replace(SENTENCES[0], "我今天会买苹果。")  # what a trained model writes

    def translated(self, documents, *args, **kwargs) -> list[str]:
        assert len(documents) == 1
        return [chinese]

    monkeypatch.setattr(Translator, "translate_documents", translated)
    source, output = tmp_path / "page.html", tmp_path / "out.html"
    source.write_bytes(LATIN_PAGE.encode("latin-1"))
    args = ("--input", str(source), "--output", str(output), "--output-encoding", "input")
    assert translate(checkpoint, *args) == 0
    assert output.read_bytes() == LATIN_PAGE.replace(
        SENTENCES[0], "&#25105;&#20170;&#22825;&#20250;&#20080;&#33529;&#26524;&#12290;"
    ).encode("latin-1")  # the declaration and <pre>na\xefve code</pre> as they were


@pytest.mark.parametrize(
    ("name", "text", "bom", "codec"),
    [
        ("subs.srt", SRT, codecs.BOM_UTF16_LE, "utf-16-le"),
        ("page.html", f"<p>{SENTENCES[0]} <b>{SENTENCES[1]}</b></p>\n", codecs.BOM_UTF16_BE,
         "utf-16-be"),
    ],
)  # fmt: skip
def test_utf16_documents_keep_markup_timings_and_their_mark(
    checkpoint, translator, tmp_path, name, text, bom, codec
):
    source, output = tmp_path / name, tmp_path / f"out.{name}"
    source.write_bytes(bom + text.encode(codec))
    assert translate(checkpoint, "--input", str(source), "--output", str(output)) == 0
    fmt = "srt" if name.endswith(".srt") else "html"
    expected = translator.translate([text], TranslateOptions(beam_size=1, format=fmt))[0]
    assert output.read_bytes() == codecs.BOM_UTF8 + expected.encode("utf-8")
    if fmt == "srt":
        assert expected.startswith("1\n00:00:01,000 --> 00:00:02,000\n")


def test_a_utf16_text_file_is_read_by_its_mark(checkpoint, translator, tmp_path, capsys):
    source = tmp_path / "lines.txt"
    source.write_bytes(codecs.BOM_UTF16_LE + "\r\n".join(SENTENCES).encode("utf-16-le"))
    assert translate(checkpoint, "--input", str(source)) == 0
    assert capsys.readouterr().out == "".join(
        line + "\n" for line in translator.translate(SENTENCES, TranslateOptions(beam_size=1))
    )


def test_a_binary_file_is_one_line_and_no_output(checkpoint, tmp_path, capsys):
    font, output = tmp_path / "font.html", tmp_path / "out.html"
    font.write_bytes(b"\x00\x01\x00\x00\x00\x0cOS/2\x00\x00glyf" * 64)
    assert translate(checkpoint, "--input", str(font), "--output", str(output)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"seq2seq translate: error: {font}: not a text file (it holds NUL")
    assert "\n" not in err and not output.exists()


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--encoding", "latin-9x"], "--encoding latin-9x: not an encoding Python knows"),
        (
            ["--encoding", "latin1"],
            "--encoding takes a document (--format html, markdown, srt, po, xliff)",
        ),
        (["--output-encoding", "input"], "--output-encoding takes a document"),
    ],
)
def test_encoding_options_are_checked_in_one_line(checkpoint, tmp_path, capsys, args, problem):
    lines = tmp_path / "lines.txt"
    lines.write_text(SENTENCES[0] + "\n", encoding="utf-8")
    assert translate(checkpoint, "--input", str(lines), *args) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and problem in err, err


def test_an_srt_in_latin1_cannot_be_written_back_in_latin1(checkpoint, tmp_path, capsys):
    source, output = tmp_path / "subs.srt", tmp_path / "out.srt"
    source.write_bytes(SRT.replace("today.", "today, caf\xe9.").encode("latin-1"))
    args = ("--input", str(source), "--output", str(output), "--output-encoding", "input")
    assert translate(checkpoint, *args) == 2
    err = capsys.readouterr().err.strip()
    assert "windows-1252 (the input's encoding) cannot hold simplified Chinese" in err
    assert "\n" not in err and not output.exists()


def test_progress_is_a_plain_line_every_interval_without_a_terminal(
    checkpoint, tmp_path, capsys, monkeypatch
):
    from seq2seq.cli import progress

    source, output = tmp_path / "page.html", tmp_path / "out.html"
    source.write_text(f"<p>{SENTENCES[0]}</p><p>{SENTENCES[1]}</p>", encoding="utf-8")
    monkeypatch.setattr(progress, "LINE_INTERVAL", 0.0)  # a line each time the work moves
    assert translate(checkpoint, "--input", str(source), "--output", str(output)) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(
        re.fullmatch(r"seq2seq translate: \d+/2 sentences \(\d+%\), \d+ s elapsed", line)
        for line in lines
    ), lines
    assert lines[-1].startswith("seq2seq translate: 2/2 sentences (100%), ")


def test_progress_lines_are_timed(monkeypatch, capsys):
    from seq2seq.cli import progress

    clock = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    with progress.progress_bar(400, "lines", show=True, label="work", interval=5) as bar:
        for _ in range(4):  # one step a second: a line at 5 s, none before
            clock[0] += 1
            bar.advance(30)
        assert capsys.readouterr().err == ""
        clock[0] += 1
        bar.advance(30)
        assert capsys.readouterr().err == "work: 150/400 lines (37%), 5 s elapsed\n"
        clock[0] += 2
        bar.set_completed(400)
    assert capsys.readouterr().err == "work: 400/400 lines (100%), 7 s elapsed\n"
    with progress.progress_bar(None, "sentences", show=True, interval=5) as bar:
        clock[0] += 6
        bar.advance(3)
    assert capsys.readouterr().err == (
        "seq2seq: 3 sentences, 6 s elapsed\nseq2seq: 3 sentences, 6 s elapsed\n"
    )
