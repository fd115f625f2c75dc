"""``seq2seq translate --with-confidence`` and ``--min-confidence``: plain lines with the
confidence of each translation (``seq2seq.inference.confidence``), or the source kept where the
translation is not trusted."""

from __future__ import annotations

import argparse

from seq2seq import checks
from seq2seq.textio import warn_lines


def add_confidence_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--with-confidence",
        action="store_true",
        help="write each line as 'CONFIDENCE<TAB>TRANSLATION', a confidence in [0, 1] "
        "(fitted to chrF by 'seq2seq calibrate'); text format only",
    )
    p.add_argument(
        "--min-confidence",
        type=float,
        default=None,
        metavar="X",
        help="write a line whose translation's confidence is below X as its source, "
        "unchanged (a warning names those lines); text format only",
    )


def wants_confidence(args: argparse.Namespace) -> bool:
    """Whether ``--with-confidence`` or ``--min-confidence`` was given."""
    return args.with_confidence or args.min_confidence is not None


def check_confidence_options(args: argparse.Namespace, text_format: str) -> None:
    """One-line errors for options that cannot go together, before the model loads."""
    if not wants_confidence(args):
        return
    option = "--with-confidence" if args.with_confidence else "--min-confidence"
    if text_format != "text":
        raise ValueError(f"{option} takes plain text, not --format {text_format}")
    if args.n_best is not None:
        raise ValueError(f"{option} and --n-best do not go together")
    if args.min_confidence is not None:
        checks.finite(args.min_confidence, "--min-confidence")
        if not 0.0 <= args.min_confidence <= 1.0:
            raise ValueError(f"--min-confidence must be in [0, 1], got {args.min_confidence}")


def confident_lines(translator, chunk: list[str], options, args, first_line: int, progress):  # noqa: ANN001, ANN201
    """A window's output lines, each with its confidence (``--with-confidence``) or kept as
    its source below ``--min-confidence``."""
    scored = translator.translate_with_confidence(
        chunk, options, progress=progress, first_line=first_line
    )
    minimum = args.min_confidence
    low = [
        i
        for i, (_, confidence) in enumerate(scored)
        if minimum is not None and confidence is not None and confidence < minimum
    ]
    if low:
        warn_lines(
            f"{len(low)} line(s) below --min-confidence {minimum} are written as "
            "their source, untranslated",
            [first_line + i for i in low],
        )
    kept = set(low)
    lines = []
    for i, (text, confidence) in enumerate(scored):
        text = chunk[i] if i in kept else text
        if args.with_confidence:
            text = ("" if confidence is None else f"{confidence:.3f}") + "\t" + text
        lines.append(text)
    return lines
