"""Verbatim spans: URLs, e-mail addresses, paths, numbers, versions, dates and times,
identifiers, flags, placeholders and acronyms through a translation, kept or lost, under each
mechanism, with the rest of the sentence, the time and the clean-text BLEU, in one process.

    python scripts/data/fetch_documents.py      # the real documents, once
    python scripts/bench.py verbatim --checkpoint runs/demo/checkpoints/last.ckpt
    python scripts/bench.py verbatim --checkpoint EXPORT_DIR --engine ctranslate2 \\
        --modes plain,literal --json verbatim.json

Mechanisms (``--modes``, comma-separated):

- ``plain``: ``TranslateOptions(verbatim=False)``, the model alone.
- ``literal``: ``verbatim=True``: each span marked literal (``seq2seq.formats.verbatim``) and
  put back where attention aligned its characters, as code spans are.
- ``constrained``: ``verbatim=False`` and a glossary mapping each span to itself (the
  constrained beam search places it; ``seq2seq.inference.glossary``).
- ``mix``: both: the search spells the spans, the literal placement guarantees them.

Sentences: ``scripts/data/verbatim_sentences.tsv`` (written for this bench: English, a reference,
the spans each must keep, by kind). Per mode: spans kept (the output holds the span whole, as
``benchmarks.verbatim_counts.occurrences`` reads it), outputs holding a loop
(``seq2seq.decoding.repetition.text_loops``), outputs holding a run of three Latin letters or
more outside their spans (the constrained search's ``gggg`` around a span), BLEU and chrF
against the references (sacreBLEU, ``zh``), and seconds (best of ``--rounds``, the modes
alternating). Clean text: the checkpoint's test split (``--split``; ``--limit N``: its first N)
translated plain and literal: BLEU, chrF and seconds. Seconds are CPU seconds of this process
(``time.process_time``: on a shared machine another job's turns do not count), the best of the
rounds.

Documents: every ``.html``/``.md``/``.srt`` file under ``--documents`` translated whole, as
``seq2seq translate --input FILE`` does, in the modes given (``--document-modes``): the spans
of its running text kept, by kind, as ``benchmarks.verbatim_counts`` counts them (its own
definitions, independent of the translator's), and seconds.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from pathlib import Path

from benchmarks.harness import DATA, DOCUMENTS, alternate, write_json
from benchmarks.verbatim_counts import KINDS, kept, lost_spans, occurrences, running_text
from seq2seq.decoding.repetition import text_loops
from seq2seq.formats import format_of, parse
from seq2seq.formats.encoding import decode_document
from seq2seq.formats.verbatim import Verbatim
from seq2seq.inference.evaluation import load_eval_set, score_translations
from seq2seq.inference.glossary import Glossary, Term
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.translator import Translator

SENTENCES = DATA / "verbatim_sentences.tsv"
MODES = ("plain", "literal", "constrained", "mix")
_LATIN = re.compile(r"[A-Za-z]{3,}")


def read_sentences(path: Path) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(English, reference, [(kind, span)]) of each line of the sentence set."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith(("#", "english\t")):
            continue
        english, chinese, spans = line.split("\t")
        rows.append((english, chinese, [tuple(s.split(":", 1)) for s in spans.split()]))
    return rows


def self_glossary(texts: list[str]) -> Glossary:
    """Each verbatim span the translator finds in ``texts``, mapped to itself."""
    finder = Verbatim()
    found = {text[s.start : s.end] for text in texts for s in finder.spans(text)}
    return Glossary(Term(span, span) for span in sorted(found))


def options_for(mode: str, beam: int, glossary: Glossary | None, **more) -> TranslateOptions:
    return TranslateOptions(
        beam_size=beam,
        verbatim=mode in ("literal", "mix"),
        glossary=glossary if mode in ("constrained", "mix") else None,
        **more,
    )


def translations(translator: Translator, texts: list[str], modes, beam: int, glossary, rounds):
    """Each mode's outputs and best CPU seconds (the machine is shared: CPU time does not count
    another job's turns; run with ``OMP_NUM_THREADS=1``), the modes alternating."""
    runs = {}
    for mode in modes:
        options = options_for(mode, beam, glossary)
        runs[mode] = lambda options=options: translator.translate(texts, options)
    return alternate(runs, rounds, clock=time.process_time)


def bench_sentences(translator: Translator, rows, modes, beam: int, rounds: int) -> dict:
    english = [row[0] for row in rows]
    glossary = self_glossary(english)
    outputs, seconds = translations(translator, english, modes, beam, glossary, rounds)
    return {mode: _sentence_counts(rows, outputs[mode], seconds[mode]) for mode in modes}


def _sentence_counts(rows, outputs: list[str], seconds: float) -> dict:
    by_kind = {kind: [0, 0] for kind in dict.fromkeys(k for row in rows for k, _ in row[2])}
    loops = latin = 0
    lost = []
    for (_, _, spans), output in zip(rows, outputs, strict=True):
        for kind, span in spans:
            by_kind[kind][0] += 1
            held = occurrences(span, output) > 0
            by_kind[kind][1] += held
            if not held:
                lost.append(span)
        loops += bool(text_loops(output))
        rest = output
        for _, span in spans:
            rest = rest.replace(span, " ")
        latin += bool(_LATIN.search(rest))
    score = score_translations(outputs, [[row[1] for row in rows]])
    return {
        "kept": sum(k for _, k in by_kind.values()),
        "spans": sum(n for n, _ in by_kind.values()),
        "by_kind": by_kind,
        "loops": loops,
        "latin_outside_spans": latin,
        "bleu": round(score["bleu"], 2),
        "chrf": round(score["chrf"], 2),
        "seconds": round(seconds, 3),
        "lost": lost,
        "outputs": outputs,
    }


def bench_test_split(translator: Translator, args) -> dict:
    sources, references, _ = load_eval_set(args.checkpoint, args.split, engine=args.engine)
    if args.limit:
        sources = sources[: args.limit]
        references = [stream[: args.limit] for stream in references]
    modes = ("plain", "literal")
    outputs, seconds = translations(translator, sources, modes, args.beam_size, None, args.rounds)
    result = {}
    for mode, found in outputs.items():
        score = score_translations(found, references)
        result[mode] = {
            "bleu": round(score["bleu"], 2),
            "chrf": round(score["chrf"], 2),
            "seconds": round(seconds[mode], 2),
            "outputs": found,
        }
    pairs = zip(result["plain"]["outputs"], result["literal"]["outputs"], strict=True)
    changed = sum(a != b for a, b in pairs)
    result["changed_outputs"] = changed
    return result


def bench_documents(translator: Translator, folder: Path, modes, beam: int) -> dict:
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in (".html", ".md", ".srt"))
    totals = {mode: {kind: [0, 0] for kind in KINDS} for mode in modes}
    seconds = dict.fromkeys(modes, 0.0)
    lost: dict[str, Counter] = {mode: Counter() for mode in modes}
    glossary = None
    for path in files:
        format = format_of(path)
        text = decode_document(path.read_bytes(), format, str(path)).text
        source = running_text(text, format)
        if "constrained" in modes or "mix" in modes:
            glossary = self_glossary(source.split("\n"))
        for mode in modes:
            options = options_for(mode, beam, glossary, format=format)
            document = parse(text, format, str(path))
            start = time.process_time()
            [output] = translator.translate_documents([document], options)
            seconds[mode] += time.process_time() - start
            translated = running_text(output, format)
            for kind, (count, held) in kept(source, translated).items():
                totals[mode][kind][0] += count
                totals[mode][kind][1] += held
            lost[mode].update(f"{k}:{s}" for k, s in lost_spans(source, translated))
        print(f"{path.name}: done", file=sys.stderr, flush=True)
    return {
        "files": len(files),
        "by_kind": totals,
        "seconds": {mode: round(s, 1) for mode, s in seconds.items()},
        "lost": {mode: lost[mode].most_common(40) for mode in modes},
    }


def _share(held: int, count: int) -> str:
    return f"{held}/{count} ({100 * held / count:.1f}%)" if count else "-"


def report(result: dict) -> str:
    lines = []
    sentences = result.get("sentences")
    if sentences:
        modes = list(sentences)
        kinds = list(sentences[modes[0]]["by_kind"])
        first = sentences[modes[0]]["seconds"]
        lines += ["| mode | kept | " + " | ".join(kinds) + " | loops | Latin | BLEU | chrF | s |"]
        lines += ["|---" * (len(kinds) + 7) + "|"]
        for mode, r in sentences.items():
            cells = [f"{held}/{n}" for n, held in (r["by_kind"][k] for k in kinds)]
            lines.append(
                f"| {mode} | {_share(r['kept'], r['spans'])} | "
                + " | ".join(cells)
                + f" | {r['loops']} | {r['latin_outside_spans']} | {r['bleu']} | {r['chrf']} | "
                f"{r['seconds']} ({r['seconds'] / first:.2f}x) |"
            )
    test = result.get("test")
    if test:
        plain, literal = test["plain"], test["literal"]
        lines += [
            "",
            f"test split: plain BLEU {plain['bleu']} chrF {plain['chrf']} {plain['seconds']} s; "
            f"literal BLEU {literal['bleu']} chrF {literal['chrf']} {literal['seconds']} s "
            f"({literal['seconds'] / plain['seconds']:.2f}x); "
            f"{test['changed_outputs']} outputs changed",
        ]
    documents = result.get("documents")
    if documents:
        lines += ["", f"documents ({documents['files']} files), spans of the running text kept:"]
        lines += ["| mode | " + " | ".join(KINDS) + " | all but acronyms | s |"]
        lines += ["|---" * (len(KINDS) + 3) + "|"]
        for mode, kinds in documents["by_kind"].items():
            rest = [sum(kinds[k][i] for k in KINDS if k != "acronym") for i in (0, 1)]
            cells = [_share(kinds[k][1], kinds[k][0]) for k in KINDS]
            lines.append(
                f"| {mode} | "
                + " | ".join(cells)
                + f" | {_share(rest[1], rest[0])} | {documents['seconds'][mode]} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--engine", choices=("torch", "ctranslate2"), default="torch")
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--document-modes", default="plain,literal")
    parser.add_argument("--sentences", type=Path, default=SENTENCES)
    parser.add_argument("--documents", type=Path, default=DOCUMENTS)
    parser.add_argument("--no-documents", action="store_true")
    parser.add_argument("--split", default="test")
    parser.add_argument("--limit", type=int, default=0, help="test sentences (0: all)")
    parser.add_argument("--no-test", action="store_true", help="skip the test split")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if any(m not in MODES for m in modes):
        parser.error(f"--modes: each of {', '.join(MODES)}")
    if args.engine == "ctranslate2":
        translator = Translator.from_ctranslate2(args.checkpoint)
    else:
        translator = Translator.from_checkpoint(args.checkpoint)
    translator.translate(["Warm up 1.2.3."], TranslateOptions(beam_size=args.beam_size))
    result: dict = {"checkpoint": args.checkpoint, "engine": args.engine}
    rows = read_sentences(args.sentences)
    result["sentences"] = bench_sentences(translator, rows, modes, args.beam_size, args.rounds)
    if not args.no_test:
        result["test"] = bench_test_split(translator, args)
    if not args.no_documents and args.documents.is_dir():
        document_modes = [m for m in args.document_modes.split(",") if m]
        result["documents"] = bench_documents(
            translator, args.documents, document_modes, args.beam_size
        )
    print(report(result))
    write_json(args.json, result, indent=1)
    return 0
