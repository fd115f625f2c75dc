"""Attention maps are the model's real attention: recomputed by hand from the modules' own
weights, they give the layers' outputs."""

import torch

from seq2seq.attention import merge_heads, split_heads
from seq2seq.inference.attention_maps import cross_attention_maps, self_attention_maps
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
