"""Attention probabilities of a forward pass, per layer, for pictures and inspection.

The model computes attention with ``scaled_dot_product_attention``, which returns no weights;
forward hooks see each attention module's inputs and ask the module for its probabilities
(``SelfAttention.weights`` / ``CrossAttention.weights``), so the model code stays as it is.
Call them on a model in eval mode (no dropout).
"""

from __future__ import annotations

import torch
from torch import Tensor

from seq2seq.attention import padding_mask
from seq2seq.data.batching import pad_rows
from seq2seq.model import Transformer

Pair = tuple[list[int], list[int]]  # (source ids, output ids)


@torch.no_grad()
def cross_attention_maps(model: Transformer, src_ids: Tensor, tgt_in: Tensor) -> list[Tensor]:
    """Encoder-decoder: each decoder layer's cross-attention, [(B, H, T, S)] * layers."""
    if model.config.decoder_only:
        raise ValueError("a decoder-only model has no cross-attention; use self_attention_maps")
    modules = [layer.cross_attn for layer in model.decoder.layers]
    source_mask = padding_mask(src_ids, model.config.pad_id)
    # The decoder's states are enough: the hooks catch the weights, no logits are needed.
    run = lambda: model.decoder_states(tgt_in, model.encode(src_ids), source_mask)  # noqa: E731
    return _capture(modules, lambda m, args, kwargs: m.weights(*args, **kwargs), run)


@torch.no_grad()
def mean_cross_attention(model: Transformer, pairs: list[Pair], max_tokens: int) -> list[Tensor]:
    """For each (source, output) pair: the cross-attention of the output's tokens (then eos)
    over the source, mean over layers and heads, (T + 1, S), on the CPU. Pairs of like lengths
    share one padded forward pass of about ``max_tokens`` tokens (padding is masked in the
    source and causal in the output, so a pair's weights are those it has alone)."""
    config, device = model.config, model.embedding.weight.device
    order = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][0]), len(pairs[i][1])))
    found: list[Tensor | None] = [None] * len(pairs)
    start = 0
    while start < len(order):
        end, longest = start, 0
        while end < len(order):
            source, output = pairs[order[end]]
            longest = max(longest, len(source) + len(output) + 1)
            if end > start and longest * (end - start + 1) > max_tokens:
                break
            end += 1
        chosen = [pairs[i] for i in order[start:end]]
        src = pad_rows([s for s, _ in chosen], config.pad_id).to(device)
        tgt_in = pad_rows([[config.bos_id, *o] for _, o in chosen], config.pad_id).to(device)
        maps = cross_attention_maps(model, src, tgt_in)  # [(B, H, T, S)] * layers
        mean = torch.stack([m.float().mean(dim=1) for m in maps]).mean(dim=0).cpu()  # (B, T, S)
        for row, (i, (source, output)) in enumerate(zip(order[start:end], chosen, strict=True)):
            found[i] = mean[row, : len(output) + 1, : len(source)]
        start = end
    return found  # type: ignore[return-value]


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
