"""The copy_spans modifier (seq2seq.data.copying): made-up spans put on both sides of a pair."""

import random
import re

import numpy as np
import pytest

from seq2seq.data.copying import SPAN_KINDS, copy_span, made_up_span
from seq2seq.data.modifiers import Modifiers
from seq2seq.errors import ConfigError
from seq2seq.formats.verbatim import Verbatim

PAIRS = [
    ("Father takes the 7:00 subway to work.", "爸爸乘早上7:00的地铁去上班。"),
    ("I like this bank.", "我喜欢这家银行。"),
    ("The car is red.", "汽车是红色的。"),
    ("He bought 3 books.", "他买了3本书。"),
    ("Hmm.", "嗯。"),
]


@pytest.mark.parametrize("kind", [k for k in SPAN_KINDS if k != "name"])
def test_a_made_up_span_is_one_verbatim_span_of_its_kind(kind):
    """What training copies is what inference keeps: one whole span, of the same kind."""
    rng = random.Random(0)
    for _ in range(300):
        span, made = made_up_span(rng, kind)
        text = f"Please see {span} for more."
        found = Verbatim().spans(text)
        assert made == kind
        assert [(text[s.start : s.end], s.kind) for s in found] == [(span, kind)], text


def test_a_made_up_name_is_a_latin_word_no_rule_keeps():
    rng = random.Random(1)
    for _ in range(300):
        name, _ = made_up_span(rng, "name")
        assert re.fullmatch(r"[A-Z][a-z]+", name)
        assert Verbatim().spans(f"Please see {name} for more.") == []


def _replacements(old: str, new: str) -> set[str]:
    """Every non-empty S for which ``new`` is ``old`` with one part (non-empty) replaced by S."""
    found = set()
    for start in range(len(old) + 1):
        for end in range(start + 1, len(old) + 1):
            rest = len(old) - end
            if new.startswith(old[:start]) and new.endswith(old[end:]):
                middle = new[start : len(new) - rest]
                if middle and len(new) - rest >= start:
                    found.add(middle.strip())
    return found


@pytest.mark.parametrize("en, zh", PAIRS[:4])
def test_one_span_replaces_one_place_on_both_sides(en, zh):
    """Each side changes in one place only, and what it gains there is the same span."""
    for draw in np.linspace(0.0, 0.99, 25):
        result = copy_span(en, zh, float(draw))
        assert result is not None
        new_en, new_zh = result
        assert _replacements(en, new_en) & _replacements(zh, new_zh)  # one span, both sides


def test_a_span_both_sides_share_is_replaced_by_one_of_its_kind():
    en, zh = PAIRS[0]
    for draw in (0.1, 0.5, 0.9):
        new_en, new_zh = copy_span(en, zh, draw)
        kept = Verbatim().spans(new_en)
        assert [s.kind for s in kept] == ["time"]
        time = new_en[kept[0].start : kept[0].end]
        assert time != "7:00" or draw == 0.1  # a made-up time (it may rarely be 7:00 again)
        assert new_zh == zh.replace("7:00", time)


def test_a_pair_with_no_place_is_left_alone():
    assert copy_span(*PAIRS[4], 0.3) is None
    # 3 stands in 30 and 3 in the reference: no single whole place, so it is not shared
    assert copy_span("Give me 3 of them.", "给我3个，不是30个。", 0.3) != (
        "Give me 3 of them.",
        "给我3个，不是30个。",
    )


def test_a_span_against_latin_letters_is_set_off_by_a_space():
    en, zh = "I use the computer daily.", "我每天用Linux电脑。"
    for draw in np.linspace(0.0, 0.99, 40):
        result = copy_span(en, zh, float(draw))
        if result is not None:
            assert "Linux " in result[1]  # 电脑 -> span, against Linux


def test_the_modifier_rewrites_its_share_the_same_way_in_any_order():
    en = [p[0] for p in PAIRS] * 40
    zh = [p[1] for p in PAIRS] * 40
    rows = np.arange(len(en))
    modifiers = Modifiers(copy_spans=0.3)
    src, tgt, _ = modifiers.apply(en, zh, rows, seed=3)
    changed = sum(a != b for a, b in zip(en, src, strict=True))
    assert 0.15 * len(en) < changed <= 0.3 * len(en) + 10
    order = np.random.default_rng(0).permutation(len(en))
    src2, tgt2, _ = modifiers.apply([en[i] for i in order], [zh[i] for i in order], order, 3)
    assert [src[i] for i in order] == src2 and [tgt[i] for i in order] == tgt2
    assert Modifiers().apply(en, zh, rows, seed=3)[:2] == (en, zh)


def test_its_setting_is_checked_and_keyed():
    with pytest.raises(ConfigError, match="copy_spans must be a share"):
        Modifiers(copy_spans=1.5)
    assert "copy_spans" not in Modifiers(dictionary=10).cache_key()["modifiers"]  # old caches
    key = Modifiers(copy_spans=0.1).cache_key()
    assert key["modifiers"]["copy_spans"] == 0.1 and key["copy_format"] >= 1
