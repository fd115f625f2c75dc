"""``scripts/bench_real_text.py``: its short-segment set and the counts it reports."""

from __future__ import annotations

import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
bench = importlib.import_module("bench_real_text")


def test_the_short_segment_set_is_126_distinct_sources_with_references():
    sources, references = bench.read_short_segments()
    assert len(sources) == len(references) == 126
    assert len(set(sources)) == 126 and all(references)
    assert all(len(s.split()) <= 4 for s in sources)  # short segments, not sentences


def test_repetitions_the_reference_lacks_are_counted():
    assert bench.repeats("天气 天气 天气。", "天气")
    assert bench.repeats("阿尔尔尔尔尔斯", "火车站在哪里？")
    assert bench.repeats("你好你好", "你好")
    assert not bench.repeats("你好", "你好")
    assert not bench.repeats("谢谢谢谢", "谢谢谢谢")  # the reference has it too
    assert not bench.repeats("常常去", "常常去")


def test_the_figures_count_added_stops_empty_outputs_and_exact_matches():
    sources = ["Hello", "Delete", "Sign in", "Where is it?"]
    outputs = ["你好。", "删除", "", "它在哪里？"]
    references = ["你好", "删除", "登录", "它在哪里？"]
    figures = bench.short_segment_figures(sources, outputs, references)
    assert figures["added_end_stop"] == 1  # "Where is it?" has its own
    assert figures["empty"] == 1 and figures["exact"] == 2
    assert figures["repeating"] == 0 and figures["without_repetition_pct"] == 100.0
