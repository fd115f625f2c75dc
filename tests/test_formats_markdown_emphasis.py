"""Markdown emphasis settled where Chinese puts it (issue 57's list of losses: in READMEs
translated by the demo model, 75 of 196 spans were no longer markers that render): spans side
by side written apart, white space moved out of a marker, a space outside a marker between
punctuation and a letter. Checked by an independent reading: markdown-it's tokens."""

import random
import re

from markdown_it import MarkdownIt

from seq2seq.formats import parse, segments

GFM = MarkdownIt("commonmark").enable("strikethrough")
KINDS = ("em", "strong", "s")
OPENED = [f"{kind}_open" for kind in KINDS]


def render_one(text, translation, alignment):
    [segment] = segments(parse(text, "markdown"))
    return segment.render(translation, alignment)


def emphasis(text):
    """The emphasis tokens GitHub-flavoured CommonMark reads in ``text``, in order."""
    [inline] = GFM.parseInline(text)
    return [t.type for t in inline.children if t.type.rsplit("_", 1)[0] in KINDS]


def test_spans_side_by_side_are_written_apart():
    # **绿色****和** is one run of four stars: not emphasis at all
    alignment = [(4, 9), (4, 9), (10, 13), (14, 18), (14, 18), (18, 19)]
    out = render_one("The **green** **and** blue.", "绿色和蓝色。", alignment)
    assert out == "**绿色** **和**蓝色。"
    assert emphasis(out) == ["strong_open", "strong_close"] * 2
    # different markers together make one run too (*甲***（**): apart where they would not render
    out = render_one("A *b* **c**.", "甲（。", [(2, 3), (6, 7), (10, 11)])
    assert out == "*甲* **（**。"
    assert emphasis(out) == ["em_open", "em_close", "strong_open", "strong_close"]


def test_punctuation_inside_a_marker_beside_a_letter_gets_a_space_outside():
    # 是*“新”*的: the stars have punctuation inside and a letter outside, so never flank
    alignment = [(12, 17), (12, 17), (0, 2), (3, 5), (6, 7), (7, 10), (10, 11), None, (17, 18)]
    out = render_one('It is *"new"* today.', "今天它是“新”的。", alignment)
    assert out == "今天它是 *“新”* 的。"
    assert GFM.renderInline(out) == "今天它是 <em>“新”</em> 的。"
    # a code span or a link starts and ends with punctuation (` [ ]) as a reader sees it
    out = render_one(
        "Use **`--help`** often.",
        "经常用`--help`看",
        [(17, 22)] * 2 + [(0, 3)] + [(6, 12)] * 8 + [(0, 3)],
    )
    assert out == "经常用 **`--help`** 看"
    assert emphasis(out) == ["strong_open", "strong_close"]
    # where a punctuation mark stands outside already, nothing is added
    assert render_one(
        "I *like* it.", "我（喜欢）。", [(0, 1), None, (3, 7), (3, 7), None, (11, 12)]
    ) == ("我（*喜欢*）。")


def test_white_space_inside_a_marker_goes_outside():
    out = render_one(
        "The **NodeJS** way.", "这 NodeJS 办法", [(0, 3), None] + [(6, 12)] * 7 + [(15, 18)] * 2
    )
    assert out == "这 **NodeJS** 办法"
    assert emphasis(out) == ["strong_open", "strong_close"]


def test_every_span_renders_as_markers_whatever_the_alignment():
    """Random translations of Chinese letters and punctuation (no spaces), aligned anyhow: every
    source span comes back as emphasis markdown-it reads, none as HTML."""
    sources = [
        'It is *"new"* and **old** today.',
        "A *b* **c** ~~d~~ e.",
        "*Black* is **the** *best*, really.",
        "A ***b*** c *d **e** f* g.",
        "See [the *docs*](x) and `code` **now**.",
    ]
    generator = random.Random(57)
    for source in sources:
        [segment] = segments(parse(source, "markdown"))
        spans = emphasis(source).count  # of each kind, read by markdown-it
        for _ in range(200):
            translation = "".join(generator.choice("甲乙丙“”。，（）A") for _ in range(8))
            alignment = [
                (k, k + 1) for k in (generator.randrange(len(segment.text)) for _ in range(8))
            ]
            out = segment.render(translation, alignment)
            assert not re.search(r"<(?:em|strong|del)>", out), (source, translation, alignment)
            assert all(emphasis(out).count(kind) == spans(kind) for kind in OPENED), (source, out)


def test_bold_inside_italic_is_read_as_written():
    # between two letters a run of stars may open or close: ***文**文**文**文*** pairs the
    # wrong ones, so the markers that open there get a space before them
    source = '"_**Netflix** is glad to show **crisis** work: **Dispatch**! [with **FastAPI**]_"'
    [segment] = segments(parse(source, "markdown"))
    words = list(re.finditer(r"[^\s.,]+", segment.text))
    out = segment.render("文" * len(words), [word.span() for word in words])
    assert out == "***文**文文文文 **文**文 **文**文 **文***"
    assert emphasis(out) == emphasis(source)
