"""seq2seq: a readable, paper-faithful Transformer for English→Chinese translation."""

from seq2seq.cache import KVCache
from seq2seq.config import ConfigError, ModelConfig
from seq2seq.model import Transformer

__all__ = ["ConfigError", "KVCache", "ModelConfig", "Transformer"]
__version__ = "0.1.0"
