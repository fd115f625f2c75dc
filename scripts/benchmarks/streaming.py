"""Streamed translation (``seq2seq translate``: windows of lines decoded and written in turn)
against the whole input decoded in one pass, as ``translate`` did before it streamed.

    python scripts/bench.py streaming --checkpoint runs/demo/checkpoints/last.ckpt
    python scripts/bench.py streaming --checkpoint /tmp/mid.ckpt --rounds 1 --lines 200

Input: the checkpoint's test split (distinct English sentences, one per line), or ``--input``.
One process, one warm-up translation of 20 lines; then each round times, in turn, the one-pass
run (``Translator.translate`` of every line) and one streamed run per ``--windows`` size
(``Translator.translate_stream``), ``time.perf_counter`` around each; a row reports its best
round. The streamed outputs must equal the one-pass outputs line for line (checked). Prints
lines per second and each streamed run's time as a ratio of the one-pass time, and how long
the first window took (when a pipe sees its first line).
"""

from __future__ import annotations

import argparse
import time

from benchmarks.harness import Best, timed
from seq2seq.inference.options import TranslateOptions

WARMUP = 20


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--input", help="English lines (default: the checkpoint's test split)")
    parser.add_argument("--lines", type=int, default=None, help="only the first N lines")
    parser.add_argument("--windows", default="250,1000", help="window sizes, comma-separated")
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    from seq2seq.inference.evaluation import held_out_split
    from seq2seq.inference.translator import Translator
    from seq2seq.textio import read_lines

    lines = read_lines(args.input) if args.input else held_out_split(args.checkpoint, "test")[0]
    lines = lines[: args.lines]
    translator = Translator.from_checkpoint(args.checkpoint)
    options = TranslateOptions(beam_size=args.beam_size)
    translator.translate(lines[:WARMUP], options)
    windows = [int(w) for w in args.windows.split(",")]
    best, first = Best(), Best()
    for _ in range(args.rounds):
        whole, seconds = timed(translator.translate, lines, options)
        best.add("one pass", seconds)
        for window in windows:
            start = time.perf_counter()
            streamed, first_at = [], None
            for chunk in translator.translate_stream(lines, options, window=window):
                first_at = first_at or time.perf_counter() - start
                streamed += chunk
            best.add(f"windows of {window}", time.perf_counter() - start)
            first.add(window, first_at)
            assert streamed == whole, f"window {window}: outputs differ from the one-pass run"
    base = best["one pass"]
    print(f"{len(lines):,} lines, beam {args.beam_size}, best of {args.rounds} round(s)")
    print(f"{'run':<20} {'seconds':>8} {'lines/s':>8} {'time ratio':>10} {'first output':>13}")
    for name, seconds in best.items():
        window = int(name.split()[-1]) if name != "one pass" else None
        shown = f"{first[window]:.2f} s" if window else f"{base:.2f} s"
        print(
            f"{name:<20} {seconds:8.2f} {len(lines) / seconds:8.1f} {seconds / base:10.3f} "
            f"{shown:>13}"
        )
