"""Markdown keeps what it does not translate (issue 38): front matter, footnotes, task-list
markers, link targets and reference links, inline HTML around its words; and its emphasis still
renders beside Chinese. No model: translations and alignments are written by hand, or made by
``chinese`` (one character per word, aligned to it)."""

import re

import pytest
from markdown_it import MarkdownIt

from seq2seq.formats import parse, rebuild, segments

COMMONMARK = MarkdownIt("commonmark")


def identity(segment):
    """The segment 'translated' as itself, every character aligned to itself."""
    return segment.text, [(i, i + 1) for i in range(len(segment.text))]


def chinese(segment):
    """One Chinese-looking character per word, and Chinese punctuation for ``.`` and ``,``,
    each aligned to its source: a translation with no spaces, as the model's would be."""
    translation, alignment = [], []
    for word in re.finditer(r"[^\s.,]+|[.,]", segment.text):
        translation.append({".": "。", ",": "，"}.get(word.group(), "文"))
        alignment.append(word.span())
    return "".join(translation), alignment


def translate(text, fake=chinese):
    """``text`` parsed as Markdown, each segment rendered from ``fake``'s translation."""
    document = parse(text, "markdown")
    return rebuild(document, [s.render(*fake(s)) for s in segments(document)])


def render_one(text, translation, alignment):
    [segment] = segments(parse(text, "markdown"))
    return segment.render(translation, alignment)


YAML = "---\ntitle: Getting started\ntags: [install, usage]\n---\n"
TOML = '+++\r\ntitle = "Getting started"\r\ndraft = false\r\n+++\r\n'
FOOTNOTES = (
    "Results are good[^1] and fast[^speed].\n\n"
    "[^1]: Measured on one GPU.\n"
    "[^speed]: Speed is tokens per second.\n"
)
TASKS = "- [ ] Install the package\n- [x] Run the tests\n* [X] Done\n- [ ]\n"

# (Markdown, its sentences, its translation by ``chinese``): what is not a sentence is kept.
KEPT = {
    "yaml-front-matter": (
        YAML + "\n# Install it\n\nRun the installer.\n",
        ["Install it", "Run the installer."],
        YAML + "\n# 文文\n\n文文文。\n",
    ),
    "toml-front-matter": (
        TOML + "\n# Install it\n\nRun the installer.\n",
        ["Install it", "Run the installer."],
        TOML + "\n# 文文\n\n文文文。\n",
    ),
    # a thematic break never closed is not front matter
    "thematic-break": ("---\n\nSome text.\n", ["Some text."], "---\n\n文文。\n"),
    "footnotes": (
        FOOTNOTES,
        ["Results are good and fast.", "Measured on one GPU.", "Speed is tokens per second."],
        "文文文[^1]文文[^speed]。\n\n[^1]: 文文文文。\n[^speed]: 文文文文文。\n",
    ),
    "task-list": (
        TASKS,
        ["Install the package", "Run the tests", "Done"],
        "- [ ] 文文文\n- [x] 文文文\n* [X] 文\n- [ ]\n",
    ),
    # the x after the marker is the one translated
    "task-named-x": ("- [x] x\n", ["x"], "- [x] 文\n"),
    "github-alert": (
        "> [!IMPORTANT]\n> Back up your data first.\n",
        ["Back up your data first."],
        "> [!IMPORTANT]\n> 文文文文文。\n",
    ),
}


@pytest.mark.parametrize("text, sentences, translated", KEPT.values(), ids=KEPT)
def test_what_is_not_a_sentence_is_kept_byte_for_byte(text, sentences, translated):
    assert [s.text for s in segments(parse(text, "markdown"))] == sentences
    assert translate(text, identity) == text
    assert translate(text) == translated


@pytest.mark.parametrize("front", [YAML, TOML], ids=["yaml", "toml"])
def test_front_matter_counts_in_the_lines_of_the_document(front):
    text = front + "\n# Install it\n\nRun the installer.\n"
    assert [s.line for s in segments(parse(text, "markdown"))] == [6, 8]


def test_underscore_emphasis_is_written_with_stars_that_render_beside_chinese():
    out = render_one(
        "This is _very_ important.",
        "这是很重要。",
        [(0, 4), (5, 7), (8, 12), (13, 22), (13, 22), (22, 23)],
    )
    assert out == "这是*很*重要。"
    assert COMMONMARK.renderInline(out) == "这是<em>很</em>重要。"


def test_emphasis_that_cannot_be_settled_is_written_as_html_tags():
    # spaces inside two spans opened together: no placement of stars renders them all
    alignment = [(1, 2), (2, 3), (3, 4), (3, 4), (1, 2), (2, 3), (4, 5), (5, 6)]
    out = render_one("**a *b* c** *d **e***", "  甲甲”AAA", alignment)
    assert out == "<strong> <em> 甲甲”A</em>A</strong><em><strong>A</strong></em>"
    assert COMMONMARK.renderInline(out) == out  # inline HTML: rendered as it stands


def test_emphasis_markers_that_render_stay_markers():
    alignment = [(0, 1), (2, 6), (2, 6), (7, 12), (13, 16), (16, 17)]
    assert render_one("I like __green__ tea.", "我喜欢绿茶。", alignment) == "我喜欢**绿**茶。"
    out = render_one("A ~~bad~~ idea.", "坏主意。", [(2, 5), (6, 10), (6, 10), (10, 11)])
    assert out == "~~坏~~主意。"


def test_inline_html_wraps_its_words_void_tags_are_points_code_tags_are_kept():
    text = "Press <b>Save</b> now."
    [segment] = segments(parse(text, "markdown"))
    assert segment.text == "Press Save now."
    # the words moved to the front: the tags go with them, not left empty where they were
    out = segment.render("保存现在按。", [(6, 10), (6, 10), (11, 14), (11, 14), (0, 5), (14, 15)])
    assert out == "<b>保存</b>现在按。"
    text = 'Hit <kbd>Ctrl</kbd> and <kbd>S</kbd>,<br>then <span class="x">go <i>home</i></span>.'
    assert translate(text, identity) == text
    out = translate(text)
    assert out == '文<kbd>Ctrl</kbd>文<kbd>S</kbd>，<br>文<span class="x">文<i>文</i></span>。'


def test_reference_links_keep_their_targets_and_stay_reference_links():
    definitions = "\n\n[guide]: https://example.org/guide\n[the faq]: https://example.org/faq\n"
    definitions += '[help]: <https://example.org/help> "Help"\n'
    text = "Read [the guide][guide], [the FAQ][] or [Help]." + definitions
    assert translate(text, identity) == text.replace("[the FAQ][]", "[the FAQ][the FAQ]").replace(
        "[Help]", "[Help][Help]"
    )
    # [text][] and [text] take their text as label: translated, the text is no longer it
    out = translate(text)
    assert out == "文[文文][guide]，[文文][the FAQ]文[文][Help]。" + definitions
    hrefs = re.findall(r'href="([^"]+)"', COMMONMARK.render(out))
    assert hrefs == [f"https://example.org/{page}" for page in ("guide", "faq", "help")]


def test_a_bar_of_language_links_keeps_every_target():
    names = (
        "English Deutsch Español Français Italiano 日本語 한국어 Português Русский Türkçe "
        "Polski Nederlands Svenska Čeština Ελληνικά العربية हिन्दी Suomi Dansk"
    ).split()
    targets = [f"docs/README.{i}.md" for i in range(len(names))]
    text = " | ".join(f"[{n}]({t})" for n, t in zip(names, targets, strict=True)) + "\n"
    [segment] = segments(parse(text, "markdown"))
    spans = [m.span() for m in re.finditer(r"[^ |]+", segment.text)]
    # every link gets one character, but in the reverse order (attention is not monotone)
    out = segment.render("文" * len(spans), spans[::-1])
    assert re.findall(r'href="([^"]+)"', COMMONMARK.renderInline(out)) == targets


def test_links_and_images_are_written_as_they_were():
    text = '[a *link*](https://x.org/a_b "T") ![alt *x*](i.png) [![badge](b.svg)](https://b)\n'
    assert translate(text, identity) == text
    out = translate(text)
    assert '](https://x.org/a_b "T")' in out and "![alt *x*](i.png)" in out
    assert "[![badge](b.svg)](https://b)" in out


def test_a_table_cell_keeps_its_escaped_pipes():
    text = "| a \\| b | `x\\|y` c |\n|---|---|\n| d | e |\n"
    document = parse(text, "markdown")
    assert [s.text for s in segments(document)] == ["a | b", "x|y c", "d", "e"]
    assert translate(text, identity) == text
    cell = segments(document)[0]
    assert cell.render("甲|乙", [(0, 1), (2, 3), (4, 5)]) == "甲\\|乙"  # | would end the cell


def test_heading_attribute_lists_are_kept_and_never_translated():
    headings = {  # source: its translation by chinese()
        "## Install *it* {#install}": "## 文*文* {#install}",
        "Set up {: #set-up .wide }\n======": "文文 {: #set-up .wide }\n======",
        '### Run {#run data-x="a b"} ###': '### 文 {#run data-x="a b"} ###',
        "# {#empty}": "# {#empty}",
        "# Read `{#x}` and {#y} here": "# 文`{#x}`文文文",  # not at the end: words
    }
    text = "\n\n".join(headings) + "\n"
    document = parse(text, "markdown")
    texts = [s.text for s in segments(document)]
    assert texts == ["Install it", "Set up", "Run", "Read {#x} and {#y} here"]
    assert translate(text, identity) == text
    assert translate(text) == "\n\n".join(headings.values()) + "\n"


def test_html_blocks_are_translated_as_html_their_tags_and_attributes_kept():
    text = (
        '<p align="center">\n  <img src="logo.png" alt="Logo">\n</p>\n'
        '<p align="center"><em>Fast &amp; simple.</em></p>\n\n'
        "<details>\n<summary>Or use <code>async def</code> here</summary>\n\n"
        "Some **text**.\n\n</details>\n\n"
        "> <p>Quoted</p>\n\n"
        "<pre>\nkept as code\n</pre>\n"
    )
    document = parse(text, "markdown")
    texts = [s.text for s in segments(document)]
    assert texts == ["Fast & simple.", "Or use async def here", "Some text.", "Quoted"]
    assert [s.line for s in segments(document)] == [4, 7, 9, 13]
    out = translate(text)
    assert out == (
        '<p align="center">\n  <img src="logo.png" alt="Logo">\n</p>\n'
        '<p align="center"><em>文文文。</em></p>\n\n'  # & (read as &amp;) is a word here
        "<details>\n<summary>文文<code>async def</code>文</summary>\n\n"
        "文**文**。\n\n</details>\n\n"
        "> <p>文</p>\n\n"
        "<pre>\nkept as code\n</pre>\n"
    )
    # the tags as an independent reader sees them: the same elements, the same attributes
    tags = re.compile(r"<[a-z/][^>]*>")
    assert tags.findall(COMMONMARK.render(out)) == tags.findall(COMMONMARK.render(text))


def test_html_escapes_translated_text_in_an_html_block():
    [segment] = segments(parse("<div>\nTom and Jerry\n</div>\n", "markdown"))
    assert segment.render("汤姆&杰瑞<", [(0, 3)] * 2 + [(4, 7)] + [(8, 13)] * 3) == (
        "汤姆&amp;杰瑞&lt;"
    )
