"""Does the data fit the model? ``check_data_fits_model``: one-line ``ConfigError``s for data
that a run would otherwise fail on much later (or, worse, silently train wrong on).

The checks need the data's tokenizer, which the data module builds in its ``setup`` (inside
``trainer.fit``, after ``prepare_data``), so ``TranslationModule.setup`` calls this: for
``seq2seq fit`` and a plain ``Trainer`` alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from seq2seq.config import ModelConfig
from seq2seq.errors import ConfigError


@dataclass(frozen=True)
class InitCheckpoint:
    """The checkpoint a fine-tuned model starts from (``model.init_from``): its data must be
    cut as that checkpoint's was."""

    path: str
    tokenizer_bytes: bytes
    source_ends_with_eos: bool


def check_data_fits_model(
    config: ModelConfig, datamodule, init: InitCheckpoint | None = None
) -> None:
    """Raise a one-line ``ConfigError`` unless ``datamodule`` (set up: it has its tokenizer)
    fits a model of ``config``: the same vocabulary, special ids and layout, sources ending
    as the model (and the checkpoint ``init`` it is fine-tuned from) expects, and sequences
    that fit the position table."""
    tokenizer = datamodule.tokenizer
    task = getattr(datamodule, "task", "translation")
    if tokenizer.vocab_size != config.vocab_size:
        raise ConfigError(
            f"ModelConfig.vocab_size ({config.vocab_size}) disagrees with the "
            f"SentencePiece model ({tokenizer.vocab_size} pieces)"
        )
    _check_tokenizer(config, tokenizer, datamodule)
    if init is not None and tokenizer.to_bytes() != init.tokenizer_bytes:
        raise ConfigError(
            f"the data is not cut by the tokenizer of {init.path}: "
            "set data.tokenizer_from to it (seq2seq fit links it)"
        )
    # A language model reads no sources, so whether they end with eos does not matter.
    _check_source_ending(config, tokenizer.source_ends_with_eos and task != "lm", init)
    _check_positions(config, datamodule, task)


def _check_tokenizer(config: ModelConfig, tokenizer, datamodule) -> None:
    """The data's special ids and layout must be the model's."""
    ids = (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)
    if ids != (config.pad_id, config.bos_id, config.eos_id):
        raise ConfigError(
            f"the tokenizer's pad/bos/eos ids {ids} are not the model's "
            f"{(config.pad_id, config.bos_id, config.eos_id)}"
        )
    if getattr(datamodule, "decoder_only", config.decoder_only) != config.decoder_only:
        raise ConfigError(
            f"the data layout disagrees with the model's decoder_only="
            f"{config.decoder_only}: set model.config.decoder_only"
        )


def _check_source_ending(
    config: ModelConfig, source_ends_with_eos: bool, init: InitCheckpoint | None
) -> None:
    """A decoder-only translator's sources never end with eos; a fine-tuned model's end as
    they did when it was trained."""
    if config.decoder_only and source_ends_with_eos:
        raise ConfigError(
            "a decoder-only translation model reads [bos] src [sep] tgt: its "
            "data's sources must not end with </s>"
        )
    if init is not None and source_ends_with_eos != init.source_ends_with_eos:
        raise ConfigError(
            f"the data's sources {ending(source_ends_with_eos)} but "
            f"{init.path} was trained on sources that "
            f"{ending(init.source_ends_with_eos)}: cut the data with its "
            "tokenizer (data.tokenizer_from)"
        )


def _check_positions(config: ModelConfig, datamodule, task: str) -> None:
    """The longest training sequence must fit the position table (one line, not a crash at
    the step that first meets it)."""
    if task == "lm":
        longest, what = datamodule.block_size, f"data.block_size={datamodule.block_size}"
    elif config.decoder_only:
        longest = 2 * datamodule.max_len + 2  # [bos] src [sep] tgt, both sides at max_len
        what = f"decoder-only pairs of data.max_len={datamodule.max_len} joined"
    else:
        longest, what = datamodule.max_len + 1, f"data.max_len={datamodule.max_len} (+ bos)"
    if longest > config.max_positions:
        raise ConfigError(
            f"{what} make {longest}-token sequences but model.config.max_positions is "
            f"{config.max_positions}: raise it or shorten the data"
        )


def ending(with_eos: bool) -> str:
    """How sources end, for an error message."""
    return "end with </s>" if with_eos else "do not end with </s>"
