"""The one exception the data layer raises for bad input."""

from __future__ import annotations

from pathlib import Path


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
