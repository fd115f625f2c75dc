"""Attention maps are the model's real attention: recomputed by hand from the modules' own
weights, they give the layers' outputs."""

import torch

from seq2seq.attention import merge_heads, split_heads
from seq2seq.inference.attention_maps import (
    cross_attention_maps,
    mean_cross_attention,
    self_attention_maps,
)
from tests.helpers import random_ids, tiny_model


def test_cross_attention_maps_reproduce_the_layer_output():
    model = tiny_model()
    src, tgt = random_ids(2, 6), random_ids(2, 4, seed=3)
    src[1, 4:] = 0
    maps = cross_attention_maps(model, src, tgt)
    assert len(maps) == 2 and maps[0].shape == (2, 4, 4, 6)
    assert torch.allclose(maps[0].sum(-1), torch.ones(2, 4, 4, dtype=torch.float64))
    assert (maps[0][1, :, :, 4:] == 0).all()  # padding gets no attention
    # Weights times values, through the output projection, is what the module computes.
    cross = model.decoder.layers[0].cross_attn
    x = torch.randn(2, 4, 32, dtype=torch.float64)
    k, v = cross.project_memory(model.encode(src))
    mask = (src != 0)[:, None, None, :]
    by_hand = cross.out_proj(merge_heads(cross.weights(x, (k, v), mask) @ v))
    assert torch.allclose(by_hand, cross(x, (k, v), mask), atol=1e-10)


def test_self_attention_maps_are_causal_and_match_the_module():
    model = tiny_model(decoder_only=True, positions="rope")
    ids = random_ids(1, 7)
    maps = self_attention_maps(model, ids)
    assert len(maps) == 2 and torch.equal(maps[0].triu(1), torch.zeros_like(maps[0]))
    attention = model.decoder.layers[0].self_attn
    x = torch.randn(1, 7, 32, dtype=torch.float64)
    rotary = model.rotation(ids)
    _, _, v = attention.qkv_proj(x).chunk(3, dim=-1)
    probabilities = attention.weights(x, causal=True, rotary=rotary)
    by_hand = attention.out_proj(merge_heads(probabilities @ split_heads(v, 4)))
    assert torch.allclose(by_hand, attention(x, causal=True, rotary=rotary), atol=1e-10)


def test_attention_of_many_pairs_in_padded_batches_is_each_pairs_alone():
    """``mean_cross_attention`` pads pairs of unlike lengths into shared passes; each pair's
    (T + 1, S) map is the one it gets alone, whatever the batches (several, or one)."""
    model = tiny_model()
    pairs = [
        (random_ids(1, s, seed=s)[0].tolist(), random_ids(1, t, seed=10 + t)[0].tolist())
        for s, t in ((6, 4), (2, 7), (9, 1), (3, 3), (6, 5))
    ]
    alone = [mean_cross_attention(model, [pair], 10_000)[0] for pair in pairs]
    for budget in (20, 10_000):  # a pass of two or three pairs; all in one pass
        together = mean_cross_attention(model, pairs, budget)
        for (source, output), mine, its in zip(pairs, together, alone, strict=True):
            assert mine.shape == (len(output) + 1, len(source))
            assert torch.allclose(mine, its, atol=1e-6)  # float64 maps, returned as float32
    # Alone, it is the mean over layers and heads of cross_attention_maps.
    source, output = pairs[0]
    tgt_in = torch.tensor([[model.config.bos_id, *output]])
    maps = cross_attention_maps(model, torch.tensor([source]), tgt_in)
    mean = torch.stack([m[0].mean(0) for m in maps]).mean(0)
    assert torch.allclose(mean.float(), alone[0], atol=1e-6)
