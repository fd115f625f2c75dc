"""Options several commands share: the search settings, the device, int8, sentence splitting,
the truecaser, verbatim spans and glossaries. Each default is read from its one home in the
toolkit."""

from __future__ import annotations

import argparse

from seq2seq.cli.shortlist import add_shortlist_option
from seq2seq.inference.cpu import QUANTIZE_CHOICES
from seq2seq.inference.pieces import MAX_TOKENS

ENGINES = ("torch", "ctranslate2")  # --engine: our PyTorch decoding, or a CTranslate2 export


def add_search_options(p: argparse.ArgumentParser) -> None:
    """What translate and evaluate share: the checkpoint, the search and the runtime."""
    p.add_argument("--checkpoint", required=True, help="a .ckpt written by 'seq2seq fit'")
    p.add_argument(
        "--beam-size", type=int, default=5, help="beam width; 1 = greedy (default %(default)s)"
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=MAX_TOKENS,
        help="decoding batch: source tokens x beam size (default %(default)s)",
    )
    p.add_argument(
        "--length-penalty",
        type=float,
        default=None,
        help="GNMT length penalty alpha (default: the checkpoint's, 0.6)",
    )
    p.add_argument(
        "--max-len-a",
        type=float,
        default=None,
        help="output limit a*source_len+b, source_len in tokens as written (without a "
        "glossary's term annotation): a (default: the checkpoint's)",
    )
    p.add_argument(
        "--max-len-b",
        type=int,
        default=None,
        help="output limit a*source_len+b: b (default: the checkpoint's)",
    )
    add_repetition_guard(p)
    add_device(p)
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="torch",
        help="ctranslate2: --checkpoint is a 'seq2seq export --format ctranslate2' directory",
    )
    add_quantize(p)
    add_shortlist_option(p)


def add_repetition_guard(p: argparse.ArgumentParser) -> None:
    """The repetition guard's settings (``seq2seq.decoding.repetition``), over the
    checkpoint's search settings."""
    p.add_argument(
        "--max-repeats",
        type=int,
        default=None,
        metavar="N",
        help="never write a unit of 1 to 4 pieces more than N times in a row (numbers and "
        "punctuation excepted); 0 = off (default: the checkpoint's, 2: 谢谢 and 一个一个 "
        "are kept, 谢谢谢 is not)",
    )
    p.add_argument(
        "--no-repeat-ngram-size",
        type=int,
        default=None,
        metavar="N",
        help="never write an n-gram of N pieces twice in one output, as fairseq, Hugging "
        "Face and CTranslate2 do; 0 = off (default: the checkpoint's, 0)",
    )
    p.add_argument(
        "--repetition-penalty",
        type=float,
        default=None,
        help="divide (multiply, when negative) the logit of every piece already written by "
        "this, as Hugging Face and CTranslate2 do; 1.0 = off (default: the checkpoint's, 1.0)",
    )


def add_device(p: argparse.ArgumentParser, default: str = "cpu") -> None:
    p.add_argument(
        "--device", default=default, help="torch device, e.g. cuda (default %(default)s)"
    )


def add_quantize(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--quantize",
        choices=QUANTIZE_CHOICES,
        default=None,
        help="int8: linear layers and output projection in int8 on the CPU, "
        "quantized at load (default: float32)",
    )


def add_switch_off(p: argparse.ArgumentParser, flag: str, dest: str, help: str) -> None:
    """``flag`` turns off what is on by default: ``dest`` is True unless it is given."""
    p.add_argument(flag, dest=dest, action="store_false", help=help)


def add_split(p: argparse.ArgumentParser) -> None:
    add_switch_off(
        p,
        "--no-split",
        "split_sentences",
        "take each line as one sentence; by default lines are split into sentences, "
        "translated, and joined again",
    )


def add_truecase(p: argparse.ArgumentParser) -> None:
    add_switch_off(
        p,
        "--no-truecase",
        "truecase",
        "read every line as written; by default a SHOUTED or Title Cased line is read in "
        "sentence case with the word forms the checkpoint learnt (one without them, such as "
        "an imported OPUS-MT model, is read as written either way)",
    )


def add_verbatim(p: argparse.ArgumentParser) -> None:
    """What comes through a translation as written (``seq2seq.formats.verbatim``)."""
    p.add_argument(
        "--verbatim",
        metavar="FILE",
        help="more to keep as written: a UTF-8 file of one term a line (kept wherever it "
        "occurs, case-sensitive, whole words) or 're:PATTERN' (a Python regular expression); "
        "'#' starts a comment line",
    )
    add_switch_off(
        p,
        "--no-verbatim",
        "verbatim_builtin",
        "let the model translate URLs, e-mail and network addresses, paths, numbers, versions, "
        "dates and times, identifiers, flags, keyboard shortcuts, placeholders and acronyms "
        "(kept exactly as written by default); a --verbatim file's terms are still kept",
    )


def add_glossary(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--glossary",
        metavar="FILE",
        help="terms to honour: a TSV file of 'English<TAB>Chinese' lines (CSV if "
        "it ends in .csv); a sentence holding an English term (whole words, any "
        "case) gets its Chinese term, placed by constrained beam search (beam >= 5); a "
        "model trained with term annotation (data.modifiers.terms) also reads it in the "
        "source",
    )
    p.add_argument(
        "--glossary-annotation-only",
        action="store_true",
        help="with a model trained with term annotation: the terms in the source only, no "
        "constrained beam search (faster; a term is met as often as the model copies it)",
    )
