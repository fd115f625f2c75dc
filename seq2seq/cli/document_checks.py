"""``seq2seq translate`` of documents beside plain text: the encoding options checked for the
format, a document translated whole (nothing written when interrupted), and a zipped document
(a ``.docx``) read, translated and written."""

from __future__ import annotations

import argparse
import sys

from seq2seq.cli.interrupts import interrupt_status
from seq2seq.cli.progress import progress_bar


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
    from seq2seq.textio import read_bytes, write_bytes

    source = args.input or "<stdin>"
    documents, write = read_zipped(read_bytes(args.input), text_format, source)
    try:
        outputs = translate_whole(translator, documents, options, args.input is not None)
    except KeyboardInterrupt as interrupt:
        return nothing_written(text_format, interrupt)
    write_bytes(write(outputs), args.output)
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
