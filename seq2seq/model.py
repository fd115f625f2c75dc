"""The Transformer of "Attention Is All You Need", and its decoder-only sibling.

Reading order follows the paper: embeddings (§3.4-3.5) -> encoder and decoder stacks (§3.1)
-> tied pre-softmax projection (§3.4). Model code imports only torch.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from seq2seq.attention import key_mask, padding_mask
from seq2seq.cache import KVCache
from seq2seq.config import ModelConfig
from seq2seq.embedding import (
    LearnedPositions,
    RotaryPositions,
    SharedEmbedding,
    SinusoidalPositions,
)
from seq2seq.layers import DecoderLayer, EncoderLayer, make_norm

Rotary = tuple[Tensor, Tensor]  # (cos, sin) of rotary position embedding


class Encoder(nn.Module):
    """A stack of N encoder layers (plus a final LayerNorm in the pre-LN variant)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_encoder_layers))
        # Post-LN layers already end in a LayerNorm; pre-LN needs one after the last residual.
        self.final_norm = make_norm(config) if config.norm_first else None

    def forward(
        self, x: Tensor, source_mask: Tensor | None, rotary: Rotary | None = None
    ) -> Tensor:
        """(B, S, d_model), key mask (B, 1, 1, S) -> (B, S, d_model)."""
        for layer in self.layers:
            x = layer(x, source_mask, rotary)
        return self.final_norm(x) if self.final_norm is not None else x


class Decoder(nn.Module):
    """A stack of N decoder layers; without cross-attention when decoder-only."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        cross = not config.decoder_only
        self.layers = nn.ModuleList(
            DecoderLayer(config, cross_attention=cross) for _ in range(config.n_decoder_layers)
        )
        self.final_norm = make_norm(config) if config.norm_first else None

    def forward(
        self,
        x: Tensor,
        memory_kv: list[tuple[Tensor, Tensor]] | None = None,
        memory_mask: Tensor | None = None,
        cache: KVCache | None = None,
        rotary: Rotary | None = None,
    ) -> Tensor:
        """(B, T, d_model) -> (B, T, d_model); memory_kv has one (k, v) pair per layer."""
        for index, layer in enumerate(self.layers):
            layer_cache = cache.layer(index) if cache is not None else None
            layer_memory = None
            if layer_cache is not None and layer_cache.cross_kv is not None:
                layer_memory = layer_cache.cross_kv
            elif memory_kv is not None:
                layer_memory = memory_kv[index]
            x = layer(x, layer_memory, memory_mask, layer_cache, rotary)
        return self.final_norm(x) if self.final_norm is not None else x


class Transformer(nn.Module):
    """Encoder-decoder Transformer with ONE embedding shared by source, target and output.

    Examples:
        >>> model = Transformer(ModelConfig(vocab_size=100, d_model=32, n_heads=4,
        ...     n_encoder_layers=2, n_decoder_layers=2, d_ff=64))
        >>> logits = model(src_ids, tgt_in_ids)          # (B, T, 100)
        >>> memory = model.encode(src_ids)               # (B, S, 32)

    With ``config.decoder_only`` there is no encoder and no cross-attention: ``model(ids)``
    returns next-token logits of a causal language model.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embedding = SharedEmbedding(
            config.vocab_size, config.d_model, config.pad_id, config.output_bias
        )
        # Absolute positions are added to the input; rotary ones turn queries and keys instead.
        self.positions: nn.Module | None = None
        self.rotary: RotaryPositions | None = None
        if config.positions == "sinusoidal":
            self.positions = SinusoidalPositions(config.max_positions, config.d_model)
        elif config.positions == "learned":
            self.positions = LearnedPositions(config.max_positions, config.d_model)
        else:
            self.rotary = RotaryPositions(config.max_positions, config.head_dim)
        self.embedding_dropout = nn.Dropout(config.dropout)
        self.encoder = None if config.decoder_only else Encoder(config)
        self.decoder = Decoder(config)

    # -- embeddings -----------------------------------------------------------------------

    def embed(self, token_ids: Tensor, positions: Tensor | None = None) -> Tensor:
        """(B, T) ids -> dropout(sqrt(d) * E[ids] + PE[positions]): (B, T, d_model).

        ``positions``: ids (T,) or (B, T); default 0 .. T-1. Rotary models add nothing here.
        """
        x = self.embedding(token_ids)
        if self.positions is not None:
            x = x + self.positions(self._default_positions(token_ids, positions))
        return self.embedding_dropout(x)

    def rotation(self, token_ids: Tensor, positions: Tensor | None = None) -> Rotary | None:
        """(cos, sin) for the self-attention of these tokens, or None without rotary positions."""
        if self.rotary is None:
            return None
        return self.rotary(self._default_positions(token_ids, positions))

    def _default_positions(self, token_ids: Tensor, positions: Tensor | None) -> Tensor:
        """0 .. T-1 unless given. Given positions (from the cache) are in range by
        construction; checking them would cost a device sync per decoding step on a GPU."""
        if positions is not None:
            return positions
        length, limit = token_ids.shape[1], self.config.max_positions
        if length > limit:
            raise ValueError(f"sequence of {length} positions exceeds max_positions ({limit})")
        return torch.arange(length, device=token_ids.device)

    # -- the paper's two halves --------------------------------------------------------------

    def encode(self, src_ids: Tensor) -> Tensor:
        """(B, S) source ids (right-padded with pad_id) -> memory (B, S, d_model)."""
        if self.encoder is None:
            raise RuntimeError("a decoder-only model has no encoder")
        mask = key_mask(padding_mask(src_ids, self.config.pad_id))
        return self.encoder(self.embed(src_ids), mask, self.rotation(src_ids))

    def decoder_states(
        self,
        tgt_ids: Tensor,
        memory: Tensor | None = None,
        source_mask: Tensor | None = None,
        cache: KVCache | None = None,
    ) -> Tensor:
        """Final decoder states before the output projection: (B, T, d_model).

        Args:
            tgt_ids: (B, T) target ids; with a cache, only the new positions.
            memory: (B, S, d_model) encoder output (ignored when the cache holds it).
            source_mask: (B, S) bool, True = real source token; None = all real.
            cache: incremental state from ``init_cache``; advanced by T positions.
        """
        positions = None
        if cache is not None:
            # A row that finished below another row's limit is still fed (padding) until the
            # search drops it; its outputs are ignored, so it may reuse the last position
            # rather than run off the end of the table.
            positions = cache.positions(tgt_ids.shape[1]).clamp(max=self.config.max_positions - 1)
        memory_kv = None
        if cache is not None and cache.source_mask is not None:
            source_mask = cache.source_mask
        if memory is not None and (cache is None or cache.cross_k is None):
            memory_kv = self.project_memory(memory)
        memory_mask = key_mask(source_mask) if source_mask is not None else None
        x = self.embed(tgt_ids, positions)
        rotary = self.rotation(tgt_ids, positions)
        states = self.decoder(x, memory_kv, memory_mask, cache, rotary)
        if cache is not None:
            cache.advance(tgt_ids.shape[1])
        return states

    def decode(
        self,
        tgt_ids: Tensor,
        memory: Tensor | None = None,
        source_mask: Tensor | None = None,
        cache: KVCache | None = None,
    ) -> Tensor:
        """Next-token logits (B, T, vocab); arguments as in ``decoder_states``."""
        return self.project(self.decoder_states(tgt_ids, memory, source_mask, cache))

    def project(self, states: Tensor) -> Tensor:
        """Pre-softmax projection through the shared embedding: (..., d) -> (..., vocab)."""
        return self.embedding.project(states)

    def projection_onto(self, columns: Tensor) -> Callable[[Tensor], Tensor]:
        """``project`` restricted to the vocabulary entries ``columns`` (U,): (..., d) ->
        (..., U), the same tied weight's rows gathered once (a lexical shortlist,
        ``seq2seq.decoding.shortlist``)."""
        return self.embedding.narrowed(columns)

    def forward(self, src_ids: Tensor, tgt_in_ids: Tensor | None = None) -> Tensor:
        """Teacher-forced logits (B, T, vocab).

        Encoder-decoder: ``model(src_ids, tgt_in_ids)``. Decoder-only: ``model(token_ids)``.
        """
        if self.config.decoder_only:
            if tgt_in_ids is not None:
                raise ValueError("a decoder-only model takes one sequence: model(token_ids)")
            return self.decode(src_ids)
        if tgt_in_ids is None:
            raise ValueError("an encoder-decoder model needs model(src_ids, tgt_in_ids)")
        memory = self.encode(src_ids)
        return self.decode(tgt_in_ids, memory, padding_mask(src_ids, self.config.pad_id))

    # -- incremental decoding ------------------------------------------------------------------

    def project_memory(self, memory: Tensor) -> list[tuple[Tensor, Tensor]]:
        """Cross-attention keys/values of every decoder layer: [(B, H, S, Dh)] * L."""
        return [layer.cross_attn.project_memory(memory) for layer in self.decoder.layers]

    def init_cache(
        self,
        n_rows: int,
        max_len: int,
        memory: Tensor | None = None,
        source_mask: Tensor | None = None,
        pad_left: Tensor | None = None,
        copies: int = 1,
    ) -> KVCache:
        """An empty KVCache for ``n_rows`` sequences of up to ``max_len`` target positions.

        Cross-attention keys/values are projected here, once per source.

        Args:
            n_rows: sequences decoded together (batch x beam).
            max_len: longest target the cache must hold.
            memory: (n_rows / copies, S, d_model) encoder output; None for a decoder-only model.
            source_mask: (n_rows / copies, S) bool, True = real source token.
            pad_left: (n_rows,) padding tokens before each row's prompt (decoder-only prompts
                of different lengths, left-padded); their slots are never attended to and
                positions count from each row's first real token.
            copies: rows per source (the beam), row ``i`` decoding source ``i // copies``:
                its keys/values are projected and stored once, and cross-attention reads
                them for the ``copies`` rows together.
        """
        reference = self.embedding.weight
        cross_kv = None if memory is None else self.project_memory(memory)  # L x (B, H, S, Dh)
        return KVCache.allocate(
            len(self.decoder.layers),
            n_rows,
            self.config.n_heads,
            self.config.head_dim,
            max_len,
            dtype=reference.dtype if memory is None else memory.dtype,
            device=reference.device,
            cross_kv=cross_kv,
            source_mask=None if memory is None else source_mask,  # no source, no source mask
            rows_per_source=copies,
            pad_left=pad_left,
        )

    def num_parameters(self) -> int:
        """Trainable parameters, counting the shared embedding once."""
        return sum(p.numel() for p in self.parameters())
