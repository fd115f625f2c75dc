"""Attention: a decoding step's attention equals SDPA's, and rotary positions make attention
scores depend on relative positions only."""

import torch
from torch import nn

from seq2seq.attention import apply_rotary, attend, key_mask, step_attention
from seq2seq.embedding import RotaryPositions


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


def test_rotary_attention_scores_depend_only_on_relative_position():
    rotary = RotaryPositions(max_positions=200, head_dim=8).double()
    q, k = torch.randn(1, 2, 10, 8, dtype=torch.float64), torch.randn(1, 2, 10, 8).double()
    positions = torch.arange(10)

    def scores(offset: int) -> torch.Tensor:
        cos_sin = rotary(positions + offset)
        return apply_rotary(q, cos_sin) @ apply_rotary(k, cos_sin).transpose(-1, -2)

    assert torch.allclose(scores(0), scores(37), atol=1e-5)  # float32 tables
    assert torch.allclose(scores(0), scores(150), atol=1e-5)
    assert not torch.allclose(scores(0), q @ k.transpose(-1, -2))  # it does rotate
    # Each pair of dimensions is a plane rotation: lengths are kept.
    rotated = apply_rotary(q, rotary(positions + 5))
    assert torch.allclose(rotated.norm(dim=-1), q.norm(dim=-1), atol=1e-5)
