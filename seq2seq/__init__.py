"""seq2seq: a readable, paper-faithful Transformer for English→Chinese translation.

Read it floor by floor; every import goes down, never up (``tests/test_architecture.py``):

    the paper     config embedding attention layers model cache loss   (these files, flat)
    ground        errors textio checks moved                           (these files, flat)
    decoding/     the searches, and what runs our model through them
    data/         corpora, cleaning, the split, the tokenizer, batching; formats/: documents
    inference/    checkpoints, Translator and Generator, engines, evaluation, CPU packing, int8
    training/     the LightningModule, callbacks, schedule, the Lightning CLI (Lightning only here)
    tools/        export, import, pictures; serve/: the HTTP server
    cli           the ``seq2seq`` command
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from seq2seq.cache import KVCache
from seq2seq.config import ModelConfig
from seq2seq.errors import ConfigError
from seq2seq.model import Transformer

if TYPE_CHECKING:
    from seq2seq.decoding.decode import translate_ids
    from seq2seq.decoding.sampling import SamplingConfig
    from seq2seq.decoding.search import SearchConfig
    from seq2seq.inference.checkpoint import load_model
    from seq2seq.inference.cpu import prepare_for_inference
    from seq2seq.inference.generation import Generator
    from seq2seq.inference.glossary import Glossary
    from seq2seq.inference.options import TranslateOptions
    from seq2seq.inference.translator import Translator

# The rest of the public API, imported on first use: ``import seq2seq`` stays as light as the
# model (torch only), and ``from seq2seq import Translator`` still works.
_PUBLIC = {
    "Translator": "seq2seq.inference.translator",
    "TranslateOptions": "seq2seq.inference.options",
    "Generator": "seq2seq.inference.generation",
    "Glossary": "seq2seq.inference.glossary",
    "load_model": "seq2seq.inference.checkpoint",
    "prepare_for_inference": "seq2seq.inference.cpu",
    "SearchConfig": "seq2seq.decoding.search",
    "SamplingConfig": "seq2seq.decoding.sampling",
    "translate_ids": "seq2seq.decoding.decode",
}


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'seq2seq' has no attribute {name!r}")


__all__ = [
    "ConfigError",
    "Generator",
    "Glossary",
    "KVCache",
    "ModelConfig",
    "SamplingConfig",
    "SearchConfig",
    "TranslateOptions",
    "Transformer",
    "Translator",
    "load_model",
    "prepare_for_inference",
    "translate_ids",
]


def _installed_version() -> str:
    """The version ``pyproject.toml`` sets (its one home), from the installed metadata."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("seq2seq")
    except PackageNotFoundError:  # a source tree on sys.path, never installed
        return "0+unknown"


__version__ = _installed_version()
