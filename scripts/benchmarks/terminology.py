"""Terminology: a glossary forced into the test split by constrained beam search.

    python scripts/bench.py terminology                       # the demo model's test split
    python scripts/bench.py terminology --limit 300 --rounds 1 --json terms.json
    python scripts/bench.py terminology --glossary terms.tsv --usual usual.tsv --src x.en --ref x.zh

The terms (``TERMS``, or ``--glossary FILE``, DeepL's TSV ``english<TAB>chinese``): common
English words of the demo's sentences, each with a Chinese translation the demo model does not
choose on its own, a real synonym of the one it does choose (teacher → 导师 where it writes
老师), and those usual words of its (``--usual FILE``: ``english<TAB>word[,word...]``; a term
missing there keeps the built-in words of the same English, if any). A sentence holds a term
where ``Glossary.terms_in`` finds it: whole words, case-insensitively ("teachers" does not hold
"teacher"). The per-term table checks the choice: the test sentences holding each term, and how
many of their plain (no glossary) outputs already hold the forced term (0 for a sound term) or
one of the usual words.

References with the forced term: in each reference of a sentence holding a term, every
occurrence of the term's usual words (the longest first, left to right, never inside an
occurrence of the forced term) is replaced by the forced term. Per (reference, term): a
reference that already holds the forced term is left as it is ("already"), one holding a usual
word is substituted, and one holding neither keeps its reference as it is ("none": the
reference translated the word some other way, or left it out). Scores against these references
and against the original ones are both given.

Measured in one process on the checkpoint's held-out split (``--split``, as ``seq2seq
evaluate`` rebuilds it, one item per distinct English sentence with all its references) or on
``--src``/``--ref`` files; ``--limit N``: the first N items. After a warm-up (a few sentences,
plain and with the glossary; the first glossary call also builds the vocabulary's spelling
index, timed apart), each of ``--rounds`` rounds times four ``Translator.translate`` calls at
``--beam-size``: plain and with the glossary over the whole split, then over the term sentences
alone, the plain run first in even rounds and the glossary run first in odd ones;
``time.perf_counter`` around each call, the best of the rounds reported. Outputs come from the
first round. The translator searches a sentence with terms at a beam of its own
(``seq2seq.inference.translator.constrained_beam``: the beam asked for, at least 5, and a slot
per bank of constraint tokens up to 12), so the time ratio includes that wider beam; the table gives
how many term sentences got each beam (worked out per line).

Reported: the term rate (term sentences whose glossary output holds every forced term, and
(sentence, term) pairs met; the same for the plain outputs; "holds" as ``missing_terms`` reads
it: the term's text anywhere in the output), the pairs whose output also holds one of the usual
words (the term written beside the model's own word, not in its place), how many term sentences
the translator's missing-term warning named, BLEU and chrF (sacreBLEU, ``zh`` tokenizer) of the term
sentences with and without the glossary against both reference sets (and, against the
original references, the plain outputs with each term substituted for its usual words: the
glossary's ceiling there, since a forced term the references lack costs BLEU), how many
sentences without terms came out byte-identical with and without the glossary, the
glossary/plain time ratios, the per-term table, examples and failures (term sentences whose
glossary output lacks a term).
Progress goes to stderr; ``--json FILE`` also writes every figure, with every term sentence's
outputs and forced reference (``term_outputs``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness import progress, timed, write_json
from benchmarks.terminology_report import print_report
from benchmarks.terminology_terms import (
    OUTCOMES,
    forced_references,
    load_terms,
    substituted_outputs,
)
from seq2seq.inference.options import TranslateOptions

WARMUP = 8  # sentences of the warm-up
say = progress("bench_terminology", clock=6)  # a progress line, with the seconds since the start


# ----------------------------------------------------------------------------- runs
def timed_translate(translator, lines, beam_size, glossary=None) -> tuple[list[str], float, str]:
    """Outputs, seconds and what the translator wrote on stderr (its warnings)."""
    captured = io.StringIO()
    with contextlib.redirect_stderr(captured):
        options = TranslateOptions(beam_size=beam_size, glossary=glossary)
        outputs, seconds = timed(translator.translate, lines, options)
    return outputs, seconds, captured.getvalue()


def measure(translator, sets: dict[str, list[str]], glossary, args) -> dict:
    """{(set, "plain"|"glossary"): {"outputs", "seconds" (best), "stderr"}} over ``--rounds``
    rounds, alternating which run of each pair goes first."""
    runs: dict = {}
    for round_ in range(args.rounds):
        for name, lines in sets.items():
            order = ("plain", "glossary") if round_ % 2 == 0 else ("glossary", "plain")
            for mode in order:
                used = glossary if mode == "glossary" else None
                outputs, seconds, stderr = timed_translate(translator, lines, args.beam_size, used)
                say(
                    f"round {round_ + 1}/{args.rounds}: {name} ({len(lines)} lines), {mode}: "
                    f"{seconds:.2f} s"
                )
                run = runs.setdefault(
                    (name, mode), {"outputs": outputs, "seconds": seconds, "stderr": stderr}
                )
                run["seconds"] = min(run["seconds"], seconds)
    return runs


def warned_count(stderr: str) -> int:
    """Inputs the translator's missing-term warning named (0 without one)."""
    found = re.search(r"(\d+) input\(s\) lack glossary term", stderr)
    return int(found.group(1)) if found else 0


# ----------------------------------------------------------------------------- figures
def term_rates(terms: list, outputs: list[str]) -> dict:
    """Term sentences whose output holds all their terms, and (sentence, term) pairs met."""
    from seq2seq.inference.glossary import missing_terms

    missing = [missing_terms(own, out) for own, out in zip(terms, outputs, strict=True)]
    pairs = sum(map(len, terms))
    return {
        "sentences_all_met": sum(not m for m in missing),
        "sentences": len(terms),
        "sentence_rate": sum(not m for m in missing) / max(1, len(terms)),
        "pairs_met": pairs - sum(map(len, missing)),
        "pairs": pairs,
        "pair_rate": (pairs - sum(map(len, missing))) / max(1, pairs),
    }


def scores(outputs: list[str], references: list[list[str]]) -> dict:
    from seq2seq.inference.evaluation import reference_streams, score_translations

    found = score_translations(outputs, reference_streams(references))
    return {"bleu": round(found["bleu"], 2), "chrf": round(found["chrf"], 2)}


def spelling(tokenizer, text: str) -> str:
    """How the model spells ``text``: its pieces joined by |, e.g. ``导|师``; a character
    the vocabulary lacks comes as byte pieces (``<0xE8><0xBD><0xBF>|车``)."""
    pieces = [tokenizer.id_to_piece(i) for i in tokenizer.encode_target(text)]
    pieces = [p.removeprefix("\u2581") for p in pieces]
    return re.sub(r"(?<=>)\|(?=<0x)", "", "|".join(p for p in pieces if p))


def holds_usual(text: str, target: str, words: Sequence[str]) -> bool:
    """Whether ``text`` holds a usual word outside the forced term (买 of 购买 does not count)."""
    text = text.replace(target, "\0")
    return any(word in text for word in words)


def per_term(glossary, terms, plain, forced, outcomes, usual, tokenizer) -> list[dict]:
    """Per glossary term: its spelling, its sentences, plain and glossary outputs holding the
    forced term or a usual word, and its reference outcomes."""
    rows = []
    for term in glossary:
        which = [i for i, own in enumerate(terms) if term in own]
        words = usual.get(term.source.casefold(), ())
        rows.append(
            {
                "en": term.source,
                "zh": term.target,
                "pieces": spelling(tokenizer, term.target),
                "usual": list(words),
                "sentences": len(which),
                "plain_forced": sum(term.target in plain[i] for i in which),
                "plain_usual": sum(holds_usual(plain[i], term.target, words) for i in which),
                "glossary_forced": sum(term.target in forced[i] for i in which),
                "glossary_usual": sum(holds_usual(forced[i], term.target, words) for i in which),
                **{f"refs_{k}": outcomes.get(term.source, Counter())[k] for k in OUTCOMES},
            }
        )
    return rows


def constrained_beams(terms: list, beam_size: int, tokenizer) -> dict[str, int] | None:
    """{beam (a JSON key): term sentences searched with it}, as the translator widens the
    beam of a sentence with constraints; None where this checkout's translator does not."""
    from seq2seq.inference import translator
    from seq2seq.inference.glossary import term_constraints

    beam_of = getattr(translator, "constrained_beam", None)
    if beam_of is None:
        return None
    beams = Counter(beam_of(beam_size, term_constraints(tokenizer, own)) for own in terms)
    return {str(beam): n for beam, n in sorted(beams.items())}


def report(args, sources, references, glossary, usual, runs, setup_s, tokenizer) -> dict:
    """Every figure of the run, as one JSON-able dict."""
    terms_of = [glossary.terms_in(source) for source in sources]
    held = [i for i, own in enumerate(terms_of) if own]
    others = [i for i, own in enumerate(terms_of) if not own]
    plain, forced = runs[("whole", "plain")]["outputs"], runs[("whole", "glossary")]["outputs"]
    terms = [terms_of[i] for i in held]
    plain_t, forced_t = [plain[i] for i in held], [forced[i] for i in held]
    original = [references[i] for i in held]
    substituted, outcomes = forced_references(terms, original, usual)
    total = Counter()
    for counts in outcomes.values():
        total.update(counts)
    seconds = {f"{name}_{mode}": runs[(name, mode)]["seconds"] for name, mode in runs}
    return {
        "checkpoint": args.checkpoint,
        "ctranslate2": args.ct2,
        "constrained": args.constrained,
        "beam_size": args.beam_size,
        "rounds": args.rounds,
        "items": len(sources),
        "term_sentences": len(held),
        "other_sentences": len(others),
        "glossary_terms": len(glossary),
        "term_rate": term_rates(terms, forced_t),
        "term_rate_plain": term_rates(terms, plain_t),
        "warned_missing": warned_count(runs[("whole", "glossary")]["stderr"]),
        "scores": {
            "plain_vs_forced_refs": scores(plain_t, substituted),
            "glossary_vs_forced_refs": scores(forced_t, substituted),
            "plain_vs_original_refs": scores(plain_t, original),
            "glossary_vs_original_refs": scores(forced_t, original),
        },
        # The ceiling of glossary_vs_original_refs (substituted_outputs).
        "substituted_plain_vs_original_refs": scores(
            substituted_outputs(terms, plain_t, usual), original
        ),
        "reference_outcomes": {k: total[k] for k in OUTCOMES},
        "references_changed": sum(a != b for a, b in zip(substituted, original, strict=True)),
        "identical_other": sum(plain[i] == forced[i] for i in others),
        "same_in_term_only_run": sum(
            a == b for a, b in zip(runs[("terms", "glossary")]["outputs"], forced_t, strict=True)
        ),
        "constrained_beams": constrained_beams(terms, args.beam_size, tokenizer),
        "seconds": seconds,
        "glossary_setup_s": setup_s,
        "ratio_whole": seconds["whole_glossary"] / seconds["whole_plain"],
        "ratio_terms": seconds["terms_glossary"] / max(seconds["terms_plain"], 1e-9),
        "per_term": per_term(glossary, terms_of, plain, forced, outcomes, usual, tokenizer),
        "term_outputs": [
            {
                "source": sources[i],
                "plain": plain[i],
                "glossary": forced[i],
                "terms": [f"{t.source}={t.target}" for t in terms_of[i]],
                "reference": substituted[k][0],
            }
            for k, i in enumerate(held)
        ],
    }


# ----------------------------------------------------------------------------- main
def load_items(args) -> tuple[list[str], list[list[str]]]:
    """The test items: sources and each one's references (None padding dropped)."""
    from seq2seq.inference.evaluation import load_eval_set

    sources, streams, _ = load_eval_set(
        args.data_from or args.checkpoint, args.split, args.src, args.ref, progress=say
    )
    references = [[s[i] for s in streams if s[i] is not None] for i in range(len(sources))]
    return sources[: args.limit], references[: args.limit]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add(
        "--checkpoint",
        default="runs/demo/checkpoints/last.ckpt",
        help="a .ckpt from seq2seq fit (runs/demo/checkpoints/last.ckpt)",
    )
    add(
        "--split",
        choices=("test", "dev"),
        default="test",
        help="the held-out split the checkpoint was trained with (test)",
    )
    add("--data-from", metavar="CKPT", help="--split of this checkpoint's data instead")
    add("--src", help="English source file (instead of --split)")
    add("--ref", action="append", help="Chinese reference file; repeat for more")
    add("--glossary", help="TSV english<TAB>chinese (default: the built-in TERMS)")
    add("--usual", help="TSV english<TAB>word[,word...]: the model's usual words per term")
    add("--limit", type=int, help="only the first N test sentences")
    add("--beam-size", type=int, default=5, help="(5)")
    add("--rounds", type=int, default=3, help="timed rounds, best of (3)")
    add("--examples", type=int, default=5, help="examples and failures printed (5)")
    add("--json", type=Path, help="also write every figure here")
    add(
        "--annotation-only",
        action="store_true",
        help="a model trained with term annotation: terms in the source, no constrained search",
    )
    add(
        "--ct2",
        metavar="DIR",
        help="translate with this 'seq2seq export --format ctranslate2' directory of --checkpoint "
        "instead (CTranslate2 has no constrained search: a term model's glossary by annotation "
        "alone)",
    )
    args = parser.parse_args(argv)
    args.constrained = not (args.annotation_only or args.ct2)  # CTranslate2 has no such search
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    from seq2seq.inference.glossary_bans import bans_available
    from seq2seq.inference.translator import Translator

    glossary, usual = load_terms(args.glossary, args.usual)
    sources, references = load_items(args)
    held = [s for s in sources if glossary.terms_in(s)]
    if not held:
        raise SystemExit("no test sentence holds a glossary term")
    say(
        f"{len(sources):,} sentences, {len(held)} with terms; loading {args.ct2 or args.checkpoint}"
    )
    if args.ct2:
        translator = Translator.from_ctranslate2(args.ct2)
        if not translator.annotates_terms:
            raise SystemExit(f"{args.ct2}: a model without term tags; CTranslate2 has no glossary")
    else:
        translator = Translator.from_checkpoint(args.checkpoint)
    translator.constrain_terms = args.constrained
    say(
        f"glossary: {'annotated in the source' if translator.annotates_terms else 'no annotation'}"
        f", {'constrained beam search' if translator.constrain_terms else 'no constraints'}"
    )
    translator.translate(sources[:WARMUP], TranslateOptions(beam_size=args.beam_size))  # warm-up
    # The first glossary call builds the vocabulary's spelling index: its time less that of
    # the same call again.
    first = [timed_translate(translator, held[:1], args.beam_size, glossary)[1] for _ in "ab"]
    setup_s = first[0] - first[1]
    timed_translate(translator, held[:WARMUP], args.beam_size, glossary)
    runs = measure(translator, {"whole": sources, "terms": held}, glossary, args)
    out = report(args, sources, references, glossary, usual, runs, setup_s, translator.tokenizer)
    out["bans"] = args.constrained and bans_available()  # without CC-CEDICT there are none
    print_report(out, args.examples)
    write_json(args.json, out)
    return out
