"""``scripts/bench.py shortlist`` end to end on the small fitted run (conftest's ``run``): with a
shortlist of the whole vocabulary every engine's outputs and BLEU are those without it, and the
figures hold together."""

from __future__ import annotations

import importlib
import json

import pytest

from seq2seq.data.tokenizer import checkpoint_tokenizer
from seq2seq.decoding.shortlist import Shortlist

pytest.importorskip("ctranslate2")
pytestmark = pytest.mark.slow
bench = importlib.import_module("benchmarks.shortlist")


def test_a_whole_vocabulary_shortlist_changes_no_output_in_either_engine(run, tmp_path):
    checkpoint = run / "checkpoints" / "last.ckpt"
    tokenizer = checkpoint_tokenizer(checkpoint)
    whole = tmp_path / "whole.txt"
    Shortlist.full(tokenizer.vocab_size, tokenizer.eos_id).write(whole, tokenizer.id_to_piece)
    figures = tmp_path / "figures.json"
    options = ["--checkpoint", str(checkpoint), "--shortlist", str(whole), "--rounds", "1"]
    bench.main(
        [*options, "--sentences", "12", "--engines", "ours,ct2-fp32", "--json", str(figures)]
    )
    result = json.loads(figures.read_text(encoding="utf-8"))
    assert set(result["engines"]) == {"ours", "ct2-fp32"}
    for row in result["engines"].values():
        assert row["identical outputs"] == result["sentences"] == 12
        assert row["bleu change"] == 0.0 and row["speed-up"] > 0
    assert result["mean shortlist"]["sentence"] == tokenizer.vocab_size
