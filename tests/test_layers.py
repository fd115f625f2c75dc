"""Our layers against torch.nn's reference post-LN layers, weight for weight; RMSNorm against
its formula."""

import torch
from torch import nn

from seq2seq.attention import causal_mask, key_mask
from seq2seq.layers import DecoderLayer, EncoderLayer, RMSNorm
from tests.helpers import tiny_config

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


def _same_weights(ours_class, theirs_class, norms: int) -> tuple[nn.Module, nn.Module]:
    """Our layer and torch's, theirs' self-attention, feed-forward and norms copied to ours."""
    torch.manual_seed(0)
    theirs = theirs_class(D, H, FF, dropout=0.0, batch_first=True).eval()
    ours = ours_class(tiny_config()).eval()
    _copy_self_attention(ours.self_attn, theirs.self_attn)
    _copy_feed_forward(ours, theirs)
    for i in range(1, norms + 1):
        getattr(ours, f"norm{i}").load_state_dict(getattr(theirs, f"norm{i}").state_dict())
    return ours, theirs


@torch.no_grad()
def test_encoder_layer_matches_torch_post_ln_layer():
    ours, theirs = _same_weights(EncoderLayer, nn.TransformerEncoderLayer, norms=2)
    x = torch.randn(2, 9, D)
    real = _source_padding(2, 9)
    expected = theirs(x, src_key_padding_mask=~real)
    got = ours(x, key_mask(real))
    assert torch.allclose(got[real], expected[real], atol=1e-5)


@torch.no_grad()
def test_decoder_layer_matches_torch_post_ln_layer():
    ours, theirs = _same_weights(DecoderLayer, nn.TransformerDecoderLayer, norms=3)
    _copy_cross_attention(ours.cross_attn, theirs.multihead_attn)
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


def test_rmsnorm_matches_its_formula():
    norm = RMSNorm(6, eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(torch.arange(1.0, 7.0))
    x = torch.randn(3, 4, 6)
    rms = torch.sqrt((x**2).mean(dim=-1, keepdim=True) + 1e-6)
    assert torch.allclose(norm(x), x / rms * torch.arange(1.0, 7.0), atol=1e-6)
    # No centring: a constant vector keeps its sign and size (LayerNorm would zero it).
    assert torch.allclose(RMSNorm(6)(torch.full((6,), 3.0)), torch.ones(6), atol=1e-5)
