"""The incremental-decoding key/value cache: one explicit, typed object per search."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class KVCache:
    """Keys and values the decoder has already computed.

    Self-attention keys/values are preallocated for ``max_len`` steps and filled as decoding
    advances; cross-attention keys/values are projected ONCE from the encoder output.
    ``reorder`` keeps every row consistent when beam search reshuffles hypotheses.

    Shapes (L = decoder layers, N = rows being decoded, e.g. batch x beam, H = heads,
    Dh = head width, S = source length, r = ``rows_per_source``):
        self_k, self_v: (L, N, H, max_len, Dh)
        cross_k, cross_v: (L, N / r, H, S, Dh), or None for a decoder-only model: one copy
            per source, read by its r consecutive rows (the k beams of a sentence)
        source_mask: (N / r, S) bool, True = a real source token, or None
        pad_left: (N,) long, padding slots before each row's first token, or None when no row
            is left-padded (decoder-only prompts of different lengths are left-padded so that
            every row's next token goes into the same slot)
    """

    self_k: Tensor
    self_v: Tensor
    cross_k: Tensor | None = None
    cross_v: Tensor | None = None
    source_mask: Tensor | None = None
    pad_left: Tensor | None = None
    length: int = 0
    rows_per_source: int = 1

    @classmethod
    def empty(
        cls,
        n_layers: int,
        n_rows: int,
        n_heads: int,
        head_dim: int,
        max_len: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> KVCache:
        """A cache with room for ``max_len`` self-attention steps and no cross-attention yet."""
        shape = (n_layers, n_rows, n_heads, max_len, head_dim)
        return cls(
            self_k=torch.zeros(shape, dtype=dtype, device=device),
            self_v=torch.zeros(shape, dtype=dtype, device=device),
        )

    @property
    def max_len(self) -> int:
        return self.self_k.shape[3]

    @property
    def n_rows(self) -> int:
        return self.self_k.shape[1]

    def set_left_padding(self, pad_left: Tensor) -> None:
        """Declare that row i starts with ``pad_left[i]`` padding slots (before any decode)."""
        self.pad_left = pad_left

    @property
    def real_keys(self) -> Tensor | None:
        """(N, max_len) bool, True where a left-padded row's slot holds a real token; None
        when no row is left-padded. Derived from ``pad_left``, so it follows every reorder."""
        if self.pad_left is None:
            return None
        slots = torch.arange(self.max_len, device=self.pad_left.device)
        return slots[None, :] >= self.pad_left[:, None]

    def positions(self, n_new: int) -> Tensor:
        """Position ids of the next ``n_new`` tokens: (n_new,), or (N, n_new) when rows are
        left-padded (a row's first real token is position 0; padding slots get 0 too)."""
        device = self.self_k.device
        slots = torch.arange(self.length, self.length + n_new, device=device)
        if self.pad_left is None:
            return slots
        return (slots[None, :] - self.pad_left[:, None]).clamp(min=0)

    def layer(self, index: int) -> LayerCache:
        """The view one decoder layer reads and writes."""
        cross = None
        if self.cross_k is not None and self.cross_v is not None:
            cross = (self.cross_k[index], self.cross_v[index])
        return LayerCache(
            self.self_k[index], self.self_v[index], cross, self.length, self.real_keys
        )

    def advance(self, n_steps: int) -> None:
        """Mark ``n_steps`` more positions as filled (called once per decode call)."""
        self.length += n_steps

    def reorder(self, index: Tensor, *, cross: bool = True) -> None:
        """Select rows ``index`` (N',) of every tensor: one call after each beam step.

        With the row count unchanged (beam search), only the rows that change and only their
        ``length`` filled positions are copied, in place: the rest is rewritten before it is
        read, and copying the whole preallocated buffer would make every step cost O(max_len).
        ``cross=False`` leaves the cross-attention keys/values and source mask alone, which is
        right when rows only move among copies of the same source (the k beams of one
        sentence). Otherwise the sources follow the rows, which must then keep each source's
        ``rows_per_source`` rows together (as dropping a finished sentence's beams does).
        """
        cross = cross or index.shape[0] != self.n_rows  # a new row count: everything follows
        has_sources = self.cross_k is not None or self.source_mask is not None
        sources = self._source_index(index) if cross and has_sources else None
        if index.shape[0] == self.n_rows:
            # Only rows that take another row's state are written (beams that kept their
            # place, and finished sentences, cost nothing).
            moved = (index != torch.arange(self.n_rows, device=index.device)).nonzero()[:, 0]
            filled = slice(0, self.length)
            if moved.numel():
                source = index[moved]
                self.self_k[:, moved, :, filled] = self.self_k[:, source, :, filled]
                self.self_v[:, moved, :, filled] = self.self_v[:, source, :, filled]
                if self.pad_left is not None:
                    self.pad_left[moved] = self.pad_left[source]
        else:  # rows dropped or copied: new buffers, only the filled positions copied
            self.self_k = self._select_filled(self.self_k, index)
            self.self_v = self._select_filled(self.self_v, index)
            if self.pad_left is not None:
                self.pad_left = self.pad_left.index_select(0, index)
        if sources is None:
            return
        if self.cross_k is not None and self.cross_v is not None:
            self.cross_k = self.cross_k.index_select(1, sources)
            self.cross_v = self.cross_v.index_select(1, sources)
        if self.source_mask is not None:
            self.source_mask = self.source_mask.index_select(0, sources)

    def _source_index(self, index: Tensor) -> Tensor:
        """The sources of new rows ``index`` (N',): one per group of ``rows_per_source``."""
        per_source = self.rows_per_source
        if per_source == 1:
            return index
        if index.shape[0] % per_source == 0:
            groups = index.view(-1, per_source) // per_source  # (N' / r, r) source of each row
            if bool((groups == groups[:, :1]).all()):
                return groups[:, 0]
        raise ValueError(f"reorder must keep each source's {per_source} rows together")

    def _select_filled(self, buffer: Tensor, index: Tensor) -> Tensor:
        """(L, N, H, max_len, Dh) -> (L, N', H, max_len, Dh) with rows ``index`` filled up to
        ``length``; what lies beyond is written before it is ever read."""
        out = buffer.new_empty(buffer.shape[0], index.shape[0], *buffer.shape[2:])
        out[:, :, :, : self.length] = buffer[:, index, :, : self.length]
        return out


@dataclass
class LayerCache:
    """One layer's slice of a KVCache: buffers (N, H, max_len, Dh) filled up to ``start``;
    ``real_keys`` (N, max_len) marks the slots of left-padded rows that hold real tokens."""

    self_k: Tensor
    self_v: Tensor
    cross_kv: tuple[Tensor, Tensor] | None
    start: int
    real_keys: Tensor | None = None
