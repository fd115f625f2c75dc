"""Properties of the full Transformer: tying, parameter count, causality, padding, cache."""

import pytest
import torch

from seq2seq import ModelConfig, Transformer
from seq2seq.attention import padding_mask
from seq2seq.config import paper_parameter_count
from tests.helpers import random_ids, tiny_config, tiny_model


@pytest.mark.parametrize(
    "overrides",
    [{}, {"norm_first": True}, {"decoder_only": True}, {"decoder_only": True, "norm_first": True}],
)
def test_parameter_count_matches_the_formula_for_a_tied_model(overrides):
    config = tiny_config(**overrides)
    assert Transformer(config).num_parameters() == paper_parameter_count(config)


def test_paper_base_and_big_parameter_counts():
    base = ModelConfig(vocab_size=37000)
    big = ModelConfig(vocab_size=37000, d_model=1024, n_heads=16, d_ff=4096, dropout=0.3)
    # Paper, Table 3: 65M (base) and 213M (big) with a 37k shared vocabulary.
    assert 60e6 < paper_parameter_count(base) < 66e6
    assert 205e6 < paper_parameter_count(big) < 215e6


def test_one_embedding_matrix_is_shared_and_tied():
    model = tiny_model()
    names = [n for n, p in model.named_parameters() if p.shape == model.embedding.weight.shape]
    assert names == ["embedding.weight"]
    states = torch.randn(1, 2, 32, dtype=torch.float64)
    assert torch.equal(model.project(states), states @ model.embedding.weight.T)


def test_changing_future_targets_leaves_past_logits_unchanged():
    model = tiny_model()
    src, tgt = random_ids(2, 7), random_ids(2, 8, seed=2)
    changed = tgt.clone()
    changed[:, 5:] = random_ids(2, 3, seed=3)
    a, b = model(src, tgt), model(src, changed)
    assert torch.allclose(a[:, :5], b[:, :5], atol=1e-12)
    assert not torch.allclose(a[:, 5:], b[:, 5:])


def test_padding_and_batching_leave_each_sentence_unchanged():
    model = tiny_model()
    short_src, long_src = random_ids(1, 4), random_ids(1, 9, seed=4)
    short_tgt, long_tgt = random_ids(1, 3, seed=5), random_ids(1, 6, seed=6)
    alone = model(short_src, short_tgt)
    src = torch.zeros(2, 9, dtype=torch.long)
    tgt = torch.zeros(2, 6, dtype=torch.long)
    src[0, :4], src[1] = short_src[0], long_src[0]
    tgt[0, :3], tgt[1] = short_tgt[0], long_tgt[0]
    together = model(src, tgt)
    assert torch.allclose(together[0, :3], alone[0], atol=1e-10)
    assert torch.allclose(together[1], model(long_src, long_tgt)[0], atol=1e-10)


@pytest.mark.parametrize("overrides", [{}, {"norm_first": True}, {"decoder_only": True}])
def test_cached_step_by_step_decoding_equals_full_recomputation(overrides):
    model = tiny_model(**overrides)
    src, tgt = random_ids(3, 6), random_ids(3, 10, seed=7)
    src[1, 4:] = 0
    if model.config.decoder_only:
        full, memory, mask = model(tgt), None, None
    else:
        full = model(src, tgt)
        memory, mask = model.encode(src), padding_mask(src, 0)
    cache = model.init_cache(3, 16, memory, mask)
    steps = [model.decode(tgt[:, t : t + 1], cache=cache) for t in range(4)]
    steps.append(model.decode(tgt[:, 4:], cache=cache))  # several positions at once
    assert cache.length == 10
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-10)


def test_cache_reorder_selects_rows():
    model = tiny_model()
    src, tgt = random_ids(3, 5), random_ids(3, 4, seed=8)
    cache = model.init_cache(3, 8, model.encode(src), padding_mask(src, 0))
    model.decode(tgt[:, :3], cache=cache)
    cache.reorder(torch.tensor([2, 2, 0]))
    got = model.decode(tgt[[2, 2, 0], 3:], cache=cache)
    expected = model(src[[2, 2, 0]], tgt[[2, 2, 0]])[:, 3:]
    assert torch.allclose(got, expected, atol=1e-10)


def test_beam_reorder_within_sentences_keeps_cross_attention_as_is():
    """Rows 0-1 are beams of sentence A, rows 2-3 of B: moving beams inside each sentence
    needs no cross-attention copy, and decoding continues as if from the reordered prefixes."""
    model = tiny_model()
    src = random_ids(2, 5).repeat_interleave(2, dim=0)  # (4, 5): A, A, B, B
    tgt = random_ids(4, 4, seed=8)
    cache = model.init_cache(4, 8, model.encode(src), padding_mask(src, 0))
    cross_before = cache.cross_k
    model.decode(tgt[:, :3], cache=cache)
    rows = torch.tensor([1, 1, 3, 2])
    cache.reorder(rows, cross=False)
    assert cache.cross_k is cross_before
    got = model.decode(tgt[rows, 3:], cache=cache)
    expected = model(src, tgt[rows])[:, 3:]
    assert torch.allclose(got, expected, atol=1e-10)


def test_decoder_only_model_has_no_encoder_or_cross_attention_and_is_causal():
    model = tiny_model(decoder_only=True)
    names = [n for n, _ in model.named_parameters()]
    assert model.encoder is None
    assert not any(n.startswith("encoder") or "cross_attn" in n or "norm2" in n for n in names)
    ids = random_ids(2, 9)
    changed = ids.clone()
    changed[:, 6:] = 5
    assert torch.allclose(model(ids)[:, :6], model(changed)[:, :6], atol=1e-12)
    with pytest.raises(RuntimeError, match="no encoder"):
        model.encode(ids)


def test_model_rejects_wrong_call_shapes_with_clear_errors():
    with pytest.raises(ValueError, match="needs model\\(src_ids, tgt_in_ids\\)"):
        tiny_model()(random_ids(1, 3))
    with pytest.raises(ValueError, match="max_positions"):
        tiny_model(max_positions=8)(random_ids(1, 3), random_ids(1, 9))


def test_beams_read_one_stored_copy_of_their_source():
    """init_cache(copies=k) stores each source's cross-attention keys/values once; its k rows
    decode exactly as k separately stored copies would, also after whole sentences leave."""
    model = tiny_model()
    src = random_ids(3, 5)
    src[1, 3:] = 0
    tgt = random_ids(6, 4, seed=8)
    shared = model.init_cache(6, 8, model.encode(src), padding_mask(src, 0), copies=2)
    repeated = src.repeat_interleave(2, dim=0)
    separate = model.init_cache(6, 8, model.encode(repeated), padding_mask(repeated, 0))
    assert shared.cross_k.shape[1] == 3 and separate.cross_k.shape[1] == 6
    for cache in (shared, separate):
        model.decode(tgt[:, :2], cache=cache)
        cache.reorder(torch.tensor([1, 0, 2, 2, 5, 4]), cross=False)  # beams within sentences
    got = model.decode(tgt[:, 2:3], cache=shared)
    assert torch.allclose(got, model.decode(tgt[:, 2:3], cache=separate), atol=1e-10)
    keep = torch.tensor([0, 1, 4, 5])  # sentence 1 finished: its two rows leave
    for cache in (shared, separate):
        cache.reorder(keep)
    assert shared.cross_k.shape[1] == 2 and shared.source_mask.shape[0] == 2
    got = model.decode(tgt[keep, 3:], cache=shared)
    assert torch.allclose(got, model.decode(tgt[keep, 3:], cache=separate), atol=1e-10)
    filled = slice(0, shared.length)  # past it the buffers are uninitialised (maybe NaN)
    before = shared.self_k[:, :, :, filled].clone()
    with pytest.raises(ValueError, match="rows together"):
        shared.reorder(torch.tensor([0, 2, 1, 3]))  # would split a sentence's rows
    assert torch.equal(shared.self_k[:, :, :, filled], before)  # refused before anything moved
