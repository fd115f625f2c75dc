"""HTML from the wild: code-like inline elements kept as written, <br> keeping line
structure, and inline elements (links) never emptied by the alignment."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from seq2seq.formats import parse, segments
from seq2seq.formats.encoding import decode_document
from seq2seq.inference.documents import SentenceTranslation, TextBatch
from seq2seq.inference.options import TranslateOptions
from tests.fake_translation import identity, translate, upper

DOCUMENTS = Path(__file__).parent / "data" / "documents"


def translated(page: str, translate, align=None) -> str:
    """``page`` rebuilt with each sentence replaced by ``translate(sentence)``, aligned by
    ``align(sentence, translation)`` (default: to nothing: the worst case for markup)."""
    batch = TextBatch([parse(page, "html")])
    found = []
    for sentence in batch.sentences:
        text = translate(sentence)
        alignment = align(sentence, text) if align else [None] * len(text)
        found.append(SentenceTranslation([], [text], alignment=alignment))
    return batch.rebuild(found)[0]


def test_tt_and_var_are_kept_as_written():
    page = "<p>Type <tt>make install</tt> then edit <var>file</var>.</p>"
    [segment] = segments(parse(page, "html"))
    literals = [m.literal for m in segment.markup]
    assert literals == ["make install", "file"]
    out = translated(page, lambda s: "输入然后编辑。")
    assert "<tt>make install</tt>" in out and "<var>file</var>" in out


def test_br_ends_a_sentence_and_the_lines_stay_lines():
    page = "<p>Open the file<br>Save it<br/>\nClose the window</p>"
    batch = TextBatch([parse(page, "html")])
    assert batch.sentences == ["Open the file", "Save it", "Close the window"]
    lines = {"Open the file": "打开文件", "Save it": "保存", "Close the window": "关闭窗口"}

    def identity(sentence, text):  # every character from the sentence's first word
        return [(0, 1)] * len(text)

    out = translated(page, lines.get, identity)
    assert out == "<p>打开文件<br>保存<br/>关闭窗口</p>"


def test_links_side_by_side_never_come_back_empty():
    page = '<p>Next: [<a href="#c">Contents</a>][<a href="#i">Index</a>]</p>'
    for translation in ("下一个：[目录][索引]", "下一个", "下"):
        out = translated(page, lambda s, t=translation: t)
        texts = re.findall(r"<a [^>]*>([^<]*)</a>", out)
        assert len(texts) == 2 and all(text.strip() for text in texts), out
        visible = iter(re.sub(r"<[^>]+>", "", out))
        assert all(c in visible for c in translation)  # the whole translation, in order
        if len(translation) >= 2:  # a character for each link: nothing left in English
            assert not re.search("Contents|Index", out)


def test_a_warning_names_the_line_a_paragraph_starts_on(tmp_path, capsys):
    from seq2seq.inference.translator import Translator
    from tests.helpers import tiny_checkpoint
    from tests.test_documents import Counting

    translator = Translator.from_checkpoint(tiny_checkpoint(tmp_path / "t.ckpt"))
    windowed = Translator(Counting(translator.engine, 8), translator.tokenizer)
    long = " ".join(["apples"] * 40)  # no clause punctuation: cut into windows
    page = f"<html>\n<body>\n<p>Short.</p>\n\n<p>\n{long}</p>\n</body>\n"
    windowed.translate([page], TranslateOptions(format="html"))
    assert "not as a whole: line 6" in capsys.readouterr().err
    subtitles = (
        f"1\n00:00:01,000 --> 00:00:02,000\nHello.\n\n2\n00:00:03,000 --> 00:00:04,000\n{long}\n"
    )
    windowed.translate([subtitles], TranslateOptions(format="srt"))
    assert "not as a whole: line 7" in capsys.readouterr().err


def test_a_subtitle_cue_of_tagged_lines_keeps_every_tag_with_text():
    timing = "1\n00:00:01,000 --> 00:00:04,000\n"
    cue = timing + "<i>Where are you?</i>\n<b>Over here.</b>\n<u>Come on.</u>\n"
    batch = TextBatch([parse(cue, "srt")])
    found = [
        SentenceTranslation([], [text], alignment=[None] * len(text))
        for text in ["你在哪", "这里", "来"][: len(batch.sentences)]
    ]
    out = batch.rebuild(found)[0]
    for tag in ("i", "b", "u"):
        inner = re.search(f"<{tag}>(.*?)</{tag}>", out)
        assert inner and inner.group(1).strip(), out
    assert out.startswith(timing)


def test_the_cli_sets_the_pages_language_to_the_target(translation_checkpoint, tmp_path):
    # issue 57's list of losses: through the CLI a translated page still said lang="en"
    from seq2seq.cli import main

    page = tmp_path / "page.html"
    page.write_text(
        "<!DOCTYPE html>\n<html lang=\"en\" xml:lang='en'><body><p>Hello.</p></body></html>\n"
    )
    out = tmp_path / "out.html"
    args = ["translate", "--checkpoint", str(translation_checkpoint), "--input", str(page)]
    assert main([*args, "--output", str(out), "--target", "zh-TW"]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>\n<html lang=\"zh-TW\" xml:lang='zh-TW'>")


class _Stretches(HTMLParser):
    """A page as its tags (with attributes) and the text between them, white space removed."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.items: list = [""]

    def handle_starttag(self, tag, attrs):
        self.items += [("<", tag, attrs), ""]

    def handle_startendtag(self, tag, attrs):
        self.items += [("<>", tag, attrs), ""]

    def handle_endtag(self, tag):
        self.items += [("</", tag), ""]

    def handle_data(self, data):
        self.items[-1] += re.sub(r"\s+", "", data)


def stretches(page: str, shout: bool = False) -> list:
    reader = _Stretches()
    reader.feed(page)
    reader.close()
    return [item.upper() if shout and isinstance(item, str) else item for item in reader.items]


@pytest.mark.parametrize("path", sorted(DOCUMENTS.glob("*.html")), ids=lambda p: p.name)
@pytest.mark.parametrize("change", [identity, upper])
def test_real_pages_keep_every_tag_and_every_character_between_the_same_tags(path, change):
    # Real pages nobody here wrote (tests/data/documents/README.md). html.parser reads the
    # input and the translation: the same start and end tags with the same attributes, in
    # order, and between each two the same characters (white space aside: sentences are
    # joined with none). A stop placed outside its </b> beside a verbatim span failed this.
    page = decode_document(path.read_bytes(), "html", str(path)).text
    [out] = translate([parse(page, "html", str(path))], change)
    assert stretches(out, change is upper) == stretches(page, change is upper)
