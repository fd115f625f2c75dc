"""Traditional Chinese targets (``seq2seq.formats.chinese_script``): the names read, OpenCC's
conversion with each character's origin, an HTML page's ``lang``, and every entry point of the
Python API and the CLI writing exactly OpenCC's conversion of its Simplified output, verbatim
spans, markup and glossary terms as written."""

from __future__ import annotations

import re
from dataclasses import replace

import opencc
import pytest

from seq2seq.formats.chinese_script import (
    TARGETS,
    convert,
    convert_aligned,
    target_tag,
    to_simplified,
)
from seq2seq.formats.html import parse_html, with_lang
from seq2seq.formats.inline import rebuild
from seq2seq.inference.glossary import Glossary, Term
from seq2seq.inference.options import TranslateOptions

TRADITIONAL = ("zh-Hant", "zh-TW", "zh-HK")
LINES = [
    "I will buy apples today.",
    "She can see the book tomorrow. We should eat.",
    "",
    "Read http://example.com/x and the software.",
]
# Simplified terms that put characters each conversion changes into any output.
TERMS = Glossary([Term("apples", "苹果"), Term("software", "软件"), Term("book", "信息")])


@pytest.mark.parametrize(
    ("given", "tag"),
    [
        ("zh", "zh-Hans"),
        ("ZH-HANS", "zh-Hans"),
        ("zh_CN", "zh-Hans"),
        ("zh-sg", "zh-Hans"),
        ("zt", "zh-Hant"),
        ("ZH-HANT", "zh-Hant"),
        ("zh_tw", "zh-TW"),
        ("zh-Hant-TW", "zh-TW"),
        (" zh-hk ", "zh-HK"),
    ],
)
def test_every_name_of_a_target_reads_as_its_tag(given, tag):
    assert target_tag(given) == tag
    assert TranslateOptions(target=given).target == tag


@pytest.mark.parametrize("bad", ["fr", "zh-XX", "", "zh-Hans-TW"])
def test_an_unknown_target_is_a_one_line_error_naming_the_known_ones(bad):
    with pytest.raises(ValueError) as caught:
        TranslateOptions(target=bad)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("TranslateOptions.target: unknown target")
    assert all(tag in message for tag in TARGETS) and "zt" in message


@pytest.mark.parametrize(
    "text",
    [
        "我们的软件可以通过U盘读取信息，然后用打印机打印出来。",
        "内存和鼠标在出租车里。",
        "abc 123",
        "",
    ],
)
@pytest.mark.parametrize("target", TRADITIONAL)
def test_conversion_is_opencc_and_each_character_has_an_origin_in_order(text, target):
    converted, origin = convert_aligned(text, target)
    assert converted == convert(text, target) == opencc.OpenCC(TARGETS[target]).convert(text)
    assert len(origin) == len(converted)
    assert origin == sorted(origin) and all(0 <= i < len(text) for i in origin)


def test_taiwan_phrases_change_lengths_and_zh_hans_is_the_text_itself():
    assert convert("软件、信息、出租车和U盘", "zh-TW") == "軟體、資訊、計程車和隨身碟"
    assert convert("软件", "zh-Hant") == "軟件" and convert("软件", "zh-HK") == "軟件"
    text = "我们的软件"
    assert convert_aligned(text, "zh-Hans") == (text, list(range(len(text))))


def test_kept_texts_are_written_as_given_and_the_rest_converted():
    text = "下载http://例子.cn/软件/里的软件"
    kept = {"http://例子.cn/软件/": "http://例子.cn/软件/", "软件": "軟件"}
    converted, origin = convert_aligned(text, "zh-TW", kept)
    assert converted == "下載http://例子.cn/软件/裡的軟件"
    assert len(origin) == len(converted) and origin == sorted(origin)


def test_an_html_page_says_the_language_it_is_in():
    def lang(page: str, tag: str) -> str:
        return rebuild(with_lang(parse_html(page), tag), [])

    assert lang('<html lang="en"><p></p></html>', "zh-TW") == '<html lang="zh-TW"><p></p></html>'
    assert (
        lang("<!DOCTYPE html>\n<HTML xml:lang='en' lang=en>", "zh-Hant")
        == "<!DOCTYPE html>\n<HTML xml:lang='zh-Hant' lang=zh-Hant>"
    )
    assert lang("<html><p></p></html>", "zh-HK") == "<html><p></p></html>"  # none: none added
    assert lang('<p lang="en"></p>', "zh-HK") == '<p lang="en"></p>'  # only <html>'s


def test_glossary_terms_are_searched_in_simplified_and_written_as_given():
    glossary = Glossary([Term("software", "軟件"), Term("news", "信息"), Term("data", "資訊")])
    searched, written = TranslateOptions(glossary=glossary, target="zh-TW").searched_terms
    assert [t.target for t in searched] == ["软件", "信息", "资讯"]
    # 软件 is 軟體 in Taiwan, but the user wrote 軟件; 资讯 converts back to 資訊 by itself;
    # 信息, given in Simplified, is written as Taiwan writes it (資訊).
    assert written == {Term("software", "软件"): "軟件"}
    assert TranslateOptions(glossary=glossary).searched_terms == (glossary, {})
    assert to_simplified("軟件") == "软件"


# -- the Python API, on the tiny untrained model the serving tests share ------------------


@pytest.mark.parametrize("target", TRADITIONAL)
def test_translate_writes_opencc_s_conversion_of_the_simplified_output(translator, target):
    simplified = translator.translate(LINES, TranslateOptions(glossary=TERMS))
    converted = translator.translate(LINES, TranslateOptions(glossary=TERMS, target=target))
    assert converted == [convert(line, target) for line in simplified]
    assert converted != simplified  # the terms put characters the conversion changes in


def test_verbatim_spans_stay_as_written(translator):
    line = "Open http://example.com/软件/ and the software."
    for target in TRADITIONAL:
        [found] = translator.translate([line], TranslateOptions(glossary=TERMS, target=target))
        assert "http://example.com/软件/" in found and convert("软件", target) in found


def test_n_best_lists_and_streams_are_converted_too(translator):
    options = TranslateOptions(glossary=TERMS, n_best=3)
    simplified = translator.translate_n_best(LINES, options)
    converted = translator.translate_n_best(LINES, replace(options, target="zt"))
    assert [[h.text for h in hyps] for hyps in converted] == [
        [convert(h.text, "zh-Hant") for h in hyps] for hyps in simplified
    ]
    stream = translator.translate_stream(iter(LINES), TranslateOptions(target="zh-HK"), window=2)
    plain = translator.translate(LINES)
    assert [line for window in stream for line in window] == [convert(x, "zh-HK") for x in plain]


def test_html_keeps_its_markup_and_says_its_new_language(translator):
    page = (
        '<html lang="en"><body><p>I will buy <b>apples</b> today, see '
        '<a href="http://example.com/软件">the book</a>.</p>'
        "<pre>apples 软件</pre><p>We should <code>eat()</code> the software.</p></body></html>"
    )
    [simplified] = translator.translate([page], TranslateOptions(format="html", glossary=TERMS))
    assert '<html lang="zh-Hans">' in simplified  # the page is no longer in English
    tags = re.compile(r"<pre>.*?</pre>|<[^>]+>")
    for target in TRADITIONAL:
        options = TranslateOptions(format="html", glossary=TERMS, target=target)
        [converted] = translator.translate([page], options)
        expected = tags.findall(simplified.replace('"zh-Hans"', f'"{target}"'))
        assert tags.findall(converted) == expected  # every tag, attribute and <pre> as it was
        assert "<pre>apples 软件</pre>" in converted and "http://example.com/软件" in converted
        if target == "zh-Hant":  # s2t keeps lengths: the markup is placed where it was
            texts = [convert(text, target) for text in tags.split(simplified)]
            assert tags.split(converted) == texts


def test_a_term_given_in_traditional_is_met_as_written(translator):
    lines = ["I bought the software.", "She reads the news."]
    glossary = Glossary([Term("software", "軟件"), Term("news", "信息")])
    for target in TRADITIONAL:
        found = translator.translate(lines, TranslateOptions(glossary=glossary, target=target))
        assert "軟件" in found[0], target  # as given, though Taiwan's word is 軟體
        assert convert("信息", target) in found[1], target  # given in Simplified: its script


# -- the CLI --------------------------------------------------------------------------------


def test_the_cli_target_converts_and_an_unknown_one_fails_before_the_model_loads(
    translation_checkpoint, tmp_path, capsys, monkeypatch
):
    from seq2seq.cli import commands, main

    source = tmp_path / "in.txt"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    outputs = {}
    for target in ("zh-Hans", "zt", "zh_TW"):
        out = tmp_path / f"{target}.txt"
        args = ["translate", "--checkpoint", str(translation_checkpoint), "--input", str(source)]
        assert main([*args, "--output", str(out), "--target", target]) == 0
        outputs[target] = out.read_text(encoding="utf-8")
    assert outputs["zt"] == convert(outputs["zh-Hans"], "zh-Hant")
    assert outputs["zh_TW"] == convert(outputs["zh-Hans"], "zh-TW")
    capsys.readouterr()

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(commands, "_load_translator", no_model)
    code = main(["translate", "--checkpoint", str(translation_checkpoint), "--target", "fr"])
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1
    assert error.startswith("seq2seq translate: error: --target: unknown target 'fr'")
    assert "zh-Hant" in error and "zh-TW" in error
