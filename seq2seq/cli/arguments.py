"""The parser of the ``seq2seq`` command: its commands, and each command's options.

A default that another part of the toolkit also holds is read from its one home (a constant
or a dataclass field), never written again here; help strings show it with ``%(default)s``.
"""

from __future__ import annotations

import argparse

from seq2seq import checks
from seq2seq.cli import commands, shortlist
from seq2seq.cli.calibrate import add_calibrate
from seq2seq.cli.confident_lines import add_confidence_options
from seq2seq.cli.distill import add_distill
from seq2seq.cli.shared_options import (
    ENGINES,
    add_device,
    add_glossary,
    add_quantize,
    add_repetition_guard,
    add_search_options,
    add_split,
    add_truecase,
    add_verbatim,
)
from seq2seq.decoding.sampling import SamplingConfig
from seq2seq.inference.pieces import MAX_TOKENS
from seq2seq.inference.translator import DEFAULT_WINDOW
from seq2seq.serve.handling import ServerSettings
from seq2seq.serve.protocol import Limits
from seq2seq.serve.server import ServeOptions

COMMANDS = {
    "fit": "train a model (LightningCLI: seq2seq fit --config configs/tiny.yaml)",
    "validate": "run validation of a checkpoint (LightningCLI)",
    "translate": "translate English lines to Chinese (stdin -> stdout by default)",
    "evaluate": "score a checkpoint with sacreBLEU BLEU and chrF",
    "generate": "continue text with a decoder-only model (--prompt, or stdin lines)",
    "average": "average the parameters of several checkpoints",
    "export": "export a checkpoint to Hugging Face (MarianMTModel), CTranslate2 or Argos Translate",
    "import": "import a Hugging Face MarianMTModel (OPUS-MT) as a checkpoint",
    "attention": "draw a model's attention for one sentence as heatmaps (PNG)",
    "plot": "draw a run's training curves: loss, validation BLEU, learning rate (PNG)",
    "serve": "serve a model over HTTP: LibreTranslate and OpenAI APIs, a web page",
    "calibrate": "fit a checkpoint's confidence to chrF on its dev split (stored in it)",
    "distill": "translate a teacher's training sources: the corpus a fast student learns from",
    "shortlist": "learn a lexical shortlist (candidate pieces per source piece) for fast decoding",
}
LIGHTNING_COMMANDS = ("fit", "validate")


class Parser(argparse.ArgumentParser):
    """argparse with whole option names only (``--beam`` is not ``--beam-size``) and errors
    in one line, with the closest option when one was misspelled, instead of the usage."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message: str):
        if message.startswith("unrecognized arguments: "):
            message = checks.unknown_options_message(self, message.split(": ", 1)[1].split())
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def subcommand(self, name: str) -> Parser:
        """The parser of one command (``seq2seq translate``)."""
        subparsers = next(a for a in self._actions if isinstance(a, argparse._SubParsersAction))
        return subparsers.choices[name]


def build_parser() -> Parser:
    """The whole command line: every command's parser, each with its options and its
    ``run`` function."""
    parser = Parser(
        prog="seq2seq",
        description="English→Chinese Transformer translation toolkit.",
        epilog="Run 'seq2seq COMMAND --help' for the options of one command.",
    )
    parser.add_argument("--version", action="version", version=version_line())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in LIGHTNING_COMMANDS:
        sub.add_parser(name, help=COMMANDS[name], add_help=False)
    for name, add_options in OPTIONS.items():
        add_options(sub.add_parser(name, help=COMMANDS[name]))
    return parser


def version_line() -> str:
    """``seq2seq 0.2.0 (torch 2.13.0+cpu, lightning 2.6.6, Python 3.11.7)``, read from the
    installed packages' metadata (nothing imported)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return (
        f"seq2seq {installed('seq2seq')} (torch {installed('torch')}, lightning "
        f"{installed('lightning')}, Python {platform.python_version()})"
    )


def _add_translate(p: argparse.ArgumentParser) -> None:
    from seq2seq.formats import FORMATS
    from seq2seq.formats.encoding import OUTPUT_ENCODINGS

    add_search_options(p)
    p.add_argument("--input", help="file of English text (default: stdin)")
    p.add_argument("--output", help="file for the translations (default: stdout)")
    p.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="text: one output line per input line; html, markdown, srt, po, xliff, docx, "
        "pptx: the markup is kept (default: from --input's extension, else text)",
    )
    p.add_argument(
        "--encoding",
        default=None,
        metavar="NAME",
        help="the encoding the document (html, markdown, srt) is in, over its own declaration; "
        "a byte-order mark still wins (default: found: byte-order mark, <meta charset> or "
        "<?xml encoding>, UTF-8, else detected; see docs/documents.md)",
    )
    p.add_argument(
        "--output-encoding",
        choices=OUTPUT_ENCODINGS,
        default=OUTPUT_ENCODINGS[0],
        help="utf-8: a document is written in UTF-8, its declaration rewritten to say so; "
        "input: in the input's encoding, declaration untouched, characters it cannot hold "
        "as &#NNNNN; in HTML (default %(default)s; plain text is always UTF-8)",
    )
    add_split(p)
    add_truecase(p)
    add_verbatim(p)
    p.add_argument(
        "--target",
        default="zh-Hans",
        metavar="TAG",
        help="the Chinese written: zh-Hans (the model's own Simplified), zh-Hant, zh-TW "
        "(Taiwan's words) or zh-HK: the translation converted by OpenCC (default %(default)s)",
    )
    p.add_argument(
        "--n-best",
        type=int,
        default=None,
        metavar="N",
        help="write the N best translations of every line, as 'LINE ||| TEXT ||| "
        "F0= LOG_PROB ||| SCORE' (LINE counts from 0, best first; beam widened to N "
        "if smaller); text format only",
    )
    add_confidence_options(p)
    p.add_argument(
        "--window",
        type=int,
        default=DEFAULT_WINDOW,
        metavar="LINES",
        help="lines sorted and batched together before their translations are "
        "written, in input order (default %(default)s; 1 at a terminal)",
    )
    add_glossary(p)
    p.set_defaults(run=commands.run_translate)


def _add_evaluate(p: argparse.ArgumentParser) -> None:
    add_search_options(p)
    p.add_argument(
        "--split",
        choices=("test", "dev"),
        default=None,
        help="score the held-out split the checkpoint was trained with (default test)",
    )
    p.add_argument(
        "--data-from",
        metavar="CKPT",
        help="--split of the data this other checkpoint was trained on (e.g. to score "
        "an imported model on your test set)",
    )
    p.add_argument("--src", help="English source file (instead of --split)")
    p.add_argument("--ref", action="append", help="Chinese reference file; repeat for more")
    p.add_argument("--hyps", help="where to write the hypotheses (default: next to the ckpt)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    add_split(p)
    add_truecase(p)
    add_verbatim(p)
    add_glossary(p)
    p.set_defaults(run=commands.run_evaluate)


def _add_generate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, help="a decoder-only .ckpt from 'seq2seq fit'")
    add_repetition_guard(p)
    p.add_argument("--prompt", help="text to continue; streamed to stdout (default: stdin lines)")
    p.add_argument("--input", help="file of prompts, one per line (instead of stdin)")
    p.add_argument("--output", help="file for the outputs, one line per prompt (default: stdout)")
    p.add_argument(
        "--max-new-tokens", type=int, default=64, help="tokens to add (default %(default)s)"
    )
    _add_fields(
        p,
        SamplingConfig,
        ("--temperature", float, "sampling temperature; 0 = greedy (%(default)s)"),
        ("--top-k", int, "sample among the k likeliest (%(default)s = all)"),
        ("--top-p", float, "nucleus: smallest set with mass p (%(default)s = all)"),
        (
            "--seed",
            int,
            "seed for a reproducible sample: prompt line i gets the same text whatever the "
            "other lines are",
        ),
    )
    p.add_argument("--greedy", action="store_true", help="always take the likeliest token")
    p.add_argument(
        "--beam-size", type=int, default=1, help="beam search when > 1 (no sampling, no stream)"
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=MAX_TOKENS,
        help="prompt + new tokens per batch (%(default)s)",
    )
    add_device(p)
    add_quantize(p)
    p.set_defaults(run=commands.run_generate)


def _add_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, help="an encoder-decoder .ckpt")
    p.add_argument(
        "--format",
        choices=("hf", "ctranslate2", "argos"),
        default="hf",
        help="what to write (%(default)s): hf, a MarianMTModel directory; ctranslate2, a "
        "CTranslate2 directory; argos, an Argos Translate package (.argosmodel) that "
        "LibreTranslate serves (docs/libretranslate.md)",
    )
    p.add_argument(
        "--output",
        required=True,
        help="directory to write (argos: translate-en_zh-1_0.argosmodel is written into it)",
    )
    p.add_argument(
        "--eval-json", help="'seq2seq evaluate --json' output: its BLEU goes into the model card"
    )
    p.add_argument(
        "--quantization",
        default=None,
        help="ctranslate2 and argos only: weight type, e.g. int8 (default: float32)",
    )
    shortlist.add_export_shortlist(p)
    p.set_defaults(run=commands.run_export)


def _add_import(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Turn a MarianMTModel (e.g. OPUS-MT's Helsinki-NLP/opus-mt-en-zh) into a "
        "checkpoint that translate, evaluate, serve, attention, export and fit "
        "(--model.init_from) take like any other."
    )
    p.add_argument(
        "--hf",
        required=True,
        metavar="DIR_OR_NAME",
        help="a save_pretrained directory, or a hub name (downloads it)",
    )
    p.add_argument("--output", required=True, help="the .ckpt to write")
    p.add_argument(
        "--target-token",
        default=None,
        metavar="TOKEN",
        help="target-language token prefixed to every source, for models with "
        "several target languages, e.g. '>>cmn_Hans<<' (stored in the "
        "checkpoint)",
    )
    p.set_defaults(run=commands.run_import)


def _add_attention(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, help="a .ckpt from 'seq2seq fit'")
    p.add_argument("--text", required=True, help="English sentence (a prompt for an LM)")
    p.add_argument("--output", default="attention.png", help="PNG to write (%(default)s)")
    p.add_argument("--layer", type=int, default=None, help="only this layer (default: all)")
    p.add_argument("--head", type=int, default=None, help="only this head (default: mean)")
    p.add_argument("--beam-size", type=int, default=5, help="search for the output (%(default)s)")
    p.add_argument(
        "--max-new-tokens",
        type=int,
        default=20,
        help="LM only: tokens to continue with (%(default)s)",
    )
    p.add_argument(
        "--font", default=None, help="a CJK font file (default: found, see docs/evaluation.md)"
    )
    p.set_defaults(run=commands.run_attention)


def _add_plot(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--run", dest="run_dir", required=True, help="runs/NAME (newest version) or a version dir"
    )
    p.add_argument("--output", default="curves.png", help="PNG to write (%(default)s)")
    p.set_defaults(run=commands.run_plot)


def _add_average(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoints", nargs="+", required=True, help="checkpoints to average")
    p.add_argument("--output", required=True, help="the averaged checkpoint to write")
    p.set_defaults(run=commands.run_average)


def _add_serve(p: argparse.ArgumentParser) -> None:
    """Where the model comes from and where it listens: defaults from ``ServeOptions``."""
    p.add_argument(
        "--checkpoint",
        required=True,
        help="a .ckpt from 'seq2seq fit' (translator or decoder-only LM), or a "
        "CTranslate2 export directory with --engine ctranslate2",
    )
    p.add_argument("--host", default=ServeOptions.host, help="address to listen on (%(default)s)")
    p.add_argument(
        "--port", type=int, default=ServeOptions.port, help="port; 0 = any free one (%(default)s)"
    )
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default=ServeOptions.engine,
        help="decoding runtime (%(default)s)",
    )
    add_device(p, ServeOptions.device)
    add_quantize(p)
    p.add_argument(
        "--model-name",
        default=ServeOptions.model_name,
        help="name in /v1/models and the logs (default: the run's name)",
    )
    _add_server_settings(p)
    shortlist.add_shortlist_option(p)
    p.set_defaults(run=commands.run_serve)


def _add_server_settings(p: argparse.ArgumentParser) -> None:
    """What the routes read: defaults from ``ServerSettings`` and its ``Limits``."""
    _add_batching_options(p)
    _add_request_limits(p)
    _add_decoding_and_glossary_options(p)


def _add_batching_options(p: argparse.ArgumentParser) -> None:
    """How requests share batches."""
    _add_fields(
        p,
        ServerSettings,
        ("--beam-size", int, "beam width; 1 = greedy (%(default)s)"),
        (
            "--max-batch-tokens",
            int,
            "a shared batch holds at most this many source tokens x beam (%(default)s)",
        ),
        (
            "--max-wait-ms",
            float,
            "how long a request waits for others to share its batch, waited only while "
            "another request the server has received is yet to queue its sentences "
            "(%(default)g)",
        ),
        (
            "--max-queue",
            int,
            "sentences waiting beyond which requests get 429 at once (%(default)s)",
        ),
    )


def _add_request_limits(p: argparse.ArgumentParser) -> None:
    """What one request may ask, and who may ask."""
    _add_fields(
        p,
        Limits,
        ("--char-limit", int, "characters per request, summed over q (%(default)s)"),
        ("--batch-limit", int, "strings per request when q is an array (%(default)s)"),
    )
    p.add_argument(
        "--api-keys",
        default=None,
        help="file of accepted keys, one per line: others get 403 (default: open)",
    )
    _add_fields(
        p,
        ServerSettings,
        ("--file-limit", int, "characters of a file to /translate_file (%(default)s)"),
    )


def _add_decoding_and_glossary_options(p: argparse.ArgumentParser) -> None:
    """Continuous batching, the truecaser, where DeepL glossaries are kept, and how glossaries
    are met."""
    add_truecase(p)  # every request; /v1/translate's "truecase": false, one request
    add_verbatim(p)  # every request; /v1/translate's "verbatim": false, one request
    add_repetition_guard(p)  # every request
    p.add_argument(
        "--no-continuous",
        dest="continuous",
        action="store_false",
        help="decode every request in whole batches, instead of letting sentences "
        "join and leave the batch between decoder steps",
    )
    p.add_argument(
        "--glossary-dir",
        metavar="DIR",
        default=None,
        help="keep the glossaries made through DeepL's API (/v2/glossaries) in this "
        "directory, one JSON file each, so they survive a restart (default: in "
        "memory only)",
    )
    p.add_argument(
        "--glossary-annotation-only",
        action="store_true",
        help="with a model trained with term annotation: a request's glossary terms are "
        "annotated in the source only, with no constrained beam search (faster, and such "
        "requests share the continuous batch; a term is met as often as the model copies it)",
    )


def _add_fields(p: argparse.ArgumentParser, home: type, *options: tuple[str, type, str]) -> None:
    """Options that each take one value, given as (flag, type, help), whose defaults are the
    fields of ``home`` (a dataclass) named as the options: ``--max-queue`` defaults to
    ``home.max_queue``."""
    for flag, kind, text in options:
        default = getattr(home, flag.removeprefix("--").replace("-", "_"))
        p.add_argument(flag, type=kind, default=default, help=text)


# Every command but Lightning's, in the order ``seq2seq --help`` lists them.
OPTIONS = {
    "translate": _add_translate,
    "evaluate": _add_evaluate,
    "generate": _add_generate,
    "average": _add_average,
    "export": _add_export,
    "import": _add_import,
    "attention": _add_attention,
    "plot": _add_plot,
    "serve": _add_serve,
    "calibrate": add_calibrate,
    "distill": add_distill,
    "shortlist": shortlist.add_shortlist,
}
