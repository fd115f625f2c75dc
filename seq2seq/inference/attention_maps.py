"""Attention probabilities of a forward pass, per layer, for pictures and inspection.

The model computes attention with ``scaled_dot_product_attention``, which returns no weights;
forward hooks see each attention module's inputs and ask the module for its probabilities
(``SelfAttention.weights`` / ``CrossAttention.weights``), so the model code stays as it is.
Call them on a model in eval mode (no dropout).
"""

from __future__ import annotations

import torch
from torch import Tensor

from seq2seq.model import Transformer


@torch.no_grad()
def cross_attention_maps(model: Transformer, src_ids: Tensor, tgt_in: Tensor) -> list[Tensor]:
    """Encoder-decoder: each decoder layer's cross-attention, [(B, H, T, S)] * layers."""
    if model.config.decoder_only:
        raise ValueError("a decoder-only model has no cross-attention; use self_attention_maps")
    modules = [layer.cross_attn for layer in model.decoder.layers]
    return _capture(
        modules, lambda m, args, kwargs: m.weights(*args, **kwargs), lambda: model(src_ids, tgt_in)
    )


@torch.no_grad()
def self_attention_maps(model: Transformer, token_ids: Tensor) -> list[Tensor]:
    """Decoder-only: each layer's (causal) self-attention, [(B, H, T, T)] * layers."""
    modules = [layer.self_attn for layer in model.decoder.layers]

    def weights(module, args, kwargs):
        kwargs = {k: v for k, v in kwargs.items() if k in ("mask", "causal", "rotary")}
        return module.weights(*args, **kwargs)

    return _capture(modules, weights, lambda: model(token_ids))


def _capture(modules, weights, run) -> list[Tensor]:
    maps: list[Tensor | None] = [None] * len(modules)

    def hook_for(index: int):
        def hook(module, args, kwargs, output):
            maps[index] = weights(module, args, kwargs)

        return hook

    hooks = [m.register_forward_hook(hook_for(i), with_kwargs=True) for i, m in enumerate(modules)]
    try:
        run()
    finally:
        for hook in hooks:
            hook.remove()
    return [m for m in maps if m is not None]
