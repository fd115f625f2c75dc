"""Documents parsed into raw parts and segments, and markup put back by alignment: HTML keeps
its tags balanced and in order, leaves code, scripts and translate="no" alone and keeps its
entities; Markdown keeps its structure; SRT its numbers and timings; bad input is one line."""

import re

import pytest
from markdown_it import MarkdownIt

from seq2seq.errors import DataError
from seq2seq.formats import format_of, parse, rebuild, render, segments
from seq2seq.formats.inline import Markup, Segment, monotonic_alignment


def identity(document):
    """Each segment 'translated' as itself, every character aligned to itself."""
    return rebuild(
        document,
        [render(s, s.text, [(i, i + 1) for i in range(len(s.text))]) for s in segments(document)],
    )


def test_html_text_is_segmented_and_untouched_parts_stay_byte_for_byte():
    page = (
        "<!DOCTYPE html>\n<html><head><title>My page</title><style>p{a:b}</style></head>"
        '<body>\n  <p class="x">Tom &amp; Jerry &nbsp;<b>run</b>.</p>\n'
        '<pre>keep  &nbsp; this</pre><p translate="no">Stay</p><div class="notranslate">Me '
        "too</div><td>&nbsp;</td><script>if (a<b) x();</script></body></html>\n"
    )
    document = parse(page, "html")
    assert [s.text for s in segments(document)] == ["My page", "Tom & Jerry run."]
    assert identity(document) == page.replace("Jerry &nbsp;<b>", "Jerry <b>")
    kept = "".join(p for p in document if isinstance(p, str))
    for part in (
        "<pre>keep  &nbsp; this</pre>",
        '<p translate="no">Stay</p>',
        "<script>if (a<b) x();</script>",
        "<td>&nbsp;</td>",
        "<style>p{a:b}</style>",
    ):
        assert part in kept


def test_translated_text_is_escaped_again():
    [segment] = segments(parse("<p>A &amp; B &lt;c&gt;</p>", "html"))
    assert segment.text == "A & B <c>"
    assert render(segment, "甲 & 乙 <丙>", [None] * 9) == "甲 &amp; 乙 &lt;丙&gt;"


def test_inline_code_is_kept_as_written_where_its_words_went():
    [segment] = segments(parse("<p>Run <code>ls -l</code> now.</p>", "html"))
    translation = "运行ls -l吧。"
    alignment = [(0, 3), (0, 3), (4, 6), (4, 6), (7, 9), (7, 9), (7, 9), (10, 13), (13, 14)]
    assert render(segment, translation, alignment) == "运行<code>ls -l</code>吧。"
    # aligned to nothing, it is still written, after what came before it
    out = render(segment, "运行吧。", [(0, 3), (0, 3), (10, 13), (13, 14)])
    assert out == "运行<code>ls -l</code>吧。"


def random_alignments(segment, n):
    import random

    rng = random.Random(n)
    for _ in range(n):
        length = rng.randint(0, 12)
        yield (
            "字" * length,
            [
                rng.choice([None, *((i, i + 1) for i in range(len(segment.text)))])
                for _ in range(length)
            ],
        )


def test_tags_stay_balanced_and_in_source_order_whatever_the_alignment():
    html_text = (
        '<p>A <b>bold <i>and</i> text</b>, a <a href="/x">link</a>,<br>and <em>end</em>.</p>'
    )
    [segment] = segments(parse(html_text, "html"))
    tags = re.findall(r"</?\w+|<br>", html_text[3:-4])
    for translation, alignment in random_alignments(segment, 400):
        out = render(segment, translation, alignment)
        assert re.findall(r"</?\w+|<br>", out) == tags
        assert elements_without_text(out) == []  # no element around words comes back empty
        assert is_subsequence(translation, re.sub(r"<[^>]+>", "", out))
        if len(translation) >= 4:  # a character for each of b, a, em (i shares b's)
            assert re.sub(r"<[^>]+>", "", out) == translation


def elements_without_text(html_text: str) -> list[str]:
    """The (non-void) elements of ``html_text`` with no visible character inside."""
    empty, stack = [], []
    for token in re.findall(r"<[^>]+>|[^<]+", html_text):
        if token.startswith("</"):
            name, text = stack.pop()
            if not text.strip():
                empty.append(name)
            if stack:
                stack[-1][1] += text
        elif token.startswith("<") and not token.startswith("<br"):
            stack.append([token[1:].split()[0].rstrip(">"), ""])
        elif stack and not token.startswith("<"):
            stack[-1][1] += token
    return empty


def is_subsequence(short: str, long: str) -> bool:
    characters = iter(long)
    return all(c in characters for c in short)


@pytest.mark.parametrize("seed", range(3))
def test_adversarial_alignments_never_empty_an_element(seed):
    """Every character aligned to one word, to nothing, or backwards: each element with words
    still holds a character (or, when there are fewer characters than elements, its source
    words)."""
    import random

    rng = random.Random(seed)
    html_text = '<p>Next: [<a href="#c">Contents</a>][<a href="#i">Index</a>] <b>x</b></p>'
    [segment] = segments(parse(html_text, "html"))
    n = len(segment.text)
    for length in range(0, 8):
        translation = "字" * length
        for alignment in (
            [None] * length,
            [(0, 1)] * length,  # everything from "Next"
            [(n - 1, n)] * length,
            [(n - 1 - j, n - j) for j in range(length)],  # backwards
            [rng.choice([None, (0, 1), (11, 12)]) for _ in range(length)],
        ):
            out = render(segment, translation, alignment)
            assert elements_without_text(out) == [], (translation, alignment, out)
            assert out.count('href="#c"') == out.count('href="#i"') == 1
            if length >= 3:  # enough characters: nothing is written from the source
                assert re.sub(r"<[^>]+>", "", out) == translation


def test_code_spans_keep_what_separated_them():
    [segment] = segments(parse("Use `async` / `await` here.", "markdown"))
    # The model translated " / " to nothing: the spans would become `async``await`.
    out = segment.render("使用在这里。", [(0, 3), (0, 3), (22, 26), (22, 26), (22, 26), (26, 27)])
    assert "`async` / `await`" in out


def test_markup_follows_the_words_it_wrapped_when_the_order_changes():
    segment = Segment("I like green tea.", [Markup(7, 16, "<b>", "</b>")])
    translation = "我喜欢绿茶。"  # 我 喜欢 绿茶 。
    alignment = [(0, 1), (2, 6), (2, 6), (7, 12), (13, 16), (16, 17)]
    assert render(segment, translation, alignment) == "我喜欢<b>绿茶</b>。"


def test_html_that_does_not_parse_is_a_one_line_error_naming_the_line():
    with pytest.raises(DataError, match=r"^page.html:2: HTML does not parse: unterminated '<b'"):
        parse("<p>fine</p>\n<p>Hi <b", "html", "page.html")
    with pytest.raises(DataError, match=r"^page.html:1: .*unterminated '<!--'"):
        parse("<p>Hi</p><!-- never closed", "html", "page.html")


@pytest.mark.parametrize(
    "page",
    [
        "<p>a <b><i>x</b></i> y</p>",  # misnested
        "Hello</div><div>World</span>",  # end tags that close nothing: ignored by browsers
        "Press <kbd>Enter to continue",  # an untouched element left open
        "<p>Use <code>x</p><p>Last words",
        "<p>Run <code>ls</p><p>I love you.</p>",
        "<p>" + "<b>" * 200 + "deep</p>",
    ],
)
def test_broken_html_as_browsers_read_it_loses_nothing(page):
    document = parse(page, "html")
    assert identity(document) == page
    words = " ".join(s.text for s in segments(document))
    for word in ("x", "World", "Enter", "Last words", "I love you.", "deep"):
        if word in page:
            assert word in words or word in "".join(p for p in document if isinstance(p, str))


def test_an_element_of_white_space_is_a_point():
    [segment] = segments(parse("<p>Hello<b> </b></p>", "html"))
    assert render(segment, "你好。", [(0, 5)] * 3) == "你好。<b></b>"


def test_markdown_keeps_headings_markers_code_and_link_targets():
    text = (
        "# Title here\n\nSome *emph* and **strong** with `code` and [a link](http://x.org "
        '"t").\nSecond line.\n\n- item one\n1. item two\n\n> quote\n\n```py\nprint(1)\n```'
        "\n\n    indented code\n\n| a | b |\n|---|---|\n| c | d |\n\n"
        "![alt](i.png)\n"
    )
    document = parse(text, "markdown")
    assert [s.text for s in segments(document)] == [
        "Title here",
        "Some emph and strong with code and a link. Second line.",
        "item one",
        "item two",
        "quote",
        "a",
        "b",
        "c",
        "d",
    ]
    out = identity(document)
    assert out == text.replace(".\nSecond", ". Second")  # a paragraph is written on one line
    for kept in (
        "# ",
        "- ",
        "1. ",
        "> ",
        "```py\nprint(1)\n```",
        "    indented code",
        "|---|---|",
        "![alt](i.png)",
        '(http://x.org "t")',
    ):
        assert kept in out


def test_markdown_table_cells_and_hard_breaks():
    table = "| `word` | word |\n|---|---|\n| ![cat](c.png) | cat |\n"
    document = parse(table, "markdown")
    assert [s.text for s in segments(document)] == ["word", "cat"]
    assert rebuild(document, ["字", "猫"]) == "| `word` | 字 |\n|---|---|\n| ![cat](c.png) | 猫 |\n"
    [segment] = segments(parse("Line one  \nLine two.", "markdown"))
    assert segment.text == "Line one Line two."  # the words do not run together


def test_markdown_escapes_what_would_become_markup():
    [segment] = segments(parse("Say *hi*.", "markdown"))
    out = segment.render("说*嗨*。", [None] * 5)  # the translation's stars are not emphasis
    assert re.sub("<[^>]+>", "", MarkdownIt("commonmark").renderInline(out)) == "说*嗨*。"
    assert render(segment, "说嗨。", [(0, 3), (4, 6), (6, 7)]) == "说*嗨*。"


SRT = (
    "1\r\n00:00:01,000 --> 00:00:03,500\r\nWhere is\r\n<i>the station?</i>\r\n\r\n"
    "2\r\n00:00:04,000 --> 00:00:05,000 X1:10\r\nThank you.\r\n"
)


def test_srt_keeps_numbers_and_timings_and_translates_a_cue_as_one_text():
    document = parse(SRT, "srt")
    assert [s.text for s in segments(document)] == ["Where is the station?", "Thank you."]
    out = rebuild(document, ["车站在哪里？", "谢谢。"])
    assert out == (
        "1\r\n00:00:01,000 --> 00:00:03,500\r\n车站在哪里？\r\n\r\n"
        "2\r\n00:00:04,000 --> 00:00:05,000 X1:10\r\n谢谢。\r\n"
    )


def test_srt_cues_without_blank_lines_and_ampersands():
    srt = "1\n00:00:01,000 --> 00:00:02,000\nTom & Jerry\n2\n00:00:03,000 --> 00:00:04,000\nBye.\n"
    document = parse(srt, "srt")
    assert [s.text for s in segments(document)] == ["Tom & Jerry", "Bye."]
    assert identity(document) == srt  # & is not written as &amp;: SRT has no entities


def test_srt_dialogue_keeps_each_speakers_line():
    srt = "1\r\n00:00:01,000 --> 00:00:02,000\r\n- Hi.\r\n-Hello, Tom.\r\n"
    document = parse(srt, "srt")
    assert [s.text for s in segments(document)] == ["Hi.", "Hello, Tom."]
    assert identity(document) == srt
    out = rebuild(document, ["嗨。", "你好，汤姆。"])
    assert out == "1\r\n00:00:01,000 --> 00:00:02,000\r\n- 嗨。\r\n-你好，汤姆。\r\n"
    # one speaker's sentence broken over two lines is still one text
    broken = "1\n00:00:01,000 --> 00:00:02,000\n- I think\nit is fine.\n"
    assert [s.text for s in segments(parse(broken, "srt"))] == ["- I think it is fine."]


def test_srt_with_a_malformed_timing_is_a_one_line_error():
    with pytest.raises(DataError, match=r"^subs.srt:7: malformed SRT timing '00:00:04 -> x'"):
        parse(
            SRT.replace("00:00:04,000 --> 00:00:05,000 X1:10", "00:00:04 -> x"), "srt", "subs.srt"
        )


def test_plain_text_keeps_every_line_and_line_ending():
    text = "One. Two.\r\n\r\n  Three\n"
    document = parse(text, "text")
    assert [s.text for s in segments(document)] == ["One. Two.", "Three"]
    assert rebuild(document, ["甲", "乙"]) == "甲\r\n\r\n  乙\n"  # its indentation kept


def test_format_of_a_path_and_the_monotonic_alignment():
    assert [format_of(p) for p in ("a.HTML", "b.md", "c.srt", "d.txt", "e.en", None)] == [
        "html",
        "markdown",
        "srt",
        "text",
        "text",
        "text",
    ]
    assert monotonic_alignment(4, 2) == [(0, 1), (2, 3)]
    assert monotonic_alignment(0, 2) == [None, None]
    with pytest.raises(ValueError, match="unknown format"):
        parse("x", "pdf")
    with pytest.raises(ValueError, match="bytes, not text"):  # read_zipped reads it
        parse("x", "docx")


def test_plain_text_keeps_each_lines_indentation():
    text = "    I love you.\n\tWhere is it?\r\nHello.\n\n"
    document = parse(text, "text")
    assert [s.text for s in segments(document)] == ["I love you.", "Where is it?", "Hello."]
    assert identity(document) == text
    assert rebuild(document, ["我爱你。", "在哪里？", "你好。"]) == (
        "    我爱你。\n\t在哪里？\r\n你好。\n\n"
    )
