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

from seq2seq.cache import KVCache
from seq2seq.config import ConfigError, ModelConfig
from seq2seq.model import Transformer

__all__ = ["ConfigError", "KVCache", "ModelConfig", "Transformer"]
__version__ = "0.2.0"
