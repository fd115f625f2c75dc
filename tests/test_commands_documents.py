"""``seq2seq translate`` on documents: the format from the extension or --format, markup and
structure kept, --no-split, and a malformed file as one line (exit 2) before any output."""

from __future__ import annotations

import pytest

from seq2seq.cli import main
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.translator import Translator
from tests.helpers import checkpoint_command, tiny_checkpoint

SENTENCES = ["I will buy apples today.", "She can see the book tomorrow."]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> str:
    return str(tiny_checkpoint(tmp_path_factory.mktemp("docs") / "t.ckpt"))


def translate(checkpoint, *args) -> int:
    return main(["translate", "--checkpoint", checkpoint, "--beam-size", "1", *args])


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("page.html", f"<p>{SENTENCES[0]} <b>{SENTENCES[1]}</b></p>\n<pre>keep</pre>\n"),
        ("notes.md", f"# {SENTENCES[0]}\n\n- {SENTENCES[1]}\n\n```\nkeep\n```\n"),
        ("subs.srt", f"1\n00:00:01,000 --> 00:00:02,000\n{SENTENCES[0]}\n{SENTENCES[1]}\n"),
    ],
)
def test_the_extension_picks_the_format(checkpoint, tmp_path, name, text):
    source, output = tmp_path / name, tmp_path / f"out.{name}"
    source.write_text(text, encoding="utf-8")
    assert translate(checkpoint, "--input", str(source), "--output", str(output)) == 0
    fmt = {"html": "html", "md": "markdown", "srt": "srt"}[name.rsplit(".", 1)[1]]
    expected = Translator.from_checkpoint(checkpoint).translate(
        [text], TranslateOptions(beam_size=1, format=fmt)
    )[0]
    assert output.read_text(encoding="utf-8") == expected
    assert "keep" in expected or expected.startswith("1\n00:00:01,000 --> 00:00:02,000\n")


def test_format_flag_on_stdin_and_no_split(checkpoint, tmp_path, capsys, monkeypatch):
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"<p>We eat.</p>")))
    assert translate(checkpoint, "--format", "html") == 0
    out = capsys.readouterr().out
    assert out.startswith("<p>") and out.endswith("</p>")
    lines = tmp_path / "in.en"
    lines.write_text(" ".join(SENTENCES) + "\n", encoding="utf-8")
    translator = Translator.from_checkpoint(checkpoint)
    assert translate(checkpoint, "--input", str(lines)) == 0
    assert (
        capsys.readouterr().out
        == "".join(translator.translate(SENTENCES, TranslateOptions(beam_size=1))) + "\n"
    )
    assert translate(checkpoint, "--input", str(lines), "--no-split") == 0
    whole = translator.translate([" ".join(SENTENCES)], TranslateOptions(beam_size=1, split=False))[
        0
    ]
    assert capsys.readouterr().out == whole + "\n"


def test_a_malformed_file_is_one_line_and_no_output(checkpoint, tmp_path, capsys):
    bad, output = tmp_path / "bad.srt", tmp_path / "out.srt"
    bad.write_text("1\n00:00:01 -> x\nHello.\n", encoding="utf-8")
    assert translate(checkpoint, "--input", str(bad), "--output", str(output)) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"seq2seq translate: error: {bad}:2: malformed SRT timing '00:00:01 -> x' "
        "(expected 'HH:MM:SS,mmm --> HH:MM:SS,mmm')"
    )
    assert not output.exists()


def test_evaluate_splits_unless_told_not_to(checkpoint, tmp_path, capsys):
    src, ref, hyps = tmp_path / "t.en", tmp_path / "t.zh", tmp_path / "h.zh"
    src.write_text(" ".join(SENTENCES) + "\n", encoding="utf-8")
    ref.write_text("我今天会买苹果。她明天能看到那本书。\n", encoding="utf-8")
    translator = Translator.from_checkpoint(checkpoint)
    for extra, expected in (
        ([], "".join(translator.translate(SENTENCES, TranslateOptions(beam_size=1)))),
        (
            ["--no-split"],
            translator.translate([" ".join(SENTENCES)], TranslateOptions(beam_size=1, split=False))[
                0
            ],
        ),
    ):
        files = ("--src", src, "--ref", ref, "--hyps", hyps)
        options = ("--beam-size", 1, "--json", *extra)
        assert main(checkpoint_command("evaluate", checkpoint, *files, *options)) == 0
        assert hyps.read_text(encoding="utf-8") == expected + "\n"
    capsys.readouterr()
