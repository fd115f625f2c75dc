"""``scripts/bench.py repetition``: its settings, and that its counts are what it says."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from seq2seq.decoding.repetition import text_loops

ROOT = Path(__file__).resolve().parents[1]
bench = importlib.import_module("benchmarks.repetition")


def test_settings_read_as_search_changes():
    assert bench.parse_setting("default") is None
    assert bench.parse_setting("off") == {
        "max_repeats": 0,
        "no_repeat_ngram_size": 0,
        "repetition_penalty": 1.0,
    }
    assert bench.parse_setting("no_repeat_ngram_size=3+max_repeats=0") == {
        "no_repeat_ngram_size": 3,
        "max_repeats": 0,
    }
    with pytest.raises(SystemExit, match="length_penalty"):
        bench.parse_setting("length_penalty=1")


def test_loops_are_runs_of_one_to_four_characters_four_times():
    assert text_loops("如如如如凯特。") == ["如如如如"]
    assert text_loops("洪水洪水洪水洪水") == ["洪水洪水洪水洪水"]
    assert text_loops("谢谢你，一个一个来，哈哈哈。") == []
    assert text_loops("1000000 ....") == []  # no letter in the unit


def looping_checkpoint(path: Path) -> Path:
    """A tiny checkpoint whose decoder always says 我 most: its last layer's output is 我's
    embedding whatever it reads (norm3 weight 0, bias = that embedding), so the tied output
    projection ranks 我 first at every step."""
    import torch

    from seq2seq.inference.translator import Translator
    from tests.helpers import tiny_checkpoint

    tiny_checkpoint(path)
    piece = Translator.from_checkpoint(path).tokenizer.piece_to_id("我")
    checkpoint = torch.load(path, weights_only=False)
    weights = checkpoint["state_dict"]
    last = max(k for k in weights if k.startswith("model.decoder.layers.") and "norm3" in k)
    layer = last.rsplit(".", 1)[0]  # model.decoder.layers.N.norm3
    weights[f"{layer}.weight"] = torch.zeros_like(weights[f"{layer}.weight"])
    weights[f"{layer}.bias"] = 5 * weights["model.embedding.weight"][piece].clone()
    torch.save(checkpoint, path)
    return path


@pytest.mark.slow
def test_the_bench_counts_the_loops_of_each_setting(tmp_path, monkeypatch):
    checkpoint = looping_checkpoint(tmp_path / "mt.ckpt")  # 我我我我...
    src, ref, out = tmp_path / "test.en", tmp_path / "test.zh", tmp_path / "loops.json"
    src.write_text("Tom will buy apples today.\nWe can see the dog.\n", encoding="utf-8")
    ref.write_text("汤姆今天会买苹果。\n我们能看见狗。\n", encoding="utf-8")
    documents = ROOT / "tests" / "data" / "documents"
    args = ["--checkpoint", str(checkpoint), "--settings", "off,default", "--rounds", "1"]
    args += ["--documents", str(documents), "--beam-size", "2", "--json", str(out)]
    args += ["--src", str(src), "--ref", str(ref)]
    assert bench.main(args) == 0
    results = json.loads(out.read_text(encoding="utf-8"))
    assert results["off"]["loops"] > 0 and results["default"]["loops"] == 0
    assert results["off"]["document_lines"] > 0
    # Sentences are guarded one by one: two joined (我我 + 我我) can still make a loop.
    assert results["default"]["document_loops"] < results["off"]["document_loops"]
    assert all(text_loops(example) for example in results["off"]["examples"])
