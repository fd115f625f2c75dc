"""A lexical shortlist's speed and BLEU, in our engine and in CTranslate2 (float32 and int8).

    seq2seq shortlist --checkpoint CKPT --output vmap.txt
    python scripts/bench.py shortlist --checkpoint CKPT --shortlist vmap.txt
    python scripts/bench.py shortlist --checkpoint CKPT --shortlist vmap.txt --split dev \
        --engines ours

One process: the checkpoint is loaded once for our engine (decoding with and without the
shortlist: ``Translator.with_shortlist``), and exported once to CTranslate2 with the shortlist
as its vocabulary map, loaded float32 and int8 (``use_vmap`` on and off on the same model).
The runs alternate, the order reversed every other round, and each time is the best of
``--rounds`` by CPU seconds (``time.process_time``: another job's turns on a shared machine do
not count), one thread per engine by default (``--threads``: with more, a thread spinning while
another waits for a busy core counts too). Beam 5 over the first ``--sentences`` of the split.
Prints per engine: sentences per CPU second without and with the shortlist, their ratio,
sacreBLEU of both and the difference, and the shortlist's mean size per sentence (ours: the
sentence's own candidates; CTranslate2 takes a batch's union, also shown).

Goal (issue 58): at least 1.3x faster at most 0.2 BLEU lower, in both engines. Choose
``seq2seq shortlist``'s ``--per-source``/``--frequent`` on ``--split dev``, not test.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.harness import alternate, described_parser, progress, write_json
from seq2seq.inference.options import TranslateOptions

ENGINES = ("ours", "ct2-fp32", "ct2-int8")


def main(argv: list[str] | None = None) -> None:
    parser = described_parser(__doc__)
    parser.add_argument("--checkpoint", required=True, help="a .ckpt written by 'seq2seq fit'")
    parser.add_argument("--shortlist", required=True, help="a 'seq2seq shortlist' file")
    parser.add_argument("--split", default="test", choices=("test", "dev"), help="(test)")
    parser.add_argument("--sentences", type=int, default=300, help="of the split (300)")
    parser.add_argument("--rounds", type=int, default=2, help="best of this many runs (2)")
    parser.add_argument("--beam-size", type=int, default=5, help="(5)")
    parser.add_argument("--engines", default=",".join(ENGINES), help="(%(default)s)")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="per engine (1: CPU seconds are the work itself, not threads waiting for a "
        "core another job holds)",
    )
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args(argv)
    engines = args.engines.split(",")
    if unknown := set(engines) - set(ENGINES):
        parser.error(f"unknown engines {sorted(unknown)}; choose from {', '.join(ENGINES)}")

    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # CTranslate2's intra_threads default
    torch.set_num_threads(args.threads)
    from seq2seq.inference.evaluation import held_out_split, reference_streams

    say = progress("shortlist", clock=6)
    sources, references = held_out_split(args.checkpoint, args.split)
    sources, references = sources[: args.sentences], references[: args.sentences]
    streams = reference_streams(references)
    with tempfile.TemporaryDirectory() as tmp:
        translators = load(args.checkpoint, args.shortlist, engines, Path(tmp), say)
        options = TranslateOptions(beam_size=args.beam_size)
        for _name, translator in translators.items():  # a warm-up, not timed
            translator.translate(sources[:20], options)
        runs = {name: _run(t, sources, options) for name, t in translators.items()}
        log = lambda name, _, seconds: say(f"{name}: {seconds:.2f} CPU s")  # noqa: E731
        outputs, best = alternate(runs, args.rounds, time.process_time, log)
    figures = report(engines, outputs, best, streams, len(sources))
    figures["mean shortlist"] = sizes(args.checkpoint, args.shortlist, sources)
    print_report(figures, args)
    write_json(args.json, figures)


def _run(translator, sources: list[str], options: TranslateOptions):  # noqa: ANN001, ANN202
    return lambda: translator.translate(sources, options)


def load(checkpoint: str, shortlist: str, engines: list[str], tmp: Path, say) -> dict:  # noqa: ANN001
    """name -> translator: each engine without and with the shortlist (``NAME+sl``)."""
    from seq2seq.inference.engines import read_shortlist
    from seq2seq.inference.translator import Translator

    translators = {}
    if "ours" in engines:
        ours = Translator.from_checkpoint(checkpoint)
        listed = read_shortlist(shortlist, ours.tokenizer, ours.engine.model.config)
        translators |= {"ours": ours, "ours+sl": ours.with_shortlist(listed)}
    if any(name.startswith("ct2") for name in engines):
        from seq2seq.tools.export import export_ctranslate2

        say("exporting to CTranslate2 with the shortlist as its vocabulary map")
        export_ctranslate2(checkpoint, tmp / "ct2", shortlist=shortlist)
    for name in (e for e in engines if e.startswith("ct2")):
        quantize = "int8" if name.endswith("int8") else None
        with_map = Translator.from_ctranslate2(tmp / "ct2", quantize=quantize)
        without = with_map.with_search()  # a copy of the engine, the same loaded model
        without.engine.use_vmap = False
        translators |= {name: without, f"{name}+sl": with_map}
    return translators


def report(engines: list[str], outputs: dict, best: dict, streams, count: int) -> dict:  # noqa: ANN001
    """Per engine: sentences per CPU second and BLEU, without and with the shortlist."""
    from seq2seq.inference.evaluation import score_translations

    figures: dict = {"sentences": count, "engines": {}}
    for name in engines:
        row = {}
        for suffix, key in (("", "without"), ("+sl", "with")):
            bleu = score_translations(outputs[name + suffix], streams)["bleu"]
            row[key] = {"sentences/s": count / best[name + suffix], "bleu": bleu}
        row["speed-up"] = row["with"]["sentences/s"] / row["without"]["sentences/s"]
        row["bleu change"] = row["with"]["bleu"] - row["without"]["bleu"]
        same = sum(a == b for a, b in zip(outputs[name], outputs[name + "+sl"], strict=True))
        row["identical outputs"] = same
        figures["engines"][name] = row
    return figures


def sizes(checkpoint: str, shortlist: str, sources: list[str]) -> dict:
    """Mean candidates of a sentence, and of a CTranslate2-like batch of 32 (their union)."""
    from seq2seq.data.tokenizer import checkpoint_tokenizer
    from seq2seq.inference.checkpoint import load_model
    from seq2seq.inference.engines import read_shortlist

    loaded = load_model(checkpoint)
    listed = read_shortlist(shortlist, loaded.tokenizer, loaded.model.config)
    ids = checkpoint_tokenizer(checkpoint).encode_sources(sources)
    width = max(map(len, ids))
    padded = torch.tensor([row + [0] * (width - len(row)) for row in ids])
    allowed = listed.allowed(padded, loaded.model.config.pad_id)
    unions = [allowed[i : i + 32].any(dim=0).sum() for i in range(0, len(ids), 32)]
    return {
        "sentence": float(allowed.sum(dim=1).float().mean()),
        "batch of 32": float(torch.stack(unions).float().mean()),
        "vocabulary": loaded.model.config.vocab_size,
    }


def print_report(figures: dict, args) -> None:  # noqa: ANN001
    size = figures["mean shortlist"]
    print(
        f"\n{figures['sentences']} {args.split} sentences, beam {args.beam_size}, best of "
        f"{args.rounds} by CPU seconds, {args.threads} thread(s); "
        f"shortlist {Path(args.shortlist).name}: "
        f"{size['sentence']:.0f} of {size['vocabulary']} pieces per sentence, "
        f"{size['batch of 32']:.0f} per batch of 32\n"
    )
    print("| engine | sent/s | sent/s shortlist | speed-up | BLEU | BLEU shortlist | change |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, row in figures["engines"].items():
        without, with_ = row["without"], row["with"]
        print(
            f"| {name} | {without['sentences/s']:.1f} | {with_['sentences/s']:.1f} | "
            f"{row['speed-up']:.2f}x | {without['bleu']:.2f} | {with_['bleu']:.2f} | "
            f"{row['bleu change']:+.2f} |"
        )
