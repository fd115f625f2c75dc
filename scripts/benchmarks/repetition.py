"""Loops and the repetition guard: how often a checkpoint's translations repeat themselves, on
its held-out test split and on real documents, under each guard setting, with BLEU and decoding
time, all in one process.

    python scripts/data/fetch_documents.py      # the real documents, once
    python scripts/bench.py repetition --checkpoint runs/demo/checkpoints/last.ckpt
    python scripts/bench.py repetition --checkpoint exports/ct2 --engine ctranslate2 \\
        --data-from runs/demo/checkpoints/last.ckpt --settings off,default --json loops.json

A loop is a run of 1 to 4 characters, a letter among them, written four times or more in a row
(``seq2seq.decoding.repetition.text_loops``: 如如如如, 洪水洪水洪水洪水, gggg); no reference of
the test split holds one. Settings (``--settings``, comma-separated): ``off`` (no guard),
``default`` (the checkpoint's own search settings), or ``name=value`` pairs of the guard's
``SearchConfig`` fields joined by ``+`` (``no_repeat_ngram_size=3+max_repeats=0``).

For each setting: the test split (as ``seq2seq evaluate`` rebuilds it; ``--limit N``: its first
N sentences) translated with ``Translator.translate`` at ``--beam-size``: BLEU and chrF
(sacreBLEU, ``zh``), translations holding a loop, and seconds (the best of ``--rounds`` runs,
the settings alternating, so each time ratio to the first setting compares runs of one
process); then every ``.html``/``.md``/``.srt`` file under ``--documents`` translated whole, as
``seq2seq translate --input FILE`` does: output lines holding Chinese, and those holding a loop
the document itself does not (markup such as ``#ffffff`` is kept as written).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from benchmarks.harness import DOCUMENTS, alternate, write_json
from seq2seq.decoding.repetition import text_loops
from seq2seq.formats import format_of
from seq2seq.formats.encoding import decode_document
from seq2seq.inference.evaluation import load_eval_set, score_translations
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.translator import Translator

_CHINESE = re.compile(r"[\u4e00-\u9fff]")
GUARD_FIELDS = {"max_repeats": int, "no_repeat_ngram_size": int, "repetition_penalty": float}


def parse_setting(text: str) -> dict[str, object] | None:
    """``off`` / ``default`` / ``a=1+b=2`` -> search changes (None: the checkpoint's own)."""
    if text == "default":
        return None
    if text == "off":
        return {"max_repeats": 0, "no_repeat_ngram_size": 0, "repetition_penalty": 1.0}
    changes: dict[str, object] = {}
    for pair in text.split("+"):
        name, _, value = pair.partition("=")
        if name not in GUARD_FIELDS or not value:
            raise SystemExit(
                f"--settings: {pair!r} is not off, default or one of name=value "
                f"with name in {', '.join(GUARD_FIELDS)}"
            )
        changes[name] = GUARD_FIELDS[name](value)
    return changes


def translate_documents(translator: Translator, files: list[Path], beam: int) -> dict[str, int]:
    """Every document translated whole: output lines with Chinese, and those with a loop."""
    lines = looping = 0
    for path in files:
        text_format = format_of(path)
        text = decode_document(path.read_bytes(), text_format, str(path)).text
        options = TranslateOptions(beam_size=beam, format=text_format)
        output = translator.translate([text], options)[0]
        translated = [line for line in output.splitlines() if _CHINESE.search(line)]
        lines += len(translated)
        # A run the document itself holds (a colour #ffffff in a tag) is no loop of ours.
        looping += sum(any(run not in text for run in text_loops(line)) for line in translated)
    return {"document_lines": lines, "document_loops": looping}


def main(argv: list[str] | None = None) -> int:
    args = arguments().parse_args(argv)
    settings = [(name, parse_setting(name)) for name in args.settings.split(",")]
    if args.engine == "ctranslate2":
        base = Translator.from_ctranslate2(args.checkpoint)
    else:
        base = Translator.from_checkpoint(args.checkpoint)
    if args.engine == "ctranslate2" and not (args.data_from or args.src):
        raise SystemExit(
            "--engine ctranslate2: give --data-from (the .ckpt it was exported "
            "from) or --src and --ref"
        )
    data_from = args.data_from or args.checkpoint
    sources, streams, _ = load_eval_set(data_from, src=args.src, refs=args.ref)
    sources = sources[: args.limit]
    references = [stream[: args.limit] for stream in streams]
    translators = {name: base if c is None else base.with_search(**c) for name, c in settings}
    options = TranslateOptions(beam_size=args.beam_size)
    base.translate(sources[:20], options)  # warm-up
    runs = {name: lambda t=t: t.translate(sources, options) for name, t in translators.items()}

    def said(name: str, hypotheses: list[str], seconds: float) -> None:
        loops = sum(bool(text_loops(h)) for h in hypotheses)
        print(f"{name}: {loops} loops, {seconds:.1f} s", file=sys.stderr)

    outputs, best = alternate(runs, args.rounds, each=said)
    results: dict[str, dict] = {}
    for name, hypotheses in outputs.items():
        scores = score_translations(hypotheses, references)
        results[name] = {
            "seconds": best[name],
            "loops": sum(bool(text_loops(h)) for h in hypotheses),
            "bleu": scores["bleu"],
            "chrf": scores["chrf"],
            "examples": [h for h in hypotheses if text_loops(h)][:5],
        }
    files = sorted(
        p for p in Path(args.documents).rglob("*") if p.suffix in (".html", ".md", ".srt")
    )
    for name, _ in settings if files else ():
        print(f"{name}: {len(files)} documents", file=sys.stderr)
        results[name] |= translate_documents(translators[name], files, args.beam_size)
    print_table(results, len(sources), len(files))
    write_json(args.json, results, indent=1)
    return 0


def print_table(results: dict[str, dict], sentences: int, documents: int) -> None:
    first = next(iter(results.values()))["seconds"]
    print(
        f"| setting | test loops (of {sentences}) | BLEU | chrF | time | document lines "
        f"with a loop ({documents} files) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        lines = f"{r.get('document_loops', '-')} of {r.get('document_lines', '-')}"
        print(
            f"| {name} | {r['loops']} ({100 * r['loops'] / max(sentences, 1):.1f}%) | "
            f"{r['bleu']:.2f} | {r['chrf']:.2f} | {r['seconds'] / first:.2f}x | {lines} |"
        )


def arguments() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="a .ckpt, or a CTranslate2 export")
    p.add_argument("--engine", choices=("torch", "ctranslate2"), default="torch")
    p.add_argument(
        "--data-from", help="the .ckpt whose test split to translate (default --checkpoint)"
    )
    p.add_argument("--src", help="instead of a test split: sources, one a line")
    p.add_argument("--ref", action="append", help="their references, one a line (repeatable)")
    p.add_argument(
        "--settings",
        default="off,default,max_repeats=3,no_repeat_ngram_size=3,"
        "repetition_penalty=1.2,repetition_penalty=1.5",
    )
    p.add_argument("--beam-size", type=int, default=5)
    p.add_argument("--limit", type=int, default=None, help="the first N test sentences")
    p.add_argument("--rounds", type=int, default=2, help="timed runs per setting (best kept)")
    p.add_argument("--documents", default=str(DOCUMENTS), help="a folder of real documents")
    p.add_argument("--json", help="write every figure (and a few looping outputs) here")
    return p
