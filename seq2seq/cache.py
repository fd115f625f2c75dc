"""The incremental-decoding key/value cache: one explicit, typed object per search."""

from __future__ import annotations

from collections.abc import Sequence
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
            every row's next token goes into the same slot; so are rows that ``join`` a cache
            filled further than theirs)

    The cache owns its tensors: ``allocate`` makes one, ``compact`` and ``join`` rebuild one
    for rows that leave and join a running search (continuous batching), and decoding fills
    and ``advance``s it.
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
    def allocate(
        cls,
        n_layers: int,
        n_rows: int,
        n_heads: int,
        head_dim: int,
        max_len: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
        cross_kv: Sequence[tuple[Tensor, Tensor]] | None = None,
        source_mask: Tensor | None = None,
        rows_per_source: int = 1,
        pad_left: Tensor | None = None,
    ) -> KVCache:
        """A cache with room for ``max_len`` self-attention steps, none filled yet.

        Args:
            cross_kv: every decoder layer's cross-attention keys and values, L x (N / r, H, S,
                Dh), projected once from the encoder output; None for a decoder-only model.
            source_mask: (N / r, S) bool, True = a real source token.
            rows_per_source: r, the rows that read one source (the beam).
            pad_left: (N,) padding slots before each row's first token, or None.
        """
        shape = (n_layers, n_rows, n_heads, max_len, head_dim)
        cross_k = cross_v = None
        if cross_kv is not None:
            keys, values = zip(*cross_kv, strict=True)
            cross_k, cross_v = torch.stack(keys), torch.stack(values)  # (L, N / r, H, S, Dh)
        return cls(
            self_k=torch.zeros(shape, dtype=dtype, device=device),
            self_v=torch.zeros(shape, dtype=dtype, device=device),
            cross_k=cross_k,
            cross_v=cross_v,
            source_mask=source_mask,
            pad_left=pad_left,
            rows_per_source=rows_per_source,
        )

    @property
    def max_len(self) -> int:
        return self.self_k.shape[3]

    @property
    def n_rows(self) -> int:
        return self.self_k.shape[1]

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
        if sources is not None:
            self.cross_k, self.cross_v, self.source_mask = self._select_sources(sources)

    def compact(self, rows: Tensor, shift: int) -> KVCache:
        """A new cache of rows ``rows`` (N',) alone, their filled slots moved ``shift`` left.

        The first ``shift`` slots must be padding in every row kept (``shift`` at most their
        ``pad_left``): no row reads them any more. The new buffers hold the filled slots and
        nothing else, (L, N', H, length - shift, Dh): ``join`` gives them room to go on. The
        sources follow the rows, which must keep each source's ``rows_per_source`` together.
        """
        pad_left = None if self.pad_left is None else self.pad_left[rows] - shift
        if shift and (pad_left is None or bool((pad_left < 0).any())):
            raise ValueError(f"a row kept has real tokens in the {shift} slots dropped")
        cross_k, cross_v, source_mask = self.cross_k, self.cross_v, self.source_mask
        if cross_k is not None or source_mask is not None:
            cross_k, cross_v, source_mask = self._select_sources(self._source_index(rows))
        filled = slice(shift, self.length)
        return KVCache(
            self_k=self.self_k[:, rows, :, filled],
            self_v=self.self_v[:, rows, :, filled],
            cross_k=cross_k,
            cross_v=cross_v,
            source_mask=source_mask,
            pad_left=pad_left,
            length=self.length - shift,
            rows_per_source=self.rows_per_source,
        )

    @classmethod
    def join(cls, parts: Sequence[KVCache], max_steps: Tensor) -> KVCache:
        """One cache of the rows of ``parts``, in order, all at the step of the furthest part.

        A part filled to fewer steps than the furthest gets that many more padding slots on the
        left of each row, so that every row's next token goes into the same slot: the result
        always has ``pad_left``. Sources are zero-padded to the widest (and masked).

        Args:
            parts: caches of the same layers, heads, dtype, device and ``rows_per_source``;
                all with cross-attention keys/values or none.
            max_steps: (N,) slots each row of the result may fill from its first real one (its
                length limit): the buffers get room for the row that reaches furthest.
        """
        first = parts[0]
        layers, _, heads, _, head_dim = first.self_k.shape
        length = max(part.length for part in parts)
        pad_left = torch.cat([part._left_padding() + (length - part.length) for part in parts])
        capacity = max(length, int((pad_left + max_steps.to(pad_left.device)).max()))
        self_k = first.self_k.new_zeros(layers, len(pad_left), heads, capacity, head_dim)
        self_v = torch.zeros_like(self_k)
        start = 0
        for part in parts:  # each part's filled slots end at the joined cache's step
            rows, slots = slice(start, start + part.n_rows), slice(length - part.length, length)
            self_k[:, rows, :, slots] = part.self_k[:, :, :, : part.length]
            self_v[:, rows, :, slots] = part.self_v[:, :, :, : part.length]
            start += part.n_rows
        cross_k, cross_v, source_mask = cls._join_sources(parts)
        return cls(
            self_k=self_k,
            self_v=self_v,
            cross_k=cross_k,
            cross_v=cross_v,
            source_mask=source_mask,
            pad_left=pad_left,
            length=length,
            rows_per_source=first.rows_per_source,
        )

    @staticmethod
    def _join_sources(
        parts: Sequence[KVCache],
    ) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        """The sources of ``parts`` one after another, zero-padded to the widest: cross_k and
        cross_v (L, sources, H, S, Dh) and source_mask (sources, S); all None without any."""
        sources = [part._sources() for part in parts if part.cross_k is not None]
        if not sources:
            return None, None, None
        if len(sources) < len(parts):
            raise ValueError("join: some parts have sources and some have none")
        layers, _, heads, _, head_dim = sources[0][0].shape
        count = sum(mask.shape[0] for _, _, mask in sources)
        width = max(mask.shape[1] for _, _, mask in sources)
        cross_k = sources[0][0].new_zeros(layers, count, heads, width, head_dim)
        cross_v = torch.zeros_like(cross_k)
        source_mask = torch.zeros(count, width, dtype=torch.bool, device=cross_k.device)
        start = 0
        for keys, values, mask in sources:
            n, s = mask.shape
            cross_k[:, start : start + n, :, :s] = keys
            cross_v[:, start : start + n, :, :s] = values
            source_mask[start : start + n, :s] = mask
            start += n
        return cross_k, cross_v, source_mask

    def _sources(self) -> tuple[Tensor, Tensor, Tensor]:
        """cross_k, cross_v (L, N / r, H, S, Dh) and source_mask (N / r, S), all True where
        the cache has no mask; only for a cache with cross-attention keys/values."""
        if self.cross_k is None or self.cross_v is None:
            raise ValueError("this cache has no cross-attention keys/values")
        mask = self.source_mask
        if mask is None:
            mask = torch.ones(
                self.cross_k.shape[1],
                self.cross_k.shape[3],
                dtype=torch.bool,
                device=self.cross_k.device,
            )
        return self.cross_k, self.cross_v, mask

    def _left_padding(self) -> Tensor:
        """(N,) long: ``pad_left``, or zeros when no row is left-padded."""
        if self.pad_left is not None:
            return self.pad_left
        return torch.zeros(self.n_rows, dtype=torch.long, device=self.self_k.device)

    def _select_sources(
        self, sources: Tensor
    ) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        """cross_k, cross_v and source_mask of sources ``sources`` (S',) (None stays None)."""
        cross_k, cross_v, mask = self.cross_k, self.cross_v, self.source_mask
        if cross_k is not None and cross_v is not None:
            cross_k, cross_v = cross_k.index_select(1, sources), cross_v.index_select(1, sources)
        if mask is not None:
            mask = mask.index_select(0, sources)
        return cross_k, cross_v, mask

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
