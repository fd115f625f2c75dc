"""Small builders shared by the tests."""

from __future__ import annotations

import torch

from seq2seq import ModelConfig, Transformer


def tiny_config(**overrides) -> ModelConfig:
    """A model small enough to run hundreds of times per second on a CPU."""
    values = dict(
        vocab_size=40,
        d_model=32,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        d_ff=64,
        dropout=0.0,
        max_positions=128,
    )
    values.update(overrides)
    return ModelConfig(**values)


def tiny_model(seed: int = 0, **overrides) -> Transformer:
    """A tiny Transformer in eval mode, float64 so equality tests can be tight."""
    torch.manual_seed(seed)
    return Transformer(tiny_config(**overrides)).double().eval()


def random_ids(batch: int, length: int, vocab: int = 40, seed: int = 1) -> torch.Tensor:
    """Ids of ordinary tokens (>= 4: never pad, unk, bos or eos)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(4, vocab, (batch, length), generator=generator)
