"""The checkpoint format: what ``seq2seq fit`` writes, how every command loads it, and
averaging. Plain PyTorch: inference never imports Lightning.

A checkpoint is a Lightning checkpoint (weights under ``state_dict`` with a ``model.`` prefix,
optimizer and loop state for resuming) plus our own section, ``checkpoint["seq2seq"]``, which
makes it self-contained:

    model_config   ModelConfig.to_dict(): the shape, and the special token ids
    search         SearchConfig as a dict: the decoding defaults
    tokenizer      the SentencePiece model's bytes (an imported Marian model's
                   PairedTokenizer: seq2seq.data.paired_tokenizer)
    task           "translation" (pairs) or "lm" (monolingual text)
    source_ends_with_eos
                   whether the model was trained on sources ending with </s> (new
                   encoder-decoder models, imported Marian models). Checkpoints written before
                   the key existed lack it: their models were trained without, and load so.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch

from seq2seq.config import ModelConfig
from seq2seq.data.tokenizer import SOURCE_EOS_KEY, section_tokenizer
from seq2seq.decoding.search import SearchConfig
from seq2seq.errors import CheckpointError, ConfigError
from seq2seq.model import Transformer
from seq2seq.moved import load_checkpoint_file

CHECKPOINT_KEY = "seq2seq"  # our section of a Lightning checkpoint: config + tokenizer
TRAINING_STATE = ("optimizer_states", "lr_schedulers", "loops", "callbacks")


TRUECASE_KEY = "truecase"  # in the section: seq2seq.data.truecase.Truecaser's forms
CONFIDENCE_KEY = "confidence"  # in the section: seq2seq.inference.confidence.Calibration


def checkpoint_section(
    config: ModelConfig,
    search: SearchConfig,
    tokenizer_bytes: bytes | None,
    task: str,
    source_ends_with_eos: bool,
    truecase: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Our section of a checkpoint (see the module docstring); ``source_ends_with_eos`` is
    the flag of the tokenizer the model was trained with; ``truecase`` the usual forms of the
    training English's words (``seq2seq.data.truecase``), when the data gave them."""
    section = {
        "model_config": config.to_dict(),
        "search": asdict(search),
        "tokenizer": tokenizer_bytes,
        "task": task,
        SOURCE_EOS_KEY: bool(source_ends_with_eos),
    }
    if truecase is not None:
        section[TRUECASE_KEY] = dict(truecase)
    return section


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a Lightning checkpoint on the CPU, with one-line errors for the usual problems."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found")
    try:
        checkpoint = load_checkpoint_file(path)
    except Exception as error:  # truncated zip, not a torch file, ...
        raise CheckpointError(f"{path}: cannot read checkpoint ({error})") from None
    if not isinstance(checkpoint, dict) or CHECKPOINT_KEY not in checkpoint:
        raise CheckpointError(f"{path}: not a seq2seq checkpoint (no '{CHECKPOINT_KEY}' section)")
    return checkpoint


@dataclass
class LoadedModel:
    """What a checkpoint holds: the model (eval mode), its tokenizer, decoding defaults, and
    the task it was trained for (``translation`` or ``lm``)."""

    model: Transformer
    tokenizer: Any
    search: SearchConfig
    task: str
    # The training English's word forms, if learnt; None (a checkpoint from before them, an
    # imported model): the truecaser leaves every line as written.
    truecase: dict[str, str] | None = None
    # ``seq2seq calibrate``'s fit of confidence to chrF (seq2seq.inference.confidence), if run.
    confidence: dict[str, Any] | None = None

    @property
    def is_language_model(self) -> bool:
        """Whether it continues text rather than translates: trained as an LM, or a
        decoder-only model without the separator a decoder-only translator needs."""
        config = self.model.config
        return self.task == "lm" or (config.decoder_only and config.sep_id is None)


def load_model(path: str | Path, device: str = "cpu") -> LoadedModel:
    """Model, tokenizer and search settings of a ``.ckpt`` written by ``seq2seq fit``."""
    checkpoint = read_checkpoint(path)
    section = checkpoint[CHECKPOINT_KEY]
    config = _model_config(path, section)
    if section.get("tokenizer") is None:
        raise CheckpointError(f"{path}: checkpoint holds no SentencePiece model")
    tokenizer = section_tokenizer(section)
    if tokenizer.vocab_size != config.vocab_size:
        raise CheckpointError(
            f"{path}: vocab_size {config.vocab_size} disagrees with the tokenizer "
            f"({tokenizer.vocab_size} ids)"
        )
    model = Transformer(config)
    try:
        model.load_state_dict(model_state_dict(checkpoint))
    except RuntimeError as error:  # the weights of another shape of model
        first = str(error).splitlines()[1].strip() if "\n" in str(error) else str(error)
        raise CheckpointError(
            f"{path}: weights do not fit the model config ({first[:200]})"
        ) from None
    search = search_from_dict(section.get("search", {}))
    task = section.get("task", "translation")
    truecase = section.get(TRUECASE_KEY)
    confidence = section.get(CONFIDENCE_KEY)
    return LoadedModel(model.to(device).eval(), tokenizer, search, task, truecase, confidence)


def _model_config(path: str | Path, section: dict[str, Any]) -> ModelConfig:
    """The stored ModelConfig. Checkpoints written before ``sep_id`` moved into the model's
    config kept it with the search settings."""
    try:
        config = ModelConfig.from_dict(section["model_config"])
    except (ConfigError, KeyError, TypeError) as error:
        raise CheckpointError(f"{path}: bad model config ({error})") from None
    old_sep = section.get("search", {}).get("sep_id")
    if config.sep_id is None and old_sep is not None:
        config.sep_id = old_sep
    return config


def search_from_dict(settings: dict[str, Any]) -> SearchConfig:
    """SearchConfig from a stored dict; keys of older versions (e.g. special ids) are dropped."""
    known = {f.name for f in fields(SearchConfig)}
    return SearchConfig(**{k: v for k, v in settings.items() if k in known})


def model_state_dict(checkpoint: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The Transformer's weights from a LightningModule state dict (drops the 'model.' prefix)."""
    prefix = "model."
    return {
        k[len(prefix) :]: v for k, v in checkpoint["state_dict"].items() if k.startswith(prefix)
    }


def average_checkpoints(paths: list[str], output: str | Path) -> None:
    """Write a checkpoint whose weights are the mean of ``paths``' (Vaswani et al. §6.1).

    The result keeps the last checkpoint's config, tokenizer and bookkeeping, but no optimizer
    state: it is for translation and evaluation, not for resuming training.
    """
    if not paths:
        raise CheckpointError("average: no checkpoints given")
    checkpoints = [read_checkpoint(p) for p in paths]
    keys = checkpoints[-1]["state_dict"].keys()
    for path, checkpoint in zip(paths, checkpoints, strict=True):
        if checkpoint["state_dict"].keys() != keys:
            raise CheckpointError(f"{path}: parameters differ from {paths[-1]}")
    averaged = {}
    for key in keys:
        tensors = [c["state_dict"][key] for c in checkpoints]
        if tensors[0].is_floating_point():
            averaged[key] = torch.stack([t.double() for t in tensors]).mean(0).to(tensors[0].dtype)
        else:
            averaged[key] = tensors[-1]
    result = {k: v for k, v in checkpoints[-1].items() if k not in TRAINING_STATE}
    result["state_dict"] = averaged
    result["averaged_from"] = [str(p) for p in paths]
    atomic_save(result, output)


def atomic_save(obj: Any, path: str | os.PathLike) -> None:
    """``torch.save`` to a temporary file beside ``path``, then rename it into place.

    A kill during a save leaves the previous file whole: the bytes are flushed to disk before
    the name points at them, and the rename is atomic on POSIX and Windows. A temporary file
    left by a killed save is removed by the next one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{path.name}.tmp-*"):
        stale.unlink(missing_ok=True)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(temporary, "wb") as file:
            torch.save(obj, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
