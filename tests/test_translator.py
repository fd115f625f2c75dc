"""The Translator over the Torch engine: batching never changes a translation, and a batch that
runs out of memory is split and retried (on the small fitted run, conftest's ``run``: slow);
``token_batches`` keeps every batch within its token budget."""

import pytest
import torch

from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.pieces import token_batches
from seq2seq.inference.translator import Translator
from tests.helpers import synthetic_pairs


@pytest.mark.slow
def test_batching_does_not_change_translations(run):
    translator = Translator.from_checkpoint(run / "checkpoints" / "last.ckpt")
    lines = [en for en, _ in synthetic_pairs()[:40:3]]
    together = translator.translate(lines, TranslateOptions(beam_size=3, max_tokens=4000))
    alone = [translator.translate([line], TranslateOptions(beam_size=3))[0] for line in lines]
    tiny_batches = translator.translate(lines, TranslateOptions(beam_size=3, max_tokens=30))
    assert together == alone == tiny_batches


@pytest.mark.slow
def test_a_batch_out_of_memory_is_split_and_retried(run, monkeypatch, capsys):
    import seq2seq.inference.engines as engines_module

    translator = Translator.from_checkpoint(run / "checkpoints" / "last.ckpt")
    lines = ["I will buy apples today.", "", "He should eat some fish.", "We can cook rice."] * 3
    expected = translator.translate(lines, TranslateOptions(beam_size=2))
    real = engines_module.translate_ids
    tried, done = [], []

    def small_memory(model, src, *args):  # as if the GPU held at most 2 sentences
        tried.append(src.shape[0])
        if src.shape[0] > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        done.append(src.shape[0])
        return real(model, src, *args)

    monkeypatch.setattr(engines_module, "translate_ids", small_memory)
    assert translator.translate(lines, TranslateOptions(beam_size=2)) == expected
    # 9 non-empty lines hold 3 distinct sentences, each decoded once: the batch of 3 is split
    assert tried[0] == 3 and sum(done) == 3 and max(done) <= 2
    assert capsys.readouterr().err.count("ran out of memory and were split") == 1

    def no_memory(model, src, *args):
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    monkeypatch.setattr(engines_module, "translate_ids", no_memory)
    with pytest.raises(MemoryError, match="single sentence"):
        translator.translate(["I will buy apples today."])


@pytest.mark.parametrize("extra", [0, 3])
def test_token_batches_cover_each_nonempty_input_once_longest_first_within_budget(extra):
    generator = torch.Generator().manual_seed(extra)
    lengths = torch.randint(0, 12, (60,), generator=generator).tolist() + [25]  # one too long
    encoded = [[5] * n for n in lengths]
    batches = list(token_batches(encoded, max_tokens=24, extra=extra))
    order = [i for batch in batches for i in batch]
    assert sorted(order) == [i for i, n in enumerate(lengths) if n > 0]  # empty ones skipped
    assert [lengths[i] for i in order] == sorted((n for n in lengths if n), reverse=True)
    for batch in batches:  # padded to the first (longest) row; a lone row may exceed it
        assert len(batch) == 1 or len(batch) * (lengths[batch[0]] + extra) <= 24
    assert batches[0] == [len(lengths) - 1]


def test_n_best_hypotheses_agree_with_translate_and_come_best_first(tmp_path):
    """``translate_n_best`` of whole lines (what a server returns with scores) ranks each
    line's n-best by score, its first is what ``translate`` writes, an empty line has one
    empty hypothesis, and beam 1 keeps exactly one hypothesis: greedy's."""
    from tests.helpers import tiny_checkpoint

    translator = Translator.from_checkpoint(tiny_checkpoint(tmp_path / "mt.ckpt"))
    lines = [en for en, _ in synthetic_pairs()[:12:4]] + [""]
    found = translator.translate_n_best(lines, TranslateOptions(beam_size=4, n_best=3, split=False))
    assert [len(hyps) for hyps in found] == [3, 3, 3, 1]
    assert (found[3][0].text, found[3][0].score) == ("", 0.0)
    for hyps in found[:3]:
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
    best = [h[0].text for h in found]  # decoded, then written on one line as translate does
    assert best == translator.translate(lines, TranslateOptions(beam_size=4))
    greedy = translator.translate_n_best(
        lines, TranslateOptions(beam_size=1, n_best=1, split=False)
    )
    assert [len(h) for h in greedy] == [1, 1, 1, 1]
    assert [h[0].text for h in greedy[:3]] == translator.translate(
        lines[:3], TranslateOptions(beam_size=1)
    )


@pytest.mark.parametrize("with_eos", [True, None])  # None: a checkpoint from before the key
def test_cut_sources_keep_their_eos_exactly_when_the_model_reads_one(tmp_path, capsys, with_eos):
    """An over-long line is cut to the model's positions; a long sentence without clause
    punctuation is decoded in windows; clauses are packed up to the limit. Each of these
    sources ends with the eos when the model was trained so, and only then."""
    from tests.helpers import tiny_checkpoint

    translator = Translator.from_checkpoint(
        tiny_checkpoint(tmp_path / "mt.ckpt", source_ends_with_eos=with_eos)
    )
    tokenizer, limit, eos = translator.tokenizer, translator.engine.source_limit(), 3
    words = " ".join(["tea"] * 300)
    full = tokenizer.encode(words)
    [ids] = translator.encode([words])
    assert ids == (full[: limit - 1] + [eos] if with_eos else full[:limit])
    assert "truncated 1 over-long input line(s)" in capsys.readouterr().err
    [windows] = translator.plan([words])
    assert len(windows) > 1 and all(len(piece.ids) <= limit for piece in windows)
    assert all((piece.ids[-1] == eos) == bool(with_eos) for piece in windows)
    assert [t for piece in windows for t in piece.ids if t != eos] == full
    # Clauses of 12 tokens: as many as fit, counting the source's one eos once.
    clause = "Tom will buy tea,"
    [packed] = translator.plan([" ".join([clause] * 60) + " today."])
    body = len(tokenizer.encode(clause))
    assert all(len(piece.ids) <= limit < len(piece.ids) + body for piece in packed[:-1])
    assert all((piece.ids[-1] == eos) == bool(with_eos) for piece in packed)
