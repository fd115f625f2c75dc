"""Translating text, not sentences: paragraphs, very long lines and HTML with inline tags.

    python scripts/bench.py documents --checkpoint runs/demo/checkpoints/last.ckpt
    python scripts/bench.py documents --checkpoint /tmp/mid.ckpt --quick   # a smoke run

Everything runs in one process on the checkpoint's test split (distinct English sentences),
after one warm-up translation of 20 sentences; times are ``time.perf_counter`` around each
``translate`` call (paragraph rows: the one-per-line run and the split run alternate, best of
``--rounds`` each). Three tables:

1. Paragraphs. Every K (``--per-line 2,4,8``) consecutive test sentences joined with a space
   into one line; the reference of a line is the first reference of each of its sentences
   joined with no space. Rows: the sentences translated one per line (``split=False``, as the
   model was trained) with each group of K outputs joined after; K per line with the default
   ``split=True``; and K per line with ``split=False`` (the old behaviour: the model sees the
   whole paragraph; for K >= 8 only the first ``--no-split-lines`` lines; ``--no-baseline``
   skips these rows). Columns: BLEU and chrF against the joined references, output/reference
   characters, lines whose output is under half their reference's length, seconds and
   milliseconds per source sentence. Below it: each split row against its one-per-line row.
2. Long lines. ``--long-lines`` lines of 40 consecutive sentences each, translated with
   ``split=True``: whether anything was printed to stderr (a warning about windows or cut
   sentences), characters and BLEU against the joined references, and the same sentences
   translated one per line and joined after.
3. HTML. ``--html-sentences`` test sentences of at least 3 words, each as
   ``<p>before <b>bold</b> after</p>`` where bold is 1-2 consecutive words chosen with a seeded
   random generator (``--seed``), punctuation stripped from its ends so the tag wraps words only.
   Ours: ``translate(docs, TranslateOptions(format="html"))`` (the sentence translated whole,
   the tag placed by cross-attention alignment). Baseline, as LibreTranslate /
   argos-translate-html do: each text node translated alone (``split=False``) and the fragments
   concatenated. Columns: BLEU/chrF of
   the output with its tags stripped; outputs whose tags are well formed (one <b>, one </b>,
   <p>...</p> around them, in that order); outputs whose <b> holds some text; and the mean
   character F1 of the text inside <b> against the bolded words translated alone - multiset
   overlap of non-space characters (1.0 for the baseline by construction: it is that text).
"""

from __future__ import annotations

import argparse
import contextlib
import html
import io
import random
import re
import time
from collections import Counter

from benchmarks.harness import timed
from seq2seq.inference.options import TranslateOptions

WARMUP = 20
LONG = 40  # sentences in one long line


def groups(items: list, k: int) -> list[list]:
    return [items[i : i + k] for i in range(0, len(items), k)]


def line_stats(outputs: list[str], references: list[str]) -> dict:
    """BLEU, chrF (one reference per line), character ratio and lines under half length."""
    from seq2seq.inference.evaluation import score_translations

    scores = score_translations(outputs, [references])
    chars = sum(map(len, outputs)) / max(1, sum(map(len, references)))
    short = sum(len(out) < len(ref) / 2 for out, ref in zip(outputs, references, strict=True))
    return {
        "bleu": scores["bleu"],
        "chrf": scores["chrf"],
        "ratio": chars,
        "short": short,
        "lines": len(outputs),
    }


def row(name: str, stats: dict, seconds: float | None, sentences: int) -> str:
    timing = "- | -" if seconds is None else f"{seconds:.2f} | {1000 * seconds / sentences:.1f}"
    return (
        f"| {name} | {stats['bleu']:.2f} | {stats['chrf']:.2f} | {stats['ratio']:.2f} | "
        f"{stats['short']}/{stats['lines']} | {timing} |"
    )


def paragraphs(translator, sources, firsts, singles, single_s, ks, args) -> None:
    print(
        f"\n## Paragraphs: {len(sources)} test sentences, K joined per line, beam "
        f"{args.beam_size}\n"
    )
    print("| run | BLEU | chrF | chars out/ref | lines < half ref | seconds | ms/sentence |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    notes = []
    for k in ks:
        lines = [" ".join(g) for g in groups(sources, k)]
        refs = ["".join(g) for g in groups(firsts, k)]
        joined = ["".join(g) for g in groups(singles, k)]
        base = line_stats(joined, refs)
        # Timed again beside each split run, alternating, best of --rounds each: the machine's
        # speed drifts between runs.
        single_s = seconds = float("inf")
        for _ in range(args.rounds):
            _, once = timed(translator.translate, sources, args.beam_size, split=False)
            outputs, split_once = timed(translator.translate, lines, args.beam_size, split=True)
            single_s, seconds = min(single_s, once), min(seconds, split_once)
        per_sentence = single_s / len(sources)
        print(row(f"one per line (joined after), K={k}", base, single_s, len(sources)))
        stats = line_stats(outputs, refs)
        print(row(f"{k} per line, split", stats, seconds, len(sources)))
        notes.append(
            f"  K={k}: BLEU {stats['bleu'] - base['bleu']:+.2f}, time per sentence "
            f"{seconds / len(sources) / per_sentence:.2f}x"
        )
        if args.no_baseline:
            continue
        n = len(lines) if k < 8 else min(len(lines), args.no_split_lines)
        outputs, seconds = timed(translator.translate, lines[:n], args.beam_size, split=False)
        label = f"{k} per line, --no-split" + (f" (first {n} lines)" if n < len(lines) else "")
        print(row(label, line_stats(outputs, refs[:n]), seconds, min(len(sources), n * k)))
    print("\nsplit rows against one per line (BLEU difference, time per sentence ratio):")
    print("\n".join(notes))


def long_lines(translator, sources, firsts, singles, args) -> None:
    n = min(args.long_lines * LONG, len(sources)) // LONG * LONG
    if not n:
        print(f"\n(long lines skipped: fewer than {LONG} sentences)")
        return
    lines = [" ".join(g) for g in groups(sources[:n], LONG)]
    refs = ["".join(g) for g in groups(firsts[:n], LONG)]
    captured = io.StringIO()
    with contextlib.redirect_stderr(captured):
        outputs, seconds = timed(translator.translate, lines, args.beam_size, split=True)
    joined = ["".join(g) for g in groups(singles[:n], LONG)]
    print(f"\n## Long lines: {len(lines)} lines of {LONG} sentences, beam {args.beam_size}\n")
    print("| run | BLEU | chrF | chars out/ref | lines < half ref | seconds | ms/sentence |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print(row("one per line (joined after)", line_stats(joined, refs), None, n))
    print(row(f"{LONG} per line, split", line_stats(outputs, refs), seconds, n))
    warning = captured.getvalue().strip()
    print(f"\nstderr during the long-line run: {warning or 'nothing'}")


def html_cases(sources, references, count: int, seed: int) -> list[tuple[str, str, str, list]]:
    """(before, bold, after, references) for sentences of >= 3 words with a word to bold."""
    rng, cases = random.Random(seed), []
    for source, refs in zip(sources, references, strict=True):
        words = source.split()
        if len(words) < 3:
            continue
        start = rng.randrange(len(words))
        end = min(len(words), start + rng.choice((1, 2)))
        span = " ".join(words[start:end])
        bold = re.sub(r"^\W+|\W+$", "", span)
        if not bold:
            continue
        lead = span[: span.index(bold)]
        before = " ".join(words[:start] + ([lead] if lead else []))
        after = span[span.index(bold) + len(bold) :] + " " + " ".join(words[end:])
        cases.append((before, bold, after.rstrip(), refs))
        if len(cases) == count:
            break
    return cases


def paragraph(before: str, bold: str, after: str, gap: str = "") -> str:
    before, bold, after = (html.escape(text, quote=False) for text in (before, bold, after))
    return f"<p>{before}{gap}<b>{bold}</b>{after}</p>"


def document(before: str, bold: str, after: str) -> str:
    """The English HTML: a space before <b> unless it follows an opening quote."""
    gap = " " if before and not before.endswith(("'", '"', "(")) else ""
    return paragraph(before, bold, after, gap)


def strip_tags(text: str) -> str:
    return html.unescape(re.sub(r"<[^>]*>", "", text)).strip()


def inside_bold(text: str) -> str | None:
    """The text inside <b>, or None unless the tags are <p>...<b>...</b>...</p>."""
    found = re.fullmatch(r"\s*<p>([^<]*)<b>([^<]*)</b>([^<]*)</p>\s*", text)
    return html.unescape(found.group(2)).strip() if found else None


def char_f1(found: str, wanted: str) -> float:
    found_chars, wanted_chars = Counter(found.replace(" ", "")), Counter(wanted.replace(" ", ""))
    common = sum((found_chars & wanted_chars).values())
    if not common:
        return float(not found_chars and not wanted_chars)
    precision, recall = common / sum(found_chars.values()), common / sum(wanted_chars.values())
    return 2 * precision * recall / (precision + recall)


def html_table(translator, sources, references, args) -> None:
    from seq2seq.inference.evaluation import reference_streams, score_translations

    cases = html_cases(sources, references, args.html_sentences, args.seed)
    docs = [document(before, bold, after) for before, bold, after, _ in cases]
    streams = reference_streams([refs for *_, refs in cases])
    bolds = translator.translate(
        [c[1] for c in cases], TranslateOptions(beam_size=args.beam_size, split=False)
    )
    html = TranslateOptions(beam_size=args.beam_size, format="html")
    ours, ours_s = timed(translator.translate, docs, html)

    def libretranslate() -> list[str]:
        fragments = [part for before, bold, after, _ in cases for part in (before, bold, after)]
        done = translator.translate(
            fragments, TranslateOptions(beam_size=args.beam_size, split=False)
        )
        return [paragraph(*parts) for parts in groups(done, 3)]

    theirs, theirs_s = timed(libretranslate)
    print(
        f"\n## HTML: {len(docs)} test sentences with one <b> of 1-2 words, beam {args.beam_size}\n"
    )
    print(
        "| run | BLEU (tags stripped) | chrF | tags well formed | <b> not empty | "
        "<b> char F1 vs bold alone | seconds | ms/sentence |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    runs = [
        ("ours: translate, format html", ours, ours_s),
        ("text nodes alone (LibreTranslate)", theirs, theirs_s),
    ]
    for name, outputs, seconds in runs:
        scores = score_translations([strip_tags(o) for o in outputs], streams)
        insides = [inside_bold(o) for o in outputs]
        f1 = [char_f1(inside or "", alone) for inside, alone in zip(insides, bolds, strict=True)]
        print(
            f"| {name} | {scores['bleu']:.2f} | {scores['chrf']:.2f} | "
            f"{sum(i is not None for i in insides)}/{len(docs)} | "
            f"{sum(bool(i) for i in insides)}/{len(docs)} | {sum(f1) / len(f1):.2f} | "
            f"{seconds:.2f} | {1000 * seconds / len(docs):.1f} |"
        )
    for doc, out, alone in list(zip(docs, ours, bolds, strict=True))[:3]:
        print(f"  e.g. {doc}\n       -> {out.strip()}   (bold alone: {alone})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--checkpoint",
        default="runs/demo/checkpoints/last.ckpt",
        help="a .ckpt from seq2seq fit (runs/demo/...)",
    )
    parser.add_argument("--beam-size", type=int, default=5, help="(5)")
    parser.add_argument("--sentences", type=int, help="test sentences used (default all)")
    parser.add_argument("--per-line", default="2,4,8", help="sentences per line (2,4,8)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the --no-split rows")
    parser.add_argument(
        "--no-split-lines", type=int, default=100, help="lines for --no-split when K >= 8 (100)"
    )
    parser.add_argument("--long-lines", type=int, default=5, help=f"lines of {LONG} (5)")
    parser.add_argument("--html-sentences", type=int, default=300, help="in HTML (300)")
    parser.add_argument("--seed", type=int, default=1, help="for the bolded words (1)")
    parser.add_argument(
        "--rounds", type=int, default=2, help="paragraph rows: best of this many timed runs (2)"
    )
    quick = "smoke run: 40 sentences, K=2, 1 long line, 20 HTML sentences"
    parser.add_argument("--quick", action="store_true", help=quick)
    args = parser.parse_args(argv)
    if args.quick:
        args.sentences, args.per_line, args.long_lines, args.html_sentences = 40, "2", 1, 20
        args.rounds = 1

    from seq2seq.inference.evaluation import held_out_split
    from seq2seq.inference.translator import Translator

    start = time.perf_counter()
    all_sources, all_references = held_out_split(args.checkpoint, "test")
    sources = all_sources[: args.sentences]
    firsts = [refs[0] for refs in all_references]
    translator = Translator.from_checkpoint(args.checkpoint)
    translator.translate(
        all_sources[-WARMUP:], TranslateOptions(beam_size=args.beam_size)
    )  # warm-up
    singles, single_s = timed(translator.translate, sources, args.beam_size, split=False)
    ks = [int(k) for k in args.per_line.split(",")]
    paragraphs(translator, sources, firsts[: len(sources)], singles, single_s, ks, args)
    n_long = args.long_lines * LONG
    if n_long > len(singles):  # the long lines need more sentences than the paragraphs used
        singles += translator.translate(
            all_sources[len(singles) : n_long],
            TranslateOptions(beam_size=args.beam_size, split=False),
        )
    long_lines(translator, all_sources, firsts, singles, args)
    html_table(translator, all_sources, all_references, args)
    print(f"\n{args.checkpoint}, total {time.perf_counter() - start:.0f} s")
