"""Encoder and decoder layers (paper §3.1), post-LN by default.

Post-LN, as in the paper: ``x = LayerNorm(x + Dropout(Sublayer(x)))``.
Pre-LN (``norm_first=True``): ``x = x + Dropout(Sublayer(LayerNorm(x)))``.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from seq2seq.attention import CrossAttention, SelfAttention
from seq2seq.cache import LayerCache
from seq2seq.config import ModelConfig

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2, applied at every position (§3.3)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: str) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        # Not in the paper (tensor2tensor and torch add it); off by default: dropout masks
        # over the wide hidden layer are a large share of a CPU training step.
        self.dropout = nn.Dropout(dropout)
        self.activation = _ACTIVATIONS[activation]

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, d_model) -> (B, T, d_model)."""
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped in a residual connection and LayerNorm."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d = config.d_model
        self.norm_first = config.norm_first
        self.self_attn = SelfAttention(d, config.n_heads, config.attention_dropout)
        self.feed_forward = FeedForward(
            d, config.d_ff, config.activation_dropout, config.activation
        )
        self.norm1 = nn.LayerNorm(d)
        self.norm2 = nn.LayerNorm(d)
        self.dropout1 = nn.Dropout(config.dropout)
        self.dropout2 = nn.Dropout(config.dropout)

    def forward(self, x: Tensor, source_mask: Tensor | None) -> Tensor:
        """(B, S, d_model), key mask (B, 1, 1, S) -> (B, S, d_model)."""
        if self.norm_first:
            x = x + self._self_attention_block(self.norm1(x), source_mask)
            x = x + self._feed_forward_block(self.norm2(x))
        else:
            x = self.norm1(x + self._self_attention_block(x, source_mask))
            x = self.norm2(x + self._feed_forward_block(x))
        return x

    def _self_attention_block(self, x: Tensor, mask: Tensor | None) -> Tensor:
        return self.dropout1(self.self_attn(x, mask=mask))

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
        self.self_attn = SelfAttention(d, config.n_heads, config.attention_dropout)
        self.norm1 = nn.LayerNorm(d)
        self.dropout1 = nn.Dropout(config.dropout)
        self.cross_attn: CrossAttention | None = None
        if cross_attention:
            self.cross_attn = CrossAttention(d, config.n_heads, config.attention_dropout)
            self.norm2 = nn.LayerNorm(d)
            self.dropout2 = nn.Dropout(config.dropout)
        self.feed_forward = FeedForward(
            d, config.d_ff, config.activation_dropout, config.activation
        )
        self.norm3 = nn.LayerNorm(d)
        self.dropout3 = nn.Dropout(config.dropout)

    def forward(
        self,
        x: Tensor,
        memory_kv: tuple[Tensor, Tensor] | None = None,
        memory_mask: Tensor | None = None,
        cache: LayerCache | None = None,
    ) -> Tensor:
        """One decoder layer.

        Args:
            x: (B, T, d_model) target-side states.
            memory_kv: cross-attention keys/values (B, H, S, Dh) from the encoder output.
            memory_mask: (B, 1, 1, S) bool, True = real source token.
            cache: incremental-decoding state of this layer, or None to process whole
                sequences with a causal mask.

        Returns:
            (B, T, d_model)
        """
        if self.norm_first:
            x = x + self._self_attention_block(self.norm1(x), cache)
            if self.cross_attn is not None:
                x = x + self._cross_attention_block(self.norm2(x), memory_kv, memory_mask)
            x = x + self._feed_forward_block(self.norm3(x))
        else:
            x = self.norm1(x + self._self_attention_block(x, cache))
            if self.cross_attn is not None:
                x = self.norm2(x + self._cross_attention_block(x, memory_kv, memory_mask))
            x = self.norm3(x + self._feed_forward_block(x))
        return x

    def _self_attention_block(self, x: Tensor, cache: LayerCache | None) -> Tensor:
        return self.dropout1(self.self_attn(x, causal=True, cache=cache))

    def _cross_attention_block(
        self, x: Tensor, memory_kv: tuple[Tensor, Tensor] | None, mask: Tensor | None
    ) -> Tensor:
        if memory_kv is None:
            raise ValueError("this decoder layer has cross-attention: pass the encoder memory")
        return self.dropout2(self.cross_attn(x, memory_kv, mask))

    def _feed_forward_block(self, x: Tensor) -> Tensor:
        return self.dropout3(self.feed_forward(x))
