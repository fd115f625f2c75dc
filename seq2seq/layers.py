"""Encoder and decoder layers (paper §3.1), post-LN by default.

Post-LN, as in the paper: ``x = LayerNorm(x + Dropout(Sublayer(x)))``.
Pre-LN (``norm_first=True``): ``x = x + Dropout(Sublayer(LayerNorm(x)))``.
The norm is LayerNorm or RMSNorm, the feed-forward ReLU, GELU, swish or SwiGLU
(``ModelConfig``).
"""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seq2seq.attention import CrossAttention, SelfAttention
from seq2seq.cache import LayerCache
from seq2seq.config import ModelConfig

# ReLU overwrites the fresh (B, T, d_ff) output of the first matmul instead of allocating a
# second one (its backward needs only its own output); SiLU's backward needs its input.
_ACTIVATIONS = {
    "relu": partial(F.relu, inplace=True),
    "gelu": F.gelu,
    "swish": F.silu,
    "swiglu": F.silu,
}


class RMSNorm(nn.Module):
    """RMSNorm(x) = x / sqrt(mean(x^2) + eps) * g (Zhang & Sennrich 2019): LayerNorm without
    the centring and the bias."""

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: Tensor) -> Tensor:
        """(..., d_model) -> (..., d_model); the statistic in float32 even under autocast."""
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def make_norm(config: ModelConfig) -> nn.Module:
    """The normalisation layer the config names (the paper's LayerNorm by default)."""
    if config.norm == "rmsnorm":
        return RMSNorm(config.d_model)
    return nn.LayerNorm(config.d_model, bias=config.bias)


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2, applied at every position (§3.3).

    With ``swiglu`` a third matrix gates the hidden layer: ``W2(silu(x W1) * (x W3))``
    (Shazeer 2020, Llama's w1/w2/w3).
    """

    def __init__(
        self, d_model: int, d_ff: int, dropout: float, activation: str, bias: bool = True
    ) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)
        self.linear3 = nn.Linear(d_model, d_ff, bias=bias) if activation == "swiglu" else None
        # Not in the paper (tensor2tensor and torch add it); off by default: dropout masks
        # over the wide hidden layer are a large share of a CPU training step.
        self.dropout = nn.Dropout(dropout)
        self.activation = _ACTIVATIONS[activation]

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, d_model) -> (B, T, d_model)."""
        hidden = self.activation(self.linear1(x))  # (B, T, d_ff)
        if self.linear3 is not None:
            hidden = hidden * self.linear3(x)
        return self.linear2(self.dropout(hidden))


def make_feed_forward(config: ModelConfig) -> FeedForward:
    return FeedForward(
        config.d_model, config.d_ff, config.activation_dropout, config.activation, config.bias
    )


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped in a residual connection and LayerNorm."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d = config.d_model
        self.norm_first = config.norm_first
        self.self_attn = SelfAttention(d, config.n_heads, config.attention_dropout, config.bias)
        self.feed_forward = make_feed_forward(config)
        self.norm1 = make_norm(config)
        self.norm2 = make_norm(config)
        self.dropout1 = nn.Dropout(config.dropout)
        self.dropout2 = nn.Dropout(config.dropout)

    def forward(
        self, x: Tensor, source_mask: Tensor | None, rotary: tuple[Tensor, Tensor] | None = None
    ) -> Tensor:
        """(B, S, d_model), key mask (B, 1, 1, S) -> (B, S, d_model); ``rotary`` = (cos, sin)
        of the source positions when positions are rotary."""
        if self.norm_first:
            x = x + self._self_attention_block(self.norm1(x), source_mask, rotary)
            x = x + self._feed_forward_block(self.norm2(x))
        else:
            x = self.norm1(x + self._self_attention_block(x, source_mask, rotary))
            x = self.norm2(x + self._feed_forward_block(x))
        return x

    def _self_attention_block(self, x: Tensor, mask: Tensor | None, rotary) -> Tensor:
        return self.dropout1(self.self_attn(x, mask=mask, rotary=rotary))

    def _feed_forward_block(self, x: Tensor) -> Tensor:
        return self.dropout2(self.feed_forward(x))


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the memory, then feed-forward.

    A decoder-only model builds this layer with ``cross_attention=False``: the cross-attention
    sublayer and its LayerNorm then do not exist at all.
    """

    def __init__(self, config: ModelConfig, cross_attention: bool = True) -> None:
        super().__init__()
        d = config.d_model
        self.norm_first = config.norm_first
        self.self_attn = SelfAttention(d, config.n_heads, config.attention_dropout, config.bias)
        self.norm1 = make_norm(config)
        self.dropout1 = nn.Dropout(config.dropout)
        self.cross_attn: CrossAttention | None = None
        if cross_attention:
            self.cross_attn = CrossAttention(
                d, config.n_heads, config.attention_dropout, config.bias
            )
            self.norm2 = make_norm(config)
            self.dropout2 = nn.Dropout(config.dropout)
        self.feed_forward = make_feed_forward(config)
        self.norm3 = make_norm(config)
        self.dropout3 = nn.Dropout(config.dropout)

    def forward(
        self,
        x: Tensor,
        memory_kv: tuple[Tensor, Tensor] | None = None,
        memory_mask: Tensor | None = None,
        cache: LayerCache | None = None,
        rotary: tuple[Tensor, Tensor] | None = None,
    ) -> Tensor:
        """One decoder layer.

        Args:
            x: (B, T, d_model) target-side states.
            memory_kv: cross-attention keys/values (B, H, S, Dh) from the encoder output.
            memory_mask: (B, 1, 1, S) bool, True = real source token.
            cache: incremental-decoding state of this layer, or None to process whole
                sequences with a causal mask.
            rotary: (cos, sin) of the target positions when positions are rotary.

        Returns:
            (B, T, d_model)
        """
        if self.norm_first:
            x = x + self._self_attention_block(self.norm1(x), cache, rotary)
            if self.cross_attn is not None:
                x = x + self._cross_attention_block(self.norm2(x), memory_kv, memory_mask)
            x = x + self._feed_forward_block(self.norm3(x))
        else:
            x = self.norm1(x + self._self_attention_block(x, cache, rotary))
            if self.cross_attn is not None:
                x = self.norm2(x + self._cross_attention_block(x, memory_kv, memory_mask))
            x = self.norm3(x + self._feed_forward_block(x))
        return x

    def _self_attention_block(self, x: Tensor, cache: LayerCache | None, rotary) -> Tensor:
        return self.dropout1(self.self_attn(x, causal=True, cache=cache, rotary=rotary))

    def _cross_attention_block(
        self, x: Tensor, memory_kv: tuple[Tensor, Tensor] | None, mask: Tensor | None
    ) -> Tensor:
        if memory_kv is None:
            raise ValueError("this decoder layer has cross-attention: pass the encoder memory")
        return self.dropout2(self.cross_attn(x, memory_kv, mask))

    def _feed_forward_block(self, x: Tensor) -> Tensor:
        return self.dropout3(self.feed_forward(x))
