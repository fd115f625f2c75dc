"""Multi-head scaled dot-product attention (paper §3.2).

Mask convention, used everywhere in this package: a bool tensor where True means "may attend",
exactly as ``torch.nn.functional.scaled_dot_product_attention`` takes it. Masks broadcast to
(B, H, T_query, T_key); a key-padding mask is therefore shaped (B, 1, 1, T_key).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seq2seq.cache import LayerCache


def padding_mask(token_ids: Tensor, pad_id: int) -> Tensor:
    """(B, T) ids -> (B, T) bool, True where the token is real."""
    return token_ids != pad_id


def key_mask(real_tokens: Tensor) -> Tensor:
    """(B, T_key) bool -> (B, 1, 1, T_key): broadcast over heads and queries."""
    return real_tokens[:, None, None, :]


def causal_mask(n_queries: int, n_keys: int, device: torch.device | None = None) -> Tensor:
    """(T_q, T_k) bool, query i (the last T_q of T_k positions) sees keys j <= its position."""
    offset = n_keys - n_queries
    rows = torch.arange(n_queries, device=device)[:, None] + offset
    return torch.arange(n_keys, device=device)[None, :] <= rows


def apply_rotary(x: Tensor, rotary: tuple[Tensor, Tensor]) -> Tensor:
    """Rotate dimension pairs (i, i + Dh/2) of (B, H, T, Dh) queries or keys by their angles.

    ``rotary`` is (cos, sin) from ``RotaryPositions``, broadcastable to (B, H, T, Dh/2).
    """
    cos, sin = rotary
    first, second = x.chunk(2, dim=-1)
    return torch.cat((first * cos - second * sin, first * sin + second * cos), dim=-1)


def attention_probabilities(q: Tensor, k: Tensor, mask: Tensor | None) -> Tensor:
    """softmax(q k^T / sqrt(d_k)) with ``mask`` (bool, True = may attend; or additive float):
    what SDPA computes internally and does not return. (B, H, T, Dh), (B, H, S, Dh) ->
    (B, H, T, S). A row with every key masked is zeros, as SDPA gives, not NaN."""
    scores = (q @ k.transpose(-1, -2)).mul_(q.shape[-1] ** -0.5)
    if mask is not None and mask.dtype == torch.bool:
        scores.masked_fill_(~mask, float("-inf"))
    elif mask is not None:
        scores.add_(mask)
    probs = scores.softmax(dim=-1)
    # (Not in place: softmax's backward needs its output.)
    return probs if mask is None else probs.nan_to_num(0.0)


STEP_QUERIES = 16  # at most this many queries per row and head take the matmul path


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
) -> Tensor:
    """softmax(q k^T / sqrt(d_k)) v: (B, H, T, Dh), (B, H, S, Dh) x 2 -> (B, H, T, Dh).

    ``scaled_dot_product_attention`` (fused, memory-efficient), except for a decoding step on
    the CPU (a query per row and head, or the k queries of a sentence's beams), where two
    batched matmuls were 1.4-2x faster here: SDPA's CPU kernel works in blocks of queries and
    converts the mask on every call.
    """
    few_queries = q.shape[2] <= STEP_QUERIES and not (is_causal and k.shape[2] > 1)
    if few_queries and dropout_p == 0.0 and q.device.type == "cpu":
        return step_attention(q, k, v, mask)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal
    )


def step_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    """Attention of a few queries per row and head, as batched matmuls: (B, H, T, Dh),
    (B, H, S, Dh) x 2, mask broadcastable to (B, H, T, S) -> (B, H, T, Dh)."""
    return attention_probabilities(q, k, mask) @ v


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """(B, T, d_model) -> (B, H, T, Dh)."""
    batch, length, width = x.shape
    return x.view(batch, length, n_heads, width // n_heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """(B, H, T, Dh) -> (B, T, d_model)."""
    batch, heads, length, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * head_dim)


class MultiHead(nn.Module):
    """What self- and cross-attention share: the head count and the dropout on the attention
    probabilities, applied in training only. Its subclasses hold the projections."""

    def __init__(self, n_heads: int, attention_dropout: float) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.attention_dropout = attention_dropout

    @property
    def dropout_now(self) -> float:
        return self.attention_dropout if self.training else 0.0


class SelfAttention(MultiHead):
    """Multi-head self-attention with one fused Q/K/V projection.

    Q, K and V come from the same input, so one (d, 3d) matmul replaces three (d, d) ones.
    """

    def __init__(
        self, d_model: int, n_heads: int, attention_dropout: float = 0.0, bias: bool = True
    ) -> None:
        super().__init__(n_heads, attention_dropout)
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        causal: bool = False,
        cache: LayerCache | None = None,
        rotary: tuple[Tensor, Tensor] | None = None,
    ) -> Tensor:
        """Attend each position of ``x`` to the others.

        Args:
            x: (B, T, d_model) queries, keys and values.
            mask: bool, broadcastable to (B, H, T, T), True = may attend; or None.
            causal: position i attends only to positions <= i.
            cache: when decoding incrementally, keys/values of earlier steps; the new ones
                are written into it at ``cache.start``. Implies causal attention.
            rotary: (cos, sin) of the positions of ``x`` for rotary position embedding.

        Returns:
            (B, T, d_model)
        """
        q, k, v = self.qkv_proj(x).chunk(3, dim=-1)
        q, k, v = (split_heads(t, self.n_heads) for t in (q, k, v))  # (B, H, T, Dh)
        if rotary is not None:
            q, k = apply_rotary(q, rotary), apply_rotary(k, rotary)
        if cache is not None:
            k, v = self._extend_cache(cache, k, v)
            mask = self._cache_mask(cache, q.shape[2], k.shape[2], x.device)
            causal = False
        out = attend(q, k, v, mask, self.dropout_now, is_causal=causal and mask is None)
        return self.out_proj(merge_heads(out))

    @torch.no_grad()
    def weights(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        causal: bool = False,
        rotary: tuple[Tensor, Tensor] | None = None,
    ) -> Tensor:
        """The attention probabilities of ``forward`` (no cache): (B, H, T, T)."""
        q, k, _ = self.qkv_proj(x).chunk(3, dim=-1)
        q, k = split_heads(q, self.n_heads), split_heads(k, self.n_heads)
        if rotary is not None:
            q, k = apply_rotary(q, rotary), apply_rotary(k, rotary)
        if causal:
            order = causal_mask(x.shape[1], x.shape[1], device=x.device)
            mask = order if mask is None else mask & order
        return attention_probabilities(q, k, mask)

    @staticmethod
    def _cache_mask(
        cache: LayerCache, n_queries: int, n_keys: int, device: torch.device
    ) -> Tensor | None:
        """Mask of the new queries over all cached keys: (N, 1, T, K), (T, K) or None.

        Several new positions at once are causal among themselves. Left-padded prompts
        (``cache.real_keys``) hide their padding; a padding query still sees itself, so that
        no row of the softmax is empty (an empty row is NaN, and NaN values would poison the
        cache even at weight 0).
        """
        mask = causal_mask(n_queries, n_keys, device=device) if n_queries > 1 else None
        if cache.real_keys is None:
            return mask
        itself = torch.zeros(n_queries, n_keys, dtype=torch.bool, device=device)  # (T, K)
        itself[:, n_keys - n_queries :] = torch.eye(n_queries, dtype=torch.bool, device=device)
        visible = cache.real_keys[:, None, None, :n_keys] | itself  # (N, 1, T, K)
        return visible if mask is None else visible & mask

    @staticmethod
    def _extend_cache(cache: LayerCache, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write new (B, H, T, Dh) keys/values at ``start``; return all keys/values so far."""
        end = cache.start + k.shape[2]
        if end > cache.self_k.shape[2]:
            raise ValueError(f"KVCache is full: {end} positions > max_len {cache.self_k.shape[2]}")
        cache.self_k[:, :, cache.start : end] = k
        cache.self_v[:, :, cache.start : end] = v
        return cache.self_k[:, :, :end], cache.self_v[:, :, :end]


class CrossAttention(MultiHead):
    """Multi-head attention from decoder queries to encoder keys/values (the memory)."""

    def __init__(
        self, d_model: int, n_heads: int, attention_dropout: float = 0.0, bias: bool = True
    ) -> None:
        super().__init__(n_heads, attention_dropout)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.kv_proj = nn.Linear(d_model, 2 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def queries(self, x: Tensor, n_sources: int) -> Tensor:
        """(N, T, d_model) -> (n_sources, H, N / n_sources * T, Dh): the queries of the rows
        that read one source (the k beams of a sentence, rows ``b*k .. b*k + k-1``) side by
        side, so its keys/values are read once for all of them."""
        q = split_heads(self.q_proj(x), self.n_heads)  # (N, H, T, Dh)
        rows, heads, length, head_dim = q.shape
        if rows == n_sources:
            return q
        per_source = rows // n_sources
        q = q.view(n_sources, per_source, heads, length, head_dim).transpose(1, 2)
        return q.reshape(n_sources, heads, per_source * length, head_dim)

    @staticmethod
    def rows_of(out: Tensor, n_rows: int) -> Tensor:
        """Inverse of ``queries``' grouping: (B, H, r * T, X) -> (N = B * r, H, T, X)."""
        n_sources, heads, queries, width = out.shape
        if n_sources == n_rows:
            return out
        per_source = n_rows // n_sources
        out = out.view(n_sources, heads, per_source, queries // per_source, width)
        return out.transpose(1, 2).reshape(n_rows, heads, queries // per_source, width)

    def project_memory(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """(B, S, d_model) encoder output -> keys, values (B, H, S, Dh), once per source."""
        k, v = self.kv_proj(memory).chunk(2, dim=-1)
        return split_heads(k, self.n_heads), split_heads(v, self.n_heads)

    @torch.no_grad()
    def weights(
        self, x: Tensor, memory_kv: tuple[Tensor, Tensor], memory_mask: Tensor | None = None
    ) -> Tensor:
        """The attention probabilities of ``forward``: (N, H, T, S)."""
        q = self.queries(x, memory_kv[0].shape[0])
        return self.rows_of(attention_probabilities(q, memory_kv[0], memory_mask), x.shape[0])

    def forward(
        self,
        x: Tensor,
        memory_kv: tuple[Tensor, Tensor],
        memory_mask: Tensor | None = None,
    ) -> Tensor:
        """(N, T, d_model) queries over projected memory (B, H, S, Dh) -> (N, T, d_model).

        N is B, or a multiple of B when several consecutive rows read each source (beams).
        ``memory_mask`` is (B, 1, 1, S) bool, True = real source token.
        """
        k, v = memory_kv
        q = self.queries(x, k.shape[0])  # (B, H, N / B * T, Dh)
        out = attend(q, k, v, memory_mask, self.dropout_now)
        return self.out_proj(merge_heads(self.rows_of(out, x.shape[0])))
