"""Real text besides clean sentences: the test split as written, UPPERCASED and Title Cased, and
short UI strings, titles and words, for one or more checkpoints side by side.

    python scripts/bench.py real-text runs/demo/checkpoints/last.ckpt
    python scripts/bench.py real-text before.ckpt after.ckpt --limit 300 --json real.json
    python scripts/bench.py real-text last.ckpt --no-case-normalizer   # the model alone

Sets (built here; the test split is never trained on, some short segments are):
- ``as written``: the checkpoint's held-out test split as ``seq2seq evaluate`` rebuilds it (one
  item per distinct English sentence, all its references); ``--limit N``: the first N.
- ``UPPERCASE`` / ``Title Case``: the same sources in capitals / with every word capitalised
  (``seq2seq.data.modifiers.title_case``), the same references.
- ``short segments``: ``scripts/data/short_segments.tsv``, 126 UI strings, titles, words and
  phrases with a reference each, written for this bench. Many are in a checkpoint's training
  data all the same: of the demo recipe's, 71 (57 among its 2,000 dictionary pairs, such as
  Cancel → 取消 and Airport → 机场; 20 Tatoeba sentences, such as "Thank you."; some both).
  :func:`held_segments` compares each source with every English the checkpoint trained on
  (its corpus's training split and the pairs its modifiers add, ``dictionary`` and
  ``ui_strings``), in any case and without its end stop, and the figures come apart for the
  segments training does not hold ("unseen", 55 for the demo: what the model does with a new
  short string), for those it holds ("held": what it remembers) and for all 126 (the figures
  of earlier versions). ``--json`` names the held ones.

Each set is translated with ``Translator.translate`` at ``--beam-size`` (5) and scored with
sacreBLEU (BLEU ``zh`` tokenizer, chrF). For the short segments also: outputs that repeat
themselves (a character or word run of 2+ repeats, or a 2-4 character block repeated, that the
reference lacks), outputs ending with 。/！/？ where the source has no end punctuation, empty
outputs, and exact matches. With ``--no-case-normalizer`` the translator reads inputs as given
(``Truecaser`` off): what the model does on its own. Progress on stderr; ``--json FILE``
writes every figure and every short-segment output.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from benchmarks.harness import DATA, write_json
from seq2seq.data.clean import normalize_en
from seq2seq.data.modifiers import title_case
from seq2seq.inference.evaluation import load_eval_set, score_translations
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.translator import Translator

SHORT_SEGMENTS = DATA / "short_segments.tsv"
SHORT_FIGURES = (
    "repeating",
    "without_repetition_pct",
    "added_end_stop",
    "added_end_stop_pct",
    "empty",
    "exact",
    "bleu",
    "chrf",
)
# The short-segment figures' sets: the segments training does not hold, those it holds, all.
SHORT_SETS = {"short segments unseen": False, "short segments held": True, "short segments": None}
_REPEAT = re.compile(r"(.{1,4}?)(?:\s*\1){2,}|([\u4e00-\u9fff]{2,4})\2")
_END_STOP = re.compile(r"[。！？.!?]$")
_END_STOPS = " .!?。！？"


def read_short_segments(path: Path = SHORT_SEGMENTS) -> tuple[list[str], list[str]]:
    """``english<TAB>chinese`` lines (``#`` comments skipped): sources and references."""
    sources, references = [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise SystemExit(f"{path}:{number}: expected english<TAB>chinese")
        sources.append(fields[0])
        references.append(fields[1])
    return sources, references


def english_key(text: str) -> str:
    """An English text as :func:`held_segments` compares it: normalised as the corpus is, any
    case, without its end stop ("Thank you." holds the segment "Thank you")."""
    return normalize_en(text).casefold().rstrip(_END_STOPS)


def held_segments(sources: list[str], training: set[str]) -> list[bool]:
    """Whether the training data holds each segment's English: ``training`` is
    :func:`english_key` of every training source (:func:`training_english`)."""
    return [english_key(source) in training for source in sources]


def training_english(checkpoint: str) -> set[str]:
    """:func:`english_key` of every English the checkpoint trained on: its corpus's training
    split (prepared again if its cache is gone) and the pairs its modifiers add to it
    (``dictionary``: CC-CEDICT's words; ``ui_strings``: catalogs' UI strings)."""
    from seq2seq.data.catalogs import ui_string_pairs
    from seq2seq.data.datamodule import TranslationDataModule
    from seq2seq.data.dictionary import dictionary_pairs
    from seq2seq.inference.checkpoint import read_checkpoint

    hparams = read_checkpoint(checkpoint).get("datamodule_hyper_parameters")
    if not hparams:
        raise SystemExit(f"{checkpoint}: no data settings stored: which segments it trained on")
    datamodule = TranslationDataModule.trained_with(hparams, checkpoint)
    datamodule.prepare_data(lambda line: None)
    sources, _ = datamodule.split_texts("train")
    modifiers = datamodule.modifiers
    if modifiers.dictionary:
        sources += [en for en, _ in dictionary_pairs(modifiers.dictionary, datamodule.seed)]
    if modifiers.ui_strings:
        sources += [en for en, _ in ui_string_pairs(modifiers.ui_strings, modifiers.catalogs)]
    return {english_key(source) for source in sources}


def repeats(output: str, reference: str) -> bool:
    """Whether ``output`` holds a repetition (``天气 天气 天气``, ``尔尔尔``, ``你好你好``)
    that ``reference`` does not."""
    found = _REPEAT.search(output)
    return found is not None and found.group() not in reference


def short_segment_figures(
    sources: list[str], outputs: list[str], references: list[str]
) -> dict[str, object]:
    """The short-segment counts (see the module docstring) and scores; None for an empty set."""
    rows = list(zip(sources, outputs, references, strict=True))
    if not rows:
        return {"segments": 0} | dict.fromkeys(SHORT_FIGURES)
    looping = [o for s, o, r in rows if repeats(o, r)]
    added_stop = [o for s, o, r in rows if _END_STOP.search(o) and not _END_STOP.search(s)]
    scores = score_translations(outputs, [references])
    return {
        "segments": len(rows),
        "repeating": len(looping),
        "without_repetition_pct": round(100 * (1 - len(looping) / len(rows)), 1),
        "added_end_stop": len(added_stop),
        "added_end_stop_pct": round(100 * len(added_stop) / len(rows), 1),
        "empty": sum(not o.strip() for o in outputs),
        "exact": sum(o == r for _, o, r in rows),
        "bleu": scores["bleu"],
        "chrf": scores["chrf"],
    }


def bench_checkpoint(path: str, args: argparse.Namespace) -> dict[str, object]:
    """Every figure for one checkpoint."""
    translator = Translator.from_checkpoint(path)
    if args.no_case_normalizer:
        translator.truecaser.normalize = lambda text: text  # type: ignore[method-assign]
    sources, streams, _ = load_eval_set(path, "test", progress=lambda line: None)
    if args.limit:
        sources, streams = sources[: args.limit], [s[: args.limit] for s in streams]
    variants = {
        "as written": sources,
        "UPPERCASE": [s.upper() for s in sources],
        "Title Case": [title_case(s) for s in sources],
    }
    figures: dict[str, object] = {"checkpoint": path}
    for name, texts in variants.items():
        start = time.perf_counter()
        outputs = translator.translate(texts, TranslateOptions(beam_size=args.beam_size))
        seconds = time.perf_counter() - start
        scores = score_translations(outputs, streams)
        figures[name] = {"bleu": scores["bleu"], "chrf": scores["chrf"], "seconds": seconds}
        print(f"  {name}: BLEU {scores['bleu']} chrF {scores['chrf']}", file=sys.stderr)
    short_sources, short_references = read_short_segments()
    outputs = translator.translate(short_sources, TranslateOptions(beam_size=args.beam_size))
    held = held_segments(short_sources, training_english(path))
    for name, wanted in SHORT_SETS.items():
        rows = [i for i, h in enumerate(held) if wanted is None or h == wanted]
        figures[name] = short_segment_figures(
            *([values[i] for i in rows] for values in (short_sources, outputs, short_references))
        )
    figures["short segment outputs"] = outputs
    figures["short segments in training"] = [
        source for source, h in zip(short_sources, held, strict=True) if h
    ]
    figures["signature"] = scores["bleu_signature"]
    return figures


def print_table(results: list[dict[str, object]]) -> None:
    """One column per checkpoint."""
    names = [str(r["checkpoint"]) for r in results]
    print("| | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for variant in ("as written", "UPPERCASE", "Title Case"):
        cells = [f"{r[variant]['bleu']:.2f} / {r[variant]['chrf']:.2f}" for r in results]
        print(f"| test {variant}: BLEU / chrF | " + " | ".join(cells) + " |")
    rows = {
        "segments without a repetition the reference lacks": "without_repetition_pct",
        "segments gaining an end stop the source lacks (%)": "added_end_stop_pct",
        "empty outputs": "empty",
        "exact matches": "exact",
        "BLEU": "bleu",
        "chrF": "chrf",
    }
    for name in SHORT_SETS:
        counts = [f"{r[name]['segments']}" for r in results]  # type: ignore[index]
        print(f"| {name}: how many | " + " | ".join(counts) + " |")
        for label, key in rows.items():
            cells = [str(r[name][key]) for r in results]  # type: ignore[index]
            print(f"| {name}: {label} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+", help="seq2seq checkpoints to compare")
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--limit", type=int, default=0, help="first N test items (0: all)")
    parser.add_argument("--no-case-normalizer", action="store_true", help="inputs as given")
    parser.add_argument("--json", help="write every figure here")
    args = parser.parse_args(argv)
    results = []
    for path in args.checkpoints:
        print(f"{path}:", file=sys.stderr)
        results.append(bench_checkpoint(path, args))
    print_table(results)
    write_json(args.json, results, indent=1)
