"""``seq2seq distill``: a teacher's translations of its training sources, the corpus a student
is trained on (``seq2seq.inference.distillation``; ``data.modifiers.distilled`` in the
student's config, docs/distillation.md).

The teacher runs on the fastest engine installed: CTranslate2 (the checkpoint exported once,
next to the output, in int8 unless ``--quantize none``), else our own engine (int8 on the CPU).
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path

ENGINES = ("auto", "ctranslate2", "ours")


def add_distill(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, help="the teacher: a .ckpt of 'seq2seq fit'")
    p.add_argument(
        "--output",
        required=True,
        help="the distilled corpus to write (source<TAB>translation lines); a run that was "
        "interrupted goes on after the lines it completed",
    )
    p.add_argument(
        "--split",
        choices=("train", "dev", "test"),
        default="train",
        help="the teacher's split to translate (%(default)s)",
    )
    p.add_argument("--src", help="an English file to translate instead of --split")
    p.add_argument(
        "--ref", action="append", help="its Chinese references (to choose among the n-best)"
    )
    p.add_argument("--limit", type=int, help="only the first this-many sources")
    p.add_argument("--beam-size", type=int, default=5, help="the teacher's beam (%(default)s)")
    p.add_argument(
        "--n-best",
        type=int,
        default=5,
        help="keep, of this many best hypotheses, the closest to the reference by chrF "
        "(1: the best; %(default)s)",
    )
    p.add_argument("--engine", choices=ENGINES, default="auto", help="(%(default)s) see above")
    p.add_argument(
        "--quantize",
        choices=("int8", "none"),
        default="int8",
        help="the teacher's weights while it translates (%(default)s)",
    )
    p.add_argument(
        "--max-time",
        type=float,
        metavar="MINUTES",
        help="start no new chunk after this long: what is done is kept, running again goes "
        "on, and a student trains on the distilled pairs with the rest's references",
    )
    p.add_argument("--no-progress", dest="progress", action="store_false")
    p.set_defaults(run=run_distill)


def run_distill(args: argparse.Namespace) -> int:
    from seq2seq import checks
    from seq2seq.cli.progress import progress_bar
    from seq2seq.inference.distillation import DistillSettings, distill

    checks.writable_file(args.output, "distilled corpus")
    if args.max_time is not None:
        checks.at_least(args.max_time, 0.0, "--max-time")
    sources, references = _sources(args)
    settings = DistillSettings(beam_size=args.beam_size, n_best=args.n_best)
    translate, engine = _teacher(args, settings)
    print(f"distilling {len(sources):,} sources with {engine}", file=sys.stderr)
    deadline = None if args.max_time is None else time.monotonic() + 60 * args.max_time
    with progress_bar(len(sources), "sentences", args.progress, "seq2seq distill") as bar:
        before, now = distill(
            translate, sources, references, args.output, settings, bar.advance, deadline
        )
    if before:
        print(f"resumed after {before:,} lines already in {args.output}", file=sys.stderr)
    if now < len(sources):
        print(
            f"stopped at --max-time: {now:,} of {len(sources):,} sources distilled into "
            f"{args.output}; run the command again to go on",
            file=sys.stderr,
        )
    else:
        print(f"wrote {len(sources):,} distilled pairs to {args.output}", file=sys.stderr)
    return 0


def _sources(args: argparse.Namespace) -> tuple[list[str], list[str] | None]:
    """The sources and their references: ``--src``/``--ref`` files, or the teacher's split."""
    from seq2seq.textio import read_lines

    if args.src:
        sources = read_lines(args.src)
        if args.ref and len(args.ref) > 1:
            raise ValueError("--ref: give one reference file (the n-best is chosen by it)")
        references = read_lines(args.ref[0]) if args.ref else None
    else:
        from seq2seq.inference.evaluation import split_of_checkpoint

        sources, references = split_of_checkpoint(args.checkpoint, args.split)
    if args.limit is not None:
        sources = sources[: args.limit]
        references = references[: args.limit] if references is not None else None
    return sources, references


def _teacher(args: argparse.Namespace, settings):  # noqa: ANN001, ANN202
    """A function translating a batch of sources into n-best lists, and the engine's name."""
    from seq2seq.inference.distillation import teacher_hypotheses
    from seq2seq.inference.translator import Translator

    quantize = None if args.quantize == "none" else args.quantize
    engine = args.engine
    if engine == "auto":
        engine = "ctranslate2" if _has_ctranslate2() else "ours"
    if engine == "ctranslate2":
        directory = _exported(args.checkpoint, Path(args.output))
        translator = Translator.from_ctranslate2(directory, quantize=quantize)
    else:
        translator = Translator.from_checkpoint(args.checkpoint, quantize=quantize)
    name = f"{engine} ({quantize or 'float32'}), beam {settings.beam_size}"
    return partial(teacher_hypotheses, translator, settings), name


def _has_ctranslate2() -> bool:
    import importlib.util

    return importlib.util.find_spec("ctranslate2") is not None


def _exported(checkpoint: str, output: Path) -> Path:
    """The teacher as a CTranslate2 directory beside the output (written once, kept for a
    resumed run; a newer checkpoint is exported again)."""
    from seq2seq.tools.export import export_ctranslate2

    directory = output.with_name(output.name + ".teacher-ct2")
    stamp = directory / "model.bin"
    if not stamp.is_file() or stamp.stat().st_mtime < Path(checkpoint).stat().st_mtime:
        export_ctranslate2(checkpoint, directory)
    return directory
