"""Plain-text lines in and out: the one reader and writer every command and corpus uses.

A "line" ends at ``\\n`` only: ``str.splitlines`` would also split at U+2028, form feeds and
other characters that can sit inside a sentence, and then output line i would no longer answer
input line i. A final newline ends the last line (it does not start an empty one), a ``\\r``
before it is dropped (Windows files) and so is a UTF-8 byte-order mark at the start.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from seq2seq.checks import readable_file
from seq2seq.errors import DataError


def split_lines(text: str) -> list[str]:
    """``text`` cut at ``\\n`` into lines, without their ``\\r\\n`` / ``\\n`` endings."""
    lines = text.removeprefix("\ufeff").split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it does not start a new one
    return [line.removesuffix("\r") for line in lines]


def read_lines(path: str | Path | None, strict: bool = False) -> list[str]:
    """The lines of a UTF-8 file, or of stdin when ``path`` is None.

    Args:
        strict: invalid UTF-8 raises a ``DataError`` naming the file and line (for training
            data, where a garbled sentence is better fixed than learnt). Otherwise bad bytes
            become U+FFFD and the line is kept (for inputs to translate: one output line per
            input line, whatever the line holds).

    Raises:
        DataError: the file does not exist, or (``strict``) is not valid UTF-8.
    """
    if strict and path is not None:
        return [line for _, line in numbered_lines(path)]
    if strict:  # stdin, strictly
        return split_lines(sys.stdin.buffer.read().decode("utf-8"))
    return list(stream_lines(path))


def read_text(path: str | Path | None) -> str:
    """A whole UTF-8 document (stdin when ``path`` is None), byte-order mark dropped; invalid
    bytes become U+FFFD.

    Raises:
        DataError: the file does not exist.
    """
    if path is None:
        raw = sys.stdin.buffer.read()
    else:
        require_file(path)
        raw = Path(path).read_bytes()
    return raw.decode("utf-8", errors="replace").removeprefix("\ufeff")


def write_text(text: str, path: str | Path | None) -> None:
    """A whole document, as it is, to a UTF-8 file or to stdout."""
    if path is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        Path(path).write_text(text, encoding="utf-8")


def stream_lines(path: str | Path | None) -> Iterator[str]:
    """The lines of a UTF-8 file (stdin when ``path`` is None), read lazily as
    ``read_lines`` reads them: cut at ``\\n`` only, ``\\r`` and a byte-order mark dropped,
    invalid bytes as U+FFFD."""
    if path is not None:
        require_file(path)
    file = sys.stdin.buffer if path is None else open(path, "rb")
    try:
        for number, raw in enumerate(file):  # binary files split at b"\n" only
            line = raw.decode("utf-8", errors="replace")
            if number == 0:
                line = line.removeprefix("\ufeff")
            yield line.removesuffix("\n").removesuffix("\r")
    finally:
        if path is not None:
            file.close()


def count_lines(path: str | Path) -> int:
    """How many lines ``stream_lines(path)`` yields, counted without decoding."""
    count, last = 0, b"\n"
    with open(path, "rb") as file:
        while block := file.read(1 << 20):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")  # a last line without its newline


class LineWriter:
    """Lines to a UTF-8 file or stdout, flushed as they are written (a pipe sees each batch
    at once, an interrupted run keeps every line written); ``written`` counts them."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = path
        self.written = 0
        self._file = sys.stdout if path is None else open(path, "w", encoding="utf-8")

    def write(self, lines: Iterable[str]) -> None:
        lines = list(lines)
        self._file.write("".join(line + "\n" for line in lines))
        self._file.flush()
        self.written += len(lines)

    def close(self) -> None:
        if self.path is not None:
            self._file.close()

    def __enter__(self) -> LineWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def numbered_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) of a UTF-8 file, streamed (corpora can be large).

    Raises:
        DataError: the file does not exist, or a line is not valid UTF-8 (named).
    """
    require_file(path)
    with open(path, "rb") as file:
        for number, raw in enumerate(file, start=1):  # binary files split at b"\n" only
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise DataError.at(path, number, f"not valid UTF-8 ({error.reason})") from None
            if number == 1:
                line = line.removeprefix("\ufeff")
            yield number, line.removesuffix("\n").removesuffix("\r")


def require_file(path: str | Path) -> None:
    """A one-line ``DataError`` unless ``path`` is an existing file this process may read."""
    readable_file(path)


def write_lines(lines: Iterable[str], path: str | Path | None) -> None:
    """Each string as one line (``\\n``-terminated), to a UTF-8 file or to stdout."""
    text = "".join(line + "\n" for line in lines)
    if path is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        Path(path).write_text(text, encoding="utf-8")


def one_line(text: str) -> str:
    """Output text with no line breaks, so output line i always answers input line i."""
    return " ".join(text.splitlines()).replace("\u2028", " ").replace("\u2029", " ")


def warn_lines(message: str, line_numbers: list[int]) -> None:
    """One warning on stderr naming the (first 20) 1-based line numbers concerned."""
    shown = ", ".join(map(str, line_numbers[:20])) + (" ..." if len(line_numbers) > 20 else "")
    print(f"warning: {message}: line {shown}", file=sys.stderr)
