"""The Translator over the Torch engine: batching never changes a translation, and a batch that
runs out of memory is split and retried (on the small fitted run, conftest's ``run``: slow)."""

import pytest
import torch

from helpers import synthetic_pairs
from seq2seq.translator import Translator


@pytest.mark.slow
def test_batching_does_not_change_translations(run):
    translator = Translator.from_checkpoint(run / "checkpoints" / "last.ckpt")
    lines = [en for en, _ in synthetic_pairs()[:40:3]]
    together = translator.translate(lines, beam_size=3, max_tokens=4000)
    alone = [translator.translate([line], beam_size=3)[0] for line in lines]
    tiny_batches = translator.translate(lines, beam_size=3, max_tokens=30)
    assert together == alone == tiny_batches


@pytest.mark.slow
def test_a_batch_out_of_memory_is_split_and_retried(run, monkeypatch, capsys):
    import seq2seq.translator as translator_module

    translator = Translator.from_checkpoint(run / "checkpoints" / "last.ckpt")
    lines = ["I will buy apples today.", "", "He should eat some fish.", "We can cook rice."] * 3
    expected = translator.translate(lines, beam_size=2)
    real = translator_module.translate_ids
    tried, done = [], []

    def small_memory(model, src, *args):  # as if the GPU held at most 2 sentences
        tried.append(src.shape[0])
        if src.shape[0] > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        done.append(src.shape[0])
        return real(model, src, *args)

    monkeypatch.setattr(translator_module, "translate_ids", small_memory)
    assert translator.translate(lines, beam_size=2) == expected
    assert tried[0] == 9 and sum(done) == 9 and max(done) <= 2  # 9 non-empty lines, split
    assert capsys.readouterr().err.count("ran out of memory and were split") == 1

    def no_memory(model, src, *args):
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    monkeypatch.setattr(translator_module, "translate_ids", no_memory)
    with pytest.raises(MemoryError, match="single sentence"):
        translator.translate(["I will buy apples today."])
