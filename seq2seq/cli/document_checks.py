"""``seq2seq translate`` of documents beside plain text: the encoding options checked for the
format, a document translated whole (nothing written when interrupted), and a zipped document
(a ``.docx``) read, translated and written."""

from __future__ import annotations

import argparse
import sys

from seq2seq.cli.interrupts import interrupt_status
from seq2seq.cli.progress import progress_bar

# Documents of formats this toolkit does not read (yet), refused by name rather than read as
# plain text; any other extension (corpus.en, notes.log) is lines of text.
NOT_TEXT = frozenset(
    ".doc .xls .ppt .rtf .pdf .zip .gz .bz2 .xz .7z .tar "
    ".png .jpg .jpeg .gif .webp .mp3 .mp4 .exe .bin".split()
)


def format_from_name(args: argparse.Namespace) -> str:
    """The format: ``--format``, else the input's extension; a document of a format it does
    not read (``.doc``, ``.pdf``) or bytes that are not text (a zip, a PDF, an image, NULs) are
    refused in one line rather than read as plain text (a 20 KB ``.docx`` once came back as
    garbage with exit 0). Another extension, none, or stdin: plain text."""
    from pathlib import Path

    from seq2seq.formats import EXTENSIONS, format_of

    if args.format is not None:
        return args.format
    suffix = Path(args.input).suffix.lower() if args.input else ""
    if suffix in NOT_TEXT:
        known = " ".join(sorted(EXTENSIONS))
        raise ValueError(
            f"{args.input}: {suffix} is not a format seq2seq reads (known: {known}); "
            "give --format text to read it as plain text"
        )
    text_format = format_of(args.input)
    if text_format == "text" and args.input and Path(args.input).is_file():
        with open(args.input, "rb") as stream:
            kind = binary_kind(stream.read(4096))
        if kind:
            raise ValueError(
                f"{args.input}: {kind}, not text (known formats: {' '.join(sorted(EXTENSIONS))}); "
                "give --format text to read it as plain text anyway"
            )
    return text_format


_SIGNATURES = {
    b"PK\x03\x04": "a zip file (an office document or an archive)",
    b"%PDF": "a PDF",
    b"\x89PNG": "a PNG image",
    b"GIF8": "a GIF image",
    b"\xff\xd8\xff": "a JPEG image",
}


def binary_kind(head: bytes) -> str | None:
    """What the first bytes of a file say it is when it is not text (None: it may be)."""
    for signature, kind in _SIGNATURES.items():
        if head.startswith(signature):
            return kind
    # UTF-16 and UTF-32 text (with its byte-order mark) holds NUL bytes
    marked = head.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff"))
    # A stray NUL in a line is text gone wrong (translated, line for line); binary files are
    # full of them.
    binary = head.count(b"\x00") > len(head) // 10
    return "binary data (NUL bytes)" if binary and not marked else None


def check_encodings(args: argparse.Namespace, text_format: str) -> None:
    """--encoding and --output-encoding take a text document: not plain text (UTF-8 always),
    nor a zipped one (its parts are in the encoding their format says: UTF-8 for Word)."""
    from seq2seq.formats import ZIPPED

    if args.encoding is None and args.output_encoding == "utf-8":
        return
    option = "--encoding" if args.encoding is not None else "--output-encoding"
    if text_format in ZIPPED:
        raise ValueError(f"{option} takes a text document, not --format {text_format} (a zip)")
    if text_format == "text":
        raise ValueError(
            f"{option} takes a document (--format html, markdown, srt, po, xliff); plain text "
            "is read as UTF-8 (UTF-16 or UTF-32 with a byte-order mark) and written as UTF-8"
        )


def translate_zipped(translator, args: argparse.Namespace, options, text_format: str) -> int:
    """A zipped document: its parts translated together in one pass, the file written once
    all are (an interrupted or failed run writes nothing: no half-translated document)."""
    from seq2seq.formats import read_zipped
    from seq2seq.textio import open_binary, write_whole

    source = args.input or "<stdin>"
    with open_binary(args.input) as file:  # open until written: images are streamed from it
        documents, write = read_zipped(file, text_format, source)
        try:
            outputs = translate_whole(translator, documents, options, args.input is not None)
            write_whole(args.output, lambda into: write(outputs, into))
        except KeyboardInterrupt as interrupt:
            return nothing_written(text_format, interrupt)
    return 0


def translate_whole(translator, documents: list, options, show: bool) -> list[str]:
    """Documents translated in one pass, a progress bar of sentences on stderr (``show``)."""
    with progress_bar(None, "sentences", show, "seq2seq translate") as bar:
        return translator.translate_documents(documents, options, progress=bar)


def nothing_written(text_format: str, interrupt: KeyboardInterrupt) -> int:
    """Ctrl+C during a document: said, and nothing written (a document is written whole)."""
    print(
        f"seq2seq translate: interrupted; nothing written (a {text_format} document is "
        "written whole)",
        file=sys.stderr,
    )
    return interrupt_status(interrupt)
