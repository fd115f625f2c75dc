"""Our layers against torch.nn's reference post-LN layers, weight for weight."""

import torch
from torch import nn

from helpers import tiny_config
from seq2seq.attention import attend, causal_mask, key_mask, step_attention
from seq2seq.layers import DecoderLayer, EncoderLayer

D, H, FF = 32, 4, 64


def _copy_self_attention(ours, theirs: nn.MultiheadAttention) -> None:
    ours.qkv_proj.weight.copy_(theirs.in_proj_weight)
    ours.qkv_proj.bias.copy_(theirs.in_proj_bias)
    ours.out_proj.load_state_dict(theirs.out_proj.state_dict())


def _copy_cross_attention(ours, theirs: nn.MultiheadAttention) -> None:
    ours.q_proj.weight.copy_(theirs.in_proj_weight[:D])
    ours.q_proj.bias.copy_(theirs.in_proj_bias[:D])
    ours.kv_proj.weight.copy_(theirs.in_proj_weight[D:])
    ours.kv_proj.bias.copy_(theirs.in_proj_bias[D:])
    ours.out_proj.load_state_dict(theirs.out_proj.state_dict())


def _copy_feed_forward(ours, theirs) -> None:
    ours.feed_forward.linear1.load_state_dict(theirs.linear1.state_dict())
    ours.feed_forward.linear2.load_state_dict(theirs.linear2.state_dict())


def _source_padding(batch: int, length: int) -> torch.Tensor:
    real = torch.ones(batch, length, dtype=torch.bool)
    real[0, length - 3 :] = False  # first sentence is 3 tokens shorter
    return real


@torch.no_grad()
def test_encoder_layer_matches_torch_post_ln_layer():
    torch.manual_seed(0)
    theirs = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True).eval()
    ours = EncoderLayer(tiny_config()).eval()
    _copy_self_attention(ours.self_attn, theirs.self_attn)
    _copy_feed_forward(ours, theirs)
    ours.norm1.load_state_dict(theirs.norm1.state_dict())
    ours.norm2.load_state_dict(theirs.norm2.state_dict())
    x = torch.randn(2, 9, D)
    real = _source_padding(2, 9)
    expected = theirs(x, src_key_padding_mask=~real)
    got = ours(x, key_mask(real))
    assert torch.allclose(got[real], expected[real], atol=1e-5)


@torch.no_grad()
def test_decoder_layer_matches_torch_post_ln_layer():
    torch.manual_seed(0)
    theirs = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True).eval()
    ours = DecoderLayer(tiny_config()).eval()
    _copy_self_attention(ours.self_attn, theirs.self_attn)
    _copy_cross_attention(ours.cross_attn, theirs.multihead_attn)
    _copy_feed_forward(ours, theirs)
    for i in (1, 2, 3):
        getattr(ours, f"norm{i}").load_state_dict(getattr(theirs, f"norm{i}").state_dict())
    tgt, memory = torch.randn(2, 6, D), torch.randn(2, 9, D)
    real = _source_padding(2, 9)
    expected = theirs(
        tgt,
        memory,
        tgt_mask=~causal_mask(6, 6),  # torch: True = blocked
        memory_key_padding_mask=~real,
    )
    got = ours(tgt, ours.cross_attn.project_memory(memory), key_mask(real))
    assert torch.allclose(got, expected, atol=1e-5)


def test_post_ln_places_layernorm_after_the_residual_sum():
    # With post-LN every layer output is normalised: per-position mean 0 and std 1
    # (LayerNorm starts with unit gain and zero bias).
    layer = EncoderLayer(tiny_config()).eval()
    out = layer(torch.randn(2, 5, D) * 10, None)
    assert torch.allclose(out.mean(-1), torch.zeros(2, 5), atol=1e-5)
    pre_ln = EncoderLayer(tiny_config(norm_first=True)).eval()
    assert not torch.allclose(pre_ln(torch.randn(2, 5, D) * 10, None).mean(-1), torch.zeros(2, 5))


def test_step_attention_equals_sdpa_with_and_without_masks():
    """A decoding step's attention (plain batched matmuls on the CPU) is SDPA's."""
    torch.manual_seed(0)
    q = torch.randn(6, 4, 1, 16)
    k, v = torch.randn(6, 4, 9, 16), torch.randn(6, 4, 9, 16)
    lengths = torch.tensor([9, 1, 4, 7, 9, 2])
    padding = key_mask(torch.arange(9)[None, :] < lengths[:, None])  # (6, 1, 1, 9)
    per_head = torch.rand(6, 4, 1, 9) > 0.5
    per_head[..., 0] = True  # no empty row
    for mask in (None, padding, per_head):
        expected = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        torch.testing.assert_close(attend(q, k, v, mask), expected, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(step_attention(q, k, v, mask), expected)
    # A row with every key masked gives zeros, as SDPA does (not NaN); additive float masks.
    nothing = padding.clone()
    nothing[1] = False
    torch.testing.assert_close(
        attend(q, k, v, nothing),
        nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=nothing),
    )
    assert attend(q, k, v, nothing)[1].abs().max() == 0
    additive = torch.zeros(6, 1, 1, 9).masked_fill(~padding, float("-inf"))
    torch.testing.assert_close(attend(q, k, v, additive), attend(q, k, v, padding))
    # A cache slice (strided keys/values) gives the same result as a contiguous copy.
    cache = torch.randn(2, 6, 4, 20, 16)
    sliced = attend(q, cache[0, :, :, :9], cache[1, :, :, :9], padding)
    contiguous = attend(
        q, cache[0, :, :, :9].contiguous(), cache[1, :, :, :9].contiguous(), padding
    )
    torch.testing.assert_close(sliced, contiguous, rtol=0, atol=0)
