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


# What a student may change of its teacher's config (seq2seq.training.distill's recipe);
# everything else (width, heads, vocabulary, norms) must be the teacher's, whose weights it takes.
STUDENT_FIELDS = ("n_encoder_layers", "n_decoder_layers", "dropout")


def student_model(path: str, given: ModelConfig) -> tuple[ModelConfig, Transformer, Any]:
    """A distillation student started from teacher checkpoint ``path``: the teacher's config
    with the ``given`` layer counts (and dropout), its embedding (shared by source, target and
    output projection) and, for each student layer, a teacher layer of the same stack picked
    evenly over its depth, the last always included (a one-layer decoder starts as the
    teacher's top layer, the one whose output the projection reads; a deeper student repeats
    teacher layers). Training then starts where the teacher's representations are, not from the
    plateau a shallow post-LN decoder does not leave (docs/distillation.md)."""
    config, teacher, tokenizer = pretrained_model(path, _teacher_shaped(path, given))
    student_config = ModelConfig.from_dict(
        {**config.to_dict(), **{f: getattr(given, f) for f in STUDENT_FIELDS}}
    )
    student = Transformer(student_config)
    student.embedding.load_state_dict(teacher.embedding.state_dict())
    for stack in ("encoder", "decoder"):
        own, theirs = getattr(student, stack), getattr(teacher, stack)
        for i, j in enumerate(layer_sources(len(own.layers), len(theirs.layers))):
            own.layers[i].load_state_dict(theirs.layers[j].state_dict())
        own_rest = {k: v for k, v in theirs.state_dict().items() if not k.startswith("layers.")}
        own.load_state_dict(own_rest, strict=False)  # a final norm (pre-LN), if any
    return student_config, student, tokenizer


def layer_sources(student_layers: int, teacher_layers: int) -> list[int]:
    """The teacher layer each student layer starts from: evenly spaced, the last included
    (3 -> 1: [2]; 6 -> 2: [2, 5]; 3 -> 6: [0, 0, 1, 1, 2, 2])."""
    if student_layers >= teacher_layers:
        return [i * teacher_layers // student_layers for i in range(student_layers)]
    step = teacher_layers / student_layers
    return [round((i + 1) * step) - 1 for i in range(student_layers)]


def _teacher_shaped(path: str, given: ModelConfig) -> ModelConfig:
    """``given`` with the fields a student may change put back to their defaults, so that
    ``pretrained_model`` checks only the others against the teacher."""
    default = ModelConfig()
    return ModelConfig.from_dict(
        {**given.to_dict(), **{f: getattr(default, f) for f in STUDENT_FIELDS}}
    )


def keep_row_zero(weight: Tensor, row: int) -> None:
    """Train ``weight`` but never its ``row``: its gradient is zeroed, so Adam leaves it as
    it is (an imported Marian model's start token: decoding starts from a zero vector)."""

    def drop_row(grad: Tensor) -> Tensor:
        grad = grad.clone()
        grad[row] = 0
        return grad

    weight.register_hook(drop_row)
