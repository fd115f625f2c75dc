"""LibreTranslate serving our Argos package against our CTranslate2 engine at Argos' settings.

Exports CHECKPOINT with ``seq2seq export --format argos``, installs the package into the real
argostranslate of the LibreTranslate environment (scripts/libretranslate_env.sh), starts the real
``libretranslate`` on 127.0.0.1 offline, and translates the first N sentences of the checkpoint's
test split through its /translate (libretranslatepy) and through
``Translator.from_ctranslate2(<package>/model).with_search(length_penalty=0.2)`` at beam 4.
Every output that differs is put down to its cause:

* touch-up: LibreTranslate's ``improve_translation_formatting`` of our output gives its answer;
* splitting: Argos' splitter cut the sentence otherwise than ours (pysbd);
* joining: with Argos' sentences, our outputs joined as Argos joins them (pieces decoded
  together) and touched up give its answer;
* normalisation: our NFKC/truecasing changed the source;
* length limit: our output stopped at our limit (1.2 x source + 10 tokens; Argos': 256);
* other: none of these.

Rows other than equal and touch-up are printed; ``--json`` writes every row.

    python scripts/bench.py libretranslate-answers --checkpoint runs/demo/checkpoints/last.ckpt
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import tempfile
import time
from pathlib import Path

import torch

from benchmarks import libretranslate
from benchmarks.harness import write_json
from seq2seq.data.clean import normalize_en
from seq2seq.data.sentences import split_sentences
from seq2seq.inference.evaluation import held_out_split
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.translator import Translator
from seq2seq.tools import argos


def touch_up_kind(ours: str, answer: str) -> str:
    """Which of LibreTranslate's touch-ups changed our output into its answer."""
    if ours[:-1] == answer[:-1]:
        return f"final {ours[-1]!r} -> {answer[-1]!r}"
    if answer.startswith(ours):
        return f"{answer[len(ours) :]!r} appended after {ours[-1]!r}"
    if ours.startswith(answer):
        return f"final {ours[len(answer) :]!r} dropped"
    return "other touch-up"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--python", help="LibreTranslate venv python (default: the bench's)")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    python = args.python or libretranslate.libretranslate_python()
    sources = held_out_split(args.checkpoint, "test")[0][: args.sentences]
    with tempfile.TemporaryDirectory() as tmp:
        found = translations(args.checkpoint, python, sources, Path(tmp))
    rows = [row(i, source, found) for i, source in enumerate(sources)]
    print_rows(rows)
    write_json(args.json, rows, indent=1)


def translations(checkpoint: str, python: str, sources: list[str], tmp: Path) -> dict:
    """LibreTranslate's answers and ours at Argos' settings, with what explains a difference:
    the touch-ups of ours, each side's sentences, outputs at the length limit, our tokens
    joined as Argos joins them (and touched up), and ``seq2seq translate``'s own outputs."""
    home = tmp / "lt"
    start = time.perf_counter()
    package = argos.export_argos(checkpoint, tmp / "out")
    print(f"export: {time.perf_counter() - start:.1f} s, {package.stat().st_size / 1e6:.1f} MB")
    installed = libretranslate.install_package(python, package, home)
    from libretranslatepy import LibreTranslateAPI

    start = time.perf_counter()
    with libretranslate.libretranslate(python, home) as (url, _):
        up = time.perf_counter() - start
        api = LibreTranslateAPI(url)
        start = time.perf_counter()
        answers = [api.translate(s, "en", "zh") for s in sources]
        lt_time = time.perf_counter() - start
    print(f"LibreTranslate: up in {up:.1f} s; {len(sources)} requests in {lt_time:.1f} s")
    translator = Translator.from_ctranslate2(installed / "model").with_search(
        length_penalty=argos.ARGOS_LENGTH_PENALTY
    )
    start = time.perf_counter()
    ours = translator.translate(sources, TranslateOptions(beam_size=argos.ARGOS_BEAM_SIZE))
    print(f"ours (CTranslate2, beam 4, lp 0.2): {time.perf_counter() - start:.1f} s")
    default = Translator.from_checkpoint(checkpoint).translate(
        sources, TranslateOptions(beam_size=5)
    )
    argos_split = libretranslate.argos_sentences(python, installed, sources, home)
    limited, joined = argos_joined(translator, argos_split, installed)
    return {
        "translator": translator,
        "answers": answers,
        "ours": ours,
        "default": default,
        "touched": libretranslate.libretranslate_touch_ups(python, sources, ours, home),
        "argos_split": argos_split,
        "our_split": [[s.text for s in split_sentences(t)] for t in sources],
        "limited": limited,
        "predicted": libretranslate.libretranslate_touch_ups(python, sources, joined, home),
    }


def argos_joined(translator, argos_split: list[list[str]], installed: Path):
    """Per source: whether one of its Argos sentences stopped at our length limit, and our
    tokens of its sentences joined as Argos joins them."""
    flat = [s for sentences in argos_split for s in sentences]
    found = translator.translate_n_best(
        flat, TranslateOptions(beam_size=argos.ARGOS_BEAM_SIZE, split=False)
    )
    lengths = [len(translator.encode_sentence(s)) for s in flat]
    limits = translator.search.max_lengths(torch.tensor(lengths)).tolist()
    at_limit = iter([len(h[0].tokens) >= limit - 1 for h, limit in zip(found, limits, strict=True)])
    limited = [any([next(at_limit) for _ in s]) for s in argos_split]
    pieces = iter([[translator.tokenizer.id_to_piece(t) for t in h[0].tokens] for h in found])
    joined = [
        argos.argos_text([next(pieces) for _ in s], installed / "sentencepiece.model")
        for s in argos_split
    ]
    return limited, joined


def cause_of(i: int, source: str, found: dict) -> str:
    """Why LibreTranslate's answer to source ``i`` differs from ours (or "equal")."""
    answer, ours = found["answers"][i], found["ours"][i]
    if answer == ours:
        return "equal"
    if answer == found["touched"][i]:
        return "touch-up"
    if found["argos_split"][i] != found["our_split"][i]:
        return "splitting"
    if answer == found["predicted"][i]:
        return "joining"
    if found["translator"].truecaser.normalize(normalize_en(source)) != source:
        return "normalisation"
    return "length limit" if found["limited"][i] else "other"


def row(i: int, source: str, found: dict) -> dict:
    return {
        "source": source,
        "libretranslate": found["answers"][i],
        "ours": found["ours"][i],
        "seq2seq_translate": found["default"][i],
        "cause": cause_of(i, source, found),
        "argos_sentences": found["argos_split"][i],
        "our_sentences": found["our_split"][i],
        "predicted": found["predicted"][i],
    }


def print_rows(rows: list[dict]) -> None:
    causes = collections.Counter(r["cause"] for r in rows)
    kinds = collections.Counter(
        touch_up_kind(r["ours"], r["libretranslate"]) for r in rows if r["cause"] == "touch-up"
    )
    print(f"{len(rows)} sentences, {platform.processor() or platform.machine()}: {dict(causes)}")
    print("touch-ups:", dict(kinds))
    print(
        "predicted from our tokens == LibreTranslate:",
        sum(r["predicted"] == r["libretranslate"] for r in rows),
    )
    print(
        "seq2seq translate (torch, beam 5, lp 0.6) == ours at Argos' settings:",
        sum(r["seq2seq_translate"] == r["ours"] for r in rows),
    )
    for r in rows:
        if r["cause"] not in ("equal", "touch-up"):
            print(json.dumps(r, ensure_ascii=False))
