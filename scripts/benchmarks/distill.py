"""A distilled student against its teacher: BLEU, chrF, speed, latency and size, per engine.

    python scripts/bench.py distill --teacher runs/demo/checkpoints/last.ckpt \\
        --student runs/student/checkpoints/last.ckpt --shortlist runs/student/shortlist.txt
    python scripts/bench.py distill --teacher T --student S --runs teacher:ours,student:ours

One process, beam 5, the teacher's test split (``--sentences`` of it; all by default). Each run
is a model on an engine: ``ours`` (float32, packed), ``ours-int8``, ``ct2-int8`` (CTranslate2,
the checkpoint exported once), each ``+sl`` with the student's shortlist (ours: each sentence's
own candidates; CTranslate2: the vocabulary map). The runs alternate over ``--rounds``, each
time the best by CPU seconds (``time.process_time``: another job's turns on a shared machine
do not count); latency is the median wall time of ``--latency`` sentences translated one at a
time. Prints a table and each run's speed against the teacher on the same engine and against
the teacher on CTranslate2 int8 (issue 58's goals: student 2.5x the teacher at most 0.5 BLEU
lower; the fastest path 3x CTranslate2 int8 serving the teacher; ours serving the student at
least 1.0x it).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.harness import alternate, described_parser, progress, write_json

RUNS = (
    "teacher:ours,student:ours,student:ours+sl,teacher:ours-int8,student:ours-int8,"
    "student:ours-int8+sl,teacher:ct2-int8,student:ct2-int8,student:ct2-int8+sl"
)


def main(argv: list[str] | None = None) -> None:
    parser = described_parser(__doc__)
    parser.add_argument("--teacher", required=True, help="the teacher's .ckpt")
    parser.add_argument("--student", required=True, help="the student's .ckpt")
    parser.add_argument("--shortlist", help="the student's 'seq2seq shortlist' file (+sl runs)")
    parser.add_argument("--runs", default=RUNS, help="MODEL:ENGINE[+sl],... (%(default)s)")
    parser.add_argument("--sentences", type=int, help="the first this-many of the split (all)")
    parser.add_argument("--rounds", type=int, default=1, help="best of this many runs (1)")
    parser.add_argument("--latency", type=int, default=50, help="sentences one at a time (50)")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args(argv)
    runs = [tuple(run.split(":")) for run in args.runs.split(",")]
    if any(len(run) != 2 or run[0] not in ("teacher", "student") for run in runs):
        parser.error("--runs: MODEL:ENGINE items, MODEL teacher or student")
    if any(run[1].endswith("+sl") for run in runs) and not args.shortlist:
        parser.error("a +sl run needs --shortlist")

    from seq2seq.inference.evaluation import held_out_split, reference_streams

    say = progress("distill", clock=6)
    sources, references = held_out_split(args.teacher, "test")
    sources, references = sources[: args.sentences], references[: args.sentences]
    with tempfile.TemporaryDirectory() as tmp:
        models = {"teacher": args.teacher, "student": args.student}
        translators = {f"{m}:{e}": load(models[m], e, args.shortlist, Path(tmp)) for m, e in runs}
        figures = measure(translators, sources, args, say)
    add_scores(figures, reference_streams(references), models)
    print_report(figures, len(sources))
    write_json(args.json, figures)


def load(checkpoint: str, engine: str, shortlist: str | None, tmp: Path):  # noqa: ANN201
    """A Translator of ``checkpoint`` on ``engine`` (see the module docstring)."""
    from seq2seq.inference.translator import Translator

    name, with_list = engine.removesuffix("+sl"), engine.endswith("+sl")
    if name in ("ours", "ours-int8"):
        quantize = "int8" if name == "ours-int8" else None
        translator = Translator.from_checkpoint(checkpoint, quantize=quantize)
        return translator.with_shortlist(read(shortlist, translator)) if with_list else translator
    if name != "ct2-int8":
        raise SystemExit(f"unknown engine {engine!r}: ours, ours-int8 or ct2-int8 (+sl)")
    from seq2seq.tools.export import export_ctranslate2

    directory = tmp / f"{Path(checkpoint).stem}-{abs(hash(checkpoint))}-{with_list}"
    if not directory.exists():
        export_ctranslate2(checkpoint, directory, shortlist=shortlist if with_list else None)
    return Translator.from_ctranslate2(directory, quantize="int8")


def read(shortlist: str, translator):  # noqa: ANN001, ANN201
    from seq2seq.inference.engines import read_shortlist

    return read_shortlist(shortlist, translator.tokenizer, translator.engine.model.config)


def measure(translators: dict, sources: list[str], args, say) -> dict:  # noqa: ANN001
    """Each run's outputs, CPU seconds for the split and median latency of one sentence."""
    from seq2seq.inference.options import TranslateOptions

    options = TranslateOptions(beam_size=5)
    for translator in translators.values():  # a warm-up, not timed
        translator.translate(sources[:20], options)
    runs = {name: _whole(t, sources, options) for name, t in translators.items()}
    log = lambda name, _, seconds: say(f"{name}: {seconds:.2f} CPU s")  # noqa: E731
    outputs, best = alternate(runs, args.rounds, time.process_time, log)
    figures: dict = {"runs": {}}
    for name, translator in translators.items():
        figures["runs"][name] = {
            "outputs": outputs[name],
            "sentences/s": len(sources) / best[name],
            "latency ms": _latency(translator, sources[: args.latency], options),
        }
    return figures


def _whole(translator, sources: list[str], options):  # noqa: ANN001, ANN202
    return lambda: translator.translate(sources, options)


def _latency(translator, sources: list[str], options) -> float:  # noqa: ANN001
    """Median wall milliseconds of one sentence translated alone."""
    times = []
    for source in sources:
        start = time.perf_counter()
        translator.translate([source], options)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def add_scores(figures: dict, streams, models: dict) -> None:  # noqa: ANN001
    """BLEU and chrF of each run, its speed against the teacher on its engine and against the
    teacher on CTranslate2 int8, and the size of each model's weights."""
    from seq2seq.inference.checkpoint import load_model
    from seq2seq.inference.evaluation import score_translations

    parameters = {
        m: sum(p.numel() for p in load_model(path).model.parameters()) for m, path in models.items()
    }
    rows = figures["runs"]
    for name, row in rows.items():
        row.update(score_translations(row.pop("outputs"), streams))
        model, engine = name.split(":")
        row["parameters M"] = parameters[model] / 1e6
        peer = rows.get(f"teacher:{engine.removesuffix('+sl')}")
        row["x teacher, same engine"] = row["sentences/s"] / peer["sentences/s"] if peer else None
        ct2 = rows.get("teacher:ct2-int8")
        row["x teacher on ct2-int8"] = row["sentences/s"] / ct2["sentences/s"] if ct2 else None


HEADER = (
    "| run | params | BLEU | chrF | sent/s | x teacher (engine) | x teacher (ct2 int8) | latency |"
)


def _ratio(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def print_report(figures: dict, count: int) -> None:
    print(f"\n{count} test sentences, beam 5; speed in sentences per CPU second\n")
    print(HEADER)
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, row in figures["runs"].items():
        print(
            f"| {name} | {row['parameters M']:.1f}M | {row['bleu']:.2f} | {row['chrf']:.2f} | "
            f"{row['sentences/s']:.1f} | {_ratio(row['x teacher, same engine'])} | "
            f"{_ratio(row['x teacher on ct2-int8'])} | {row['latency ms']:.1f} ms |"
        )
