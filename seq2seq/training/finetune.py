"""Fine-tuning's start (``model.init_from``): a checkpoint's config, weights and tokenizer
taken over by ``TranslationModule``, the run's own config checked against them, and the rows
of the embedding that must stay as they were imported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from seq2seq.config import ModelConfig
from seq2seq.errors import ConfigError
from seq2seq.model import Transformer


def pretrained_model(
    path: str, given: ModelConfig, dropout: float | None = None
) -> tuple[ModelConfig, Transformer, Any]:
    """The config, model (training mode) and tokenizer of checkpoint ``path``, to fine-tune.

    The run's ``given`` config may only repeat the checkpoint's: a field that differs from
    both the checkpoint and the default is a one-line ``ConfigError``. ``vocab_size`` is the
    checkpoint's (the CLI links it from ``data.vocab_size``, which fine-tuning ignores).
    ``dropout`` replaces the checkpoint's residual/embedding dropout when given.
    """
    from seq2seq.inference.checkpoint import load_model

    if not Path(path).is_file():
        raise ConfigError(
            f"model.init_from: no checkpoint at {path} (give --model.init_from "
            "CKPT: one of ours, or one 'seq2seq import' wrote)"
        )
    loaded = load_model(path)
    config, default = loaded.model.config, ModelConfig()
    for field, value in given.to_dict().items():
        stored = getattr(config, field)
        if field == "vocab_size" or value in (stored, getattr(default, field)):
            continue
        raise ConfigError(
            f"model.config.{field}={value!r} contradicts --model.init_from {path} "
            f"({field}={stored!r}); leave it out to take the checkpoint's"
        )
    if dropout is not None:
        config = ModelConfig.from_dict({**config.to_dict(), "dropout": float(dropout)})
    model = Transformer(config)
    model.load_state_dict(loaded.model.state_dict())
    return config, model, loaded.tokenizer


def keep_row_zero(weight: Tensor, row: int) -> None:
    """Train ``weight`` but never its ``row``: its gradient is zeroed, so Adam leaves it as
    it is (an imported Marian model's start token: decoding starts from a zero vector)."""

    def drop_row(grad: Tensor) -> Tensor:
        grad = grad.clone()
        grad[row] = 0
        return grad

    weight.register_hook(drop_row)
