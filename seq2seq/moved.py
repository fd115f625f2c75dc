"""Where modules of earlier releases went, so their checkpoints still load.

A checkpoint's hyper-parameters can hold our config objects (a ``TranslationModule`` built in
Python saves its ``ModelConfig`` and ``SearchConfig`` as they are), and pickle names each by
the module that defined it when the checkpoint was written. ``load_checkpoint_file`` reads such
a file with those names mapped to where the classes live now. (Checkpoints written by
``seq2seq fit`` hold plain dicts there; they need no mapping.)
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

# Module paths before the package layout of release 0.2 -> now.
MOVED_MODULES = {
    "seq2seq.search": "seq2seq.decoding.search",
    "seq2seq.scoring": "seq2seq.decoding.decode",
    "seq2seq.constrained": "seq2seq.decoding.constrained",
    "seq2seq.continuous": "seq2seq.decoding.continuous",
    "seq2seq.training": "seq2seq.training.module",
    "seq2seq.callbacks": "seq2seq.training.callbacks",
    "seq2seq.schedule": "seq2seq.training.schedule",
    "seq2seq.evaluation": "seq2seq.inference.evaluation",
    "seq2seq.glossary": "seq2seq.inference.glossary",
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(MOVED_MODULES.get(module, module), name)


class _MovedNamesPickle:
    """What ``torch.load(pickle_module=...)`` needs: pickle, with moved class paths mapped."""

    Unpickler = _Unpickler
    load = staticmethod(pickle.load)
    __name__ = "pickle"


def load_checkpoint_file(path: str | Path, mmap: bool = False) -> Any:
    """``torch.load`` of one of our checkpoints on the CPU, whichever release wrote it.

    Our checkpoints hold plain Python config objects, so weights-only loading is off: load
    only checkpoints you trust, as with any pickle."""
    import torch

    return torch.load(
        path, map_location="cpu", weights_only=False, mmap=mmap, pickle_module=_MovedNamesPickle
    )
