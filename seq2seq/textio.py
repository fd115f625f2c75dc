"""Plain-text lines in and out: the one reader and writer every command and corpus uses.

A "line" ends at ``\\n`` only: ``str.splitlines`` would also split at U+2028, form feeds and
other characters that can sit inside a sentence, and then output line i would no longer answer
input line i. A final newline ends the last line (it does not start an empty one), a ``\\r``
before it is dropped (Windows files) and so is a byte-order mark at the start.

Lines are read as UTF-8 unless a byte-order mark says UTF-16 or UTF-32 (``BOMS``) or the caller
names another encoding; documents read whole, in any encoding, are ``seq2seq.formats.encoding``'s.
"""

from __future__ import annotations

import codecs
import io
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from seq2seq.checks import readable_file
from seq2seq.errors import DataError

# Byte-order marks and the codec each starts (the BOM itself not part of the text). UTF-32 LE
# before UTF-16 LE: its mark begins with UTF-16 LE's.
BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def is_utf8(data: bytes) -> bool:
    """Whether ``data`` is valid UTF-8 (whole characters only)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def sniff_bom(head: bytes) -> tuple[bytes, str] | None:
    """The byte-order mark ``head`` starts with and the codec it names; None without one."""
    return next(((bom, codec) for bom, codec in BOMS if head.startswith(bom)), None)


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


def read_bytes(path: str | Path | None) -> bytes:
    """A whole file's bytes (stdin's when ``path`` is None).

    Raises:
        DataError: the file does not exist or may not be read.
    """
    if path is None:
        return sys.stdin.buffer.read()
    require_file(path)
    return Path(path).read_bytes()


def write_bytes(data: bytes, path: str | Path | None) -> None:
    """A whole document's bytes, as they are, to a file or to stdout."""
    if path is None:
        sys.stdout.flush()  # what was written as text goes first
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        Path(path).write_bytes(data)


def open_binary(path: str | Path | None) -> BinaryIO:
    """A file open for reading bytes, seekable (stdin's bytes read into memory, as a zip must
    be seekable), for a caller to close.

    Raises:
        DataError: the file does not exist or may not be read.
    """
    if path is None:
        return io.BytesIO(sys.stdin.buffer.read())
    require_file(path)
    return open(path, "rb")


def write_whole(path: str | Path | None, fill: Callable[[BinaryIO], None]) -> None:
    """A document that ``fill`` writes into a seekable binary file, put at ``path`` only once
    whole: written beside it under a temporary name, then renamed onto it, so a failure or an
    interrupt leaves ``path`` as it was. To stdout when ``path`` is None."""
    if path is None:
        with tempfile.TemporaryFile() as spool:
            fill(spool)
            spool.seek(0)
            sys.stdout.flush()  # what was written as text goes first
            shutil.copyfileobj(spool, sys.stdout.buffer)
            sys.stdout.buffer.flush()
        return
    target = Path(path)
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            fill(file)
        os.chmod(name, _new_file_mode(target))  # mkstemp's file is private (0600)
        os.replace(name, target)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


def _new_file_mode(target: Path) -> int:
    """The permissions ``open(target, "w")`` would leave: the file's own where it exists, else
    0666 less the process's umask."""
    if target.exists():
        return target.stat().st_mode & 0o7777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def stream_lines(path: str | Path | None, encoding: str | None = None) -> Iterator[str]:
    """The lines of a text file (stdin when ``path`` is None), read lazily as ``read_lines``
    reads them: cut at ``\\n`` only, ``\\r`` and a byte-order mark dropped, invalid bytes as
    U+FFFD.

    Args:
        encoding: a Python codec name; None reads UTF-8. A byte-order mark overrides either.
    """
    if path is not None:
        require_file(path)
    file = _peekable(sys.stdin.buffer) if path is None else open(path, "rb")
    try:
        decoder = _line_decoder(file, encoding)
        pending = ""
        for raw in file:  # binary files split at b"\n" only: each typed line answered at once
            *lines, pending = (pending + decoder.decode(raw)).split("\n")
            yield from (line.removesuffix("\r") for line in lines)
        pending += decoder.decode(b"", final=True)
        if pending:  # a last line without its newline
            yield pending.removesuffix("\r")
    finally:
        if path is not None:
            file.close()


def _peekable(file) -> io.BufferedReader:  # noqa: ANN001 (a binary stream)
    """``file`` itself when it can peek (``sys.stdin.buffer``), else wrapped so it can."""
    return file if hasattr(file, "peek") else io.BufferedReader(file)


def _line_decoder(file: io.BufferedReader, encoding: str | None) -> codecs.IncrementalDecoder:
    """The decoder of ``file``'s lines, its byte-order mark (if any) read past."""
    found = sniff_bom(file.peek(4)[:4])
    if found is not None:
        file.read(len(found[0]))
        encoding = found[1]
    return codecs.getincrementaldecoder(encoding or "utf-8")(errors="replace")


def count_lines(path: str | Path, encoding: str | None = None) -> int:
    """How many lines ``stream_lines(path, encoding)`` yields, counted without decoding
    (decoded for UTF-16 and UTF-32, where a ``\\n`` byte can be half of another character)."""
    with open(path, "rb") as file:
        found = sniff_bom(file.read(4))
        encoding = found[1] if found else encoding
        if encoding is not None and codecs.lookup(encoding).name.startswith(("utf-16", "utf-32")):
            return sum(1 for _ in stream_lines(path, encoding))
        file.seek(0)
        count, last = 0, b"\n"
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


def read_text(path: str | Path, what: str) -> str:
    """The whole of UTF-8 file ``path`` (``what`` it is: "glossary file"), else a one-line
    ``DataError`` naming it: no such file, not UTF-8, or why it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError.at(path, None, f"no such {what}") from None
    except UnicodeDecodeError as error:
        raise DataError.at(path, None, f"{what}: not UTF-8 text ({error.reason})") from None
    except OSError as error:
        raise DataError.at(path, None, f"cannot read {what} ({error.strerror})") from None


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
