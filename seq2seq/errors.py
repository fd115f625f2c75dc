"""Every error a user of the toolkit can meet, each told in one line (file, line, field).

The commands catch these and print ``seq2seq COMMAND: error: MESSAGE`` instead of a traceback.
This module imports nothing, so any layer can raise them.
"""

from __future__ import annotations

from pathlib import Path


class ConfigError(ValueError):
    """A model configuration that cannot describe a valid model."""


class DataError(Exception):
    """Bad or missing input data, described in one line.

    The message names the file, the 1-based line number when there is one, and the problem,
    e.g. ``corpus.tsv:17: expected 2 tab-separated fields, found 3``.
    """

    @classmethod
    def at(cls, path: str | Path, line: int | None, problem: str) -> DataError:
        """Builds the error for ``problem`` found in ``path`` (at ``line``, 1-based, if given)."""
        where = f"{path}:{line}" if line is not None else str(path)
        return cls(f"{where}: {problem}")


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, unreadable or not one of ours."""


class CheckpointDirInUse(RuntimeError):
    """The checkpoint directory belongs to another run; the message says what to do."""


class TrainingStopped(RuntimeError):
    """Training cannot usefully go on; the message says why in one line."""


USER_ERRORS = (ConfigError, DataError, CheckpointError, CheckpointDirInUse, TrainingStopped)
