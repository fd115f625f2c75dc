"""The ``seq2seq`` command: fit/validate through LightningCLI, and the inference commands."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from seq2seq import checks

COMMANDS = {
    "fit": "train a model (LightningCLI: seq2seq fit --config configs/tiny.yaml)",
    "validate": "run validation of a checkpoint (LightningCLI)",
    "translate": "translate English lines to Chinese (stdin -> stdout by default)",
    "evaluate": "score a checkpoint with sacreBLEU BLEU and chrF",
    "generate": "continue text with a decoder-only model (--prompt, or stdin lines)",
    "average": "average the parameters of several checkpoints",
    "export": "export a checkpoint to Hugging Face (MarianMTModel) or CTranslate2",
    "import": "import a Hugging Face MarianMTModel (OPUS-MT) as a checkpoint",
    "attention": "draw a model's attention for one sentence as heatmaps (PNG)",
    "plot": "draw a run's training curves: loss, validation BLEU, learning rate (PNG)",
    "serve": "serve a model over HTTP: LibreTranslate and OpenAI APIs, a web page",
}
LIGHTNING_COMMANDS = ("fit", "validate")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``seq2seq`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    from seq2seq.errors import USER_ERRORS

    if argv and argv[0] in LIGHTNING_COMMANDS:
        try:
            from seq2seq.training.lightning_cli import lightning_command  # seconds: Lightning loads
        except KeyboardInterrupt:
            print(f"seq2seq {argv[0]}: interrupted before training started", file=sys.stderr)
            return 130
        return lightning_command(argv)
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return 1
    if unknown:
        command = parser.subcommand(args.command)
        command.error(checks.unknown_options_message(command, unknown))
    try:
        check_arguments(args)  # before any model is loaded or any input read
        with interrupts_as_keyboard_interrupt():
            return args.run(args)
    except (*USER_ERRORS, MemoryError, OSError, ValueError) as error:
        print(f"seq2seq {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interrupt:
        print(f"seq2seq {args.command}: interrupted", file=sys.stderr)
        return _interrupt_status(interrupt)


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
        return next(a for a in self._actions
                    if isinstance(a, argparse._SubParsersAction)).choices[name]  # fmt: skip


class Terminated(KeyboardInterrupt):
    """SIGTERM (a job killed, a cluster preempting): handled like Ctrl+C."""


@contextmanager
def interrupts_as_keyboard_interrupt() -> Iterator[None]:
    """SIGTERM raises ``Terminated`` while a command runs, so a killed ``translate`` keeps
    what it wrote and says so, as after Ctrl+C."""
    import signal

    def terminate(signum, frame):
        raise Terminated(signum)

    try:
        previous = signal.signal(signal.SIGTERM, terminate)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM held back while the block runs, delivered when it ends."""
    import signal

    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _interrupt_status(interrupt: KeyboardInterrupt) -> int:
    """128 + the signal, as a shell reports a process a signal ended: 130 Ctrl+C, 143 TERM."""
    import signal

    signum = interrupt.args[0] if isinstance(interrupt, Terminated) else signal.SIGINT
    return 128 + int(signum)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="seq2seq",
        description="English→Chinese Transformer translation toolkit.",
        epilog="Run 'seq2seq COMMAND --help' for the options of one command.",
    )
    parser.add_argument("--version", action="version", version=version_line())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in LIGHTNING_COMMANDS:
        sub.add_parser(name, help=COMMANDS[name], add_help=False)
    _add_translate(sub.add_parser("translate", help=COMMANDS["translate"]))
    _add_evaluate(sub.add_parser("evaluate", help=COMMANDS["evaluate"]))
    _add_generate(sub.add_parser("generate", help=COMMANDS["generate"]))
    _add_average(sub.add_parser("average", help=COMMANDS["average"]))
    _add_export(sub.add_parser("export", help=COMMANDS["export"]))
    _add_import(sub.add_parser("import", help=COMMANDS["import"]))
    _add_attention(sub.add_parser("attention", help=COMMANDS["attention"]))
    _add_plot(sub.add_parser("plot", help=COMMANDS["plot"]))
    _add_serve(sub.add_parser("serve", help=COMMANDS["serve"]))
    return parser


# Options whose values must be at least 1 / at least 0, wherever a command has them.
# (serve's own settings, port included, are checked by seq2seq.serve before its model loads.)
AT_LEAST_ONE = ("beam_size", "max_tokens", "n_best", "window", "max_new_tokens")
AT_LEAST_ZERO = ("max_len_a", "top_k", "temperature", "top_p", "layer", "head")
FINITE = ("length_penalty", "max_len_a", "temperature", "top_p")
READABLE = {"input": "input file", "src": "source file", "eval_json": "evaluation JSON",
            "font": "font file"}
OUTPUT_DIRECTORIES = {"export"}  # commands whose --output is a directory
MAKES_PARENTS = {"import", "average"}  # commands that create --output's directories


def check_arguments(args: argparse.Namespace) -> None:
    """Every option a command took, checked before any model is loaded or input read: the
    one place where all commands validate numbers, paths and the device (``seq2seq.checks``
    does each check, with a one-line error)."""

    def given(name: str):
        return getattr(args, name, None)

    def option(name: str) -> str:
        return "--" + {"run_dir": "run"}.get(name, name).replace("_", "-")

    for name in AT_LEAST_ONE:
        if given(name) is not None:
            checks.at_least(given(name), 1, option(name))
    for name in FINITE:
        checks.finite(given(name), option(name))
    for name in AT_LEAST_ZERO:
        if given(name) is not None:
            checks.at_least(given(name), 0, option(name))
    for name, what in READABLE.items():
        if given(name) is not None:
            checks.readable_file(given(name), what)
    for path in given("ref") or []:
        checks.readable_file(path, "reference file")
    if given("checkpoint") is not None:
        checks.checkpoint(args.checkpoint, given("engine") or "torch")
    for path in [given("data_from"), *(given("checkpoints") or [])]:
        if path is not None:
            checks.checkpoint(path)
    if given("quantize") is not None:  # int8 on a GPU says so, whatever the GPU
        from seq2seq.inference.cpu import check_quantize

        check_quantize(args.quantize, given("device") or "cpu")
    if given("device") is not None:
        checks.device(args.device, given("engine") or "torch")
    if given("hf") is not None:
        _check_hf_source(args.hf)
    if given("eval_json") is not None:
        from seq2seq.inference.evaluation import read_eval_json

        read_eval_json(args.eval_json)
    _check_outputs(args, checks)


def _check_hf_source(name: str) -> None:
    """``import --hf``: a save_pretrained directory, or a hub name (``owner/model``)."""
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ValueError(f"--hf {name}: not a save_pretrained directory (no config.json)")
    elif name.startswith(("/", ".", "~")) or name.count("/") != 1:
        raise ValueError(f"--hf {name}: no such directory (nor a hub name like owner/model)")


def _check_outputs(args: argparse.Namespace, checks) -> None:
    output, hyps = getattr(args, "output", None), getattr(args, "hyps", None)
    if output is not None and args.command in OUTPUT_DIRECTORIES:
        checks.writable_directory(output, "--output")
    elif output is not None:
        checks.writable_file(output, "--output", args.command in MAKES_PARENTS)
        source = getattr(args, "input", None)
        if source is not None and Path(source).resolve() == Path(output).resolve():
            raise ValueError(f"--output {output} is the --input file; write elsewhere")
    if hyps is not None:
        checks.writable_file(hyps, "--hyps")


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

    return (f"seq2seq {installed('seq2seq')} (torch {installed('torch')}, lightning "
            f"{installed('lightning')}, Python {platform.python_version()})")  # fmt: skip


def _add_search_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, help="a .ckpt written by 'seq2seq fit'")
    p.add_argument("--beam-size", type=int, default=5, help="beam width; 1 = greedy (default 5)")
    p.add_argument(
        "--max-tokens",
        type=int,
        default=4000,
        help="decoding batch: source tokens x beam size (default 4000)",
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
        help="output limit a*source_len+b: a (default: the checkpoint's)",
    )
    p.add_argument(
        "--max-len-b",
        type=int,
        default=None,
        help="output limit a*source_len+b: b (default: the checkpoint's)",
    )
    p.add_argument("--device", default="cpu", help="torch device, e.g. cuda (default cpu)")
    p.add_argument(
        "--engine",
        choices=("torch", "ctranslate2"),
        default="torch",
        help="ctranslate2: --checkpoint is a 'seq2seq export --format ctranslate2' directory",
    )
    _add_quantize(p)


def _add_quantize(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quantize", choices=("int8",), default=None,
                   help="int8: linear layers and output projection in int8 on the CPU, "
                   "quantized at load (default: float32)")  # fmt: skip


def _add_split(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-split", dest="split_sentences", action="store_false",
                   help="take each line as one sentence; by default lines are split into "
                   "sentences, translated, and joined again")  # fmt: skip


def _add_glossary(p: argparse.ArgumentParser) -> None:
    p.add_argument("--glossary", metavar="FILE",
                   help="terms to honour: a TSV file of 'English<TAB>Chinese' lines (CSV if "
                   "it ends in .csv); a sentence holding an English term (whole words, any "
                   "case) gets its Chinese term, placed by constrained beam search (beam >= 5)"
                   )  # fmt: skip


def _read_glossary(args: argparse.Namespace):  # noqa: ANN202 (Glossary | None)
    """The ``--glossary`` file, read and checked before the model loads (a bad line fails
    at once, naming it)."""
    if args.glossary is None:
        return None
    from seq2seq.inference.glossary import Glossary

    if args.engine == "ctranslate2":
        raise ValueError("--glossary needs --engine torch (CTranslate2 has no constrained "
                         "beam search)")  # fmt: skip
    return Glossary.read(args.glossary)


def _add_translate(p: argparse.ArgumentParser) -> None:
    from seq2seq.formats import FORMATS

    _add_search_options(p)
    p.add_argument("--input", help="file of English text (default: stdin)")
    p.add_argument("--output", help="file for the translations (default: stdout)")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="text: one output line per input line; html, markdown, srt: the "
                   "markup is kept (default: from --input's extension, else text)")  # fmt: skip
    _add_split(p)
    p.add_argument("--n-best", type=int, default=None, metavar="N",
                   help="write the N best translations of every line, as 'LINE ||| TEXT ||| "
                   "F0= LOG_PROB ||| SCORE' (LINE counts from 0, best first; beam widened to N "
                   "if smaller); text format only")  # fmt: skip
    p.add_argument("--window", type=int, default=1000, metavar="LINES",
                   help="lines sorted and batched together before their translations are "
                   "written, in input order (default 1000; 1 at a terminal)")  # fmt: skip
    _add_glossary(p)
    p.set_defaults(run=run_translate)


def _add_evaluate(p: argparse.ArgumentParser) -> None:
    _add_search_options(p)
    p.add_argument(
        "--split",
        choices=("test", "dev"),
        default=None,
        help="score the held-out split the checkpoint was trained with (default test)",
    )
    p.add_argument("--data-from", metavar="CKPT",
                   help="--split of the data this other checkpoint was trained on (e.g. to score "
                        "an imported model on your test set)")  # fmt: skip
    p.add_argument("--src", help="English source file (instead of --split)")
    p.add_argument("--ref", action="append", help="Chinese reference file; repeat for more")
    p.add_argument("--hyps", help="where to write the hypotheses (default: next to the ckpt)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    _add_split(p)
    _add_glossary(p)
    p.set_defaults(run=run_evaluate)


def _add_generate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, help="a decoder-only .ckpt from 'seq2seq fit'")
    p.add_argument("--prompt", help="text to continue; streamed to stdout (default: stdin lines)")
    p.add_argument("--input", help="file of prompts, one per line (instead of stdin)")
    p.add_argument("--output", help="file for the outputs, one line per prompt (default: stdout)")
    p.add_argument("--max-new-tokens", type=int, default=64, help="tokens to add (default 64)")
    p.add_argument(
        "--temperature", type=float, default=1.0, help="sampling temperature; 0 = greedy (1.0)"
    )
    p.add_argument("--top-k", type=int, default=0, help="sample among the k likeliest (0 = all)")
    p.add_argument(
        "--top-p", type=float, default=1.0, help="nucleus: smallest set with mass p (1.0 = all)"
    )
    p.add_argument(
        "--seed", type=int, default=None,
        help="seed for a reproducible sample: prompt line i gets the same text whatever the "
        "other lines are",
    )  # fmt: skip
    p.add_argument("--greedy", action="store_true", help="always take the likeliest token")
    p.add_argument(
        "--beam-size", type=int, default=1, help="beam search when > 1 (no sampling, no stream)"
    )
    p.add_argument(
        "--max-tokens", type=int, default=4000, help="prompt + new tokens per batch (4000)"
    )
    p.add_argument("--device", default="cpu", help="torch device, e.g. cuda (default cpu)")
    _add_quantize(p)
    p.set_defaults(run=run_generate)


def _add_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, help="an encoder-decoder .ckpt")
    p.add_argument(
        "--format", choices=("hf", "ctranslate2"), default="hf", help="what to write (hf)"
    )
    p.add_argument("--output", required=True, help="directory to write")
    p.add_argument(
        "--eval-json", help="'seq2seq evaluate --json' output: its BLEU goes into the model card"
    )
    p.add_argument(
        "--quantization",
        default=None,
        help="ctranslate2 only: weight type, e.g. int8 (default: float32)",
    )
    p.set_defaults(run=run_export)


def _add_import(p: argparse.ArgumentParser) -> None:
    p.description = ("Turn a MarianMTModel (e.g. OPUS-MT's Helsinki-NLP/opus-mt-en-zh) into a "
                     "checkpoint that translate, evaluate, serve, attention, export and fit "
                     "(--model.init_from) take like any other.")  # fmt: skip
    p.add_argument("--hf", required=True, metavar="DIR_OR_NAME",
                   help="a save_pretrained directory, or a hub name (downloads it)")  # fmt: skip
    p.add_argument("--output", required=True, help="the .ckpt to write")
    p.add_argument("--target-token", default=None, metavar="TOKEN",
                   help="target-language token prefixed to every source, for models with "
                        "several target languages, e.g. '>>cmn_Hans<<' (stored in the "
                        "checkpoint)")  # fmt: skip
    p.set_defaults(run=run_import)


def _add_attention(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, help="a .ckpt from 'seq2seq fit'")
    p.add_argument("--text", required=True, help="English sentence (a prompt for an LM)")
    p.add_argument("--output", default="attention.png", help="PNG to write (attention.png)")
    p.add_argument("--layer", type=int, default=None, help="only this layer (default: all)")
    p.add_argument("--head", type=int, default=None, help="only this head (default: mean)")
    p.add_argument("--beam-size", type=int, default=5, help="search for the output (5)")
    p.add_argument(
        "--max-new-tokens", type=int, default=20, help="LM only: tokens to continue with (20)"
    )
    p.add_argument("--font", default=None, help="a CJK font file (default: found, see README)")
    p.set_defaults(run=run_attention)


def _add_plot(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--run", dest="run_dir", required=True, help="runs/NAME (newest version) or a version dir"
    )
    p.add_argument("--output", default="curves.png", help="PNG to write (curves.png)")
    p.set_defaults(run=run_plot)


def _add_average(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoints", nargs="+", required=True, help="checkpoints to average")
    p.add_argument("--output", required=True, help="the averaged checkpoint to write")
    p.set_defaults(run=run_average)


def _add_serve(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True,
                   help="a .ckpt from 'seq2seq fit' (translator or decoder-only LM), or a "
                   "CTranslate2 export directory with --engine ctranslate2")  # fmt: skip
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=5000, help="port; 0 = any free one (5000)")
    p.add_argument("--engine", choices=("torch", "ctranslate2"), default="torch",
                   help="decoding runtime (torch)")  # fmt: skip
    p.add_argument("--device", default="cpu", help="torch device, e.g. cuda (default cpu)")
    _add_quantize(p)
    p.add_argument(
        "--model-name",
        default=None,
        help="name in /v1/models and the logs (default: the run's name)",
    )
    p.add_argument("--beam-size", type=int, default=5, help="beam width; 1 = greedy (5)")
    p.add_argument(
        "--max-batch-tokens",
        type=int,
        default=4000,
        help="a shared batch holds at most this many source tokens x beam (4000)",
    )
    p.add_argument(
        "--max-wait-ms",
        type=float,
        default=5.0,
        help="how long a request waits for others to share its batch (5)",
    )
    p.add_argument(
        "--max-queue",
        type=int,
        default=2000,
        help="sentences waiting beyond which requests get 429 at once (2000)",
    )
    p.add_argument(
        "--char-limit", type=int, default=5000, help="characters per request, summed over q (5000)"
    )
    p.add_argument(
        "--batch-limit",
        type=int,
        default=1000,
        help="strings per request when q is an array (1000)",
    )
    p.add_argument(
        "--api-keys",
        default=None,
        help="file of accepted keys, one per line: others get 403 (default: open)",
    )
    p.add_argument("--file-limit", type=int, default=200_000,
                   help="characters of a file to /translate_file (200000)")  # fmt: skip
    p.add_argument("--no-continuous", dest="continuous", action="store_false",
                   help="decode every request in whole batches, instead of letting sentences "
                   "join and leave the batch between decoder steps")  # fmt: skip
    p.add_argument("--glossary-dir", metavar="DIR", default=None,
                   help="keep the glossaries made through DeepL's API (/v2/glossaries) in this "
                   "directory, one JSON file each, so they survive a restart (default: in "
                   "memory only)")  # fmt: skip
    p.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as error:
        raise ValueError(f"serving needs its extra: pip install -e '.[serve]' ({error})") from None
    from seq2seq.serve.server import serve

    return serve(args.checkpoint, args.host, args.port, args.engine, args.device,
                 args.model_name, args.beam_size, args.max_batch_tokens, args.max_wait_ms,
                 args.max_queue, args.char_limit, args.batch_limit, args.api_keys,
                 args.continuous, args.quantize, args.file_limit, args.glossary_dir)  # fmt: skip


def _load_translator(args: argparse.Namespace):
    from seq2seq.inference.translator import Translator

    if args.engine == "ctranslate2":
        translator = Translator.from_ctranslate2(args.checkpoint, args.device, args.quantize)
    else:
        translator = Translator.from_checkpoint(args.checkpoint, args.device, args.quantize)
    return translator.with_search(
        length_penalty=args.length_penalty, max_len_a=args.max_len_a, max_len_b=args.max_len_b
    )


def _translate_with_progress(translator, lines: list[str], args, show: bool,
                             glossary=None) -> list[str]:  # fmt: skip
    with progress_bar(len(lines), "lines", show) as bar:
        progress = LineProgress(bar)
        progress.start(len(lines))
        outputs = translator.translate(lines, args.beam_size, args.max_tokens,
                                       progress.advance, args.split_sentences,
                                       progress.set_total, glossary=glossary)  # fmt: skip
        progress.finish()
        return outputs


class _Bar:
    """What a progress bar offers its work: advance(n) and, once known, set_total(n)."""

    def __init__(self, progress=None, task=None) -> None:
        self.progress, self.task = progress, task

    def advance(self, n: int) -> None:
        if self.progress is not None:
            self.progress.advance(self.task, n)

    def set_total(self, total: int) -> None:
        if self.progress is not None:
            self.progress.update(self.task, total=total)

    def set_completed(self, completed: float) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=completed)

    def stop(self) -> None:
        """Leave the bar where it is (before a message that must not be drawn over)."""
        if self.progress is not None:
            self.progress.stop()


@contextmanager
def progress_bar(total: int | None, unit: str, show: bool) -> Iterator[_Bar]:
    """A rich progress bar on stderr (nothing when ``show`` is false)."""
    if not show:
        yield _Bar()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    columns = (*Progress.get_default_columns()[:1], BarColumn(), MofNCompleteColumn(),
               TimeRemainingColumn())  # fmt: skip
    with Progress(*columns, console=Console(stderr=True), transient=False) as progress:
        yield _Bar(progress, progress.add_task(unit, total=total))


def run_translate(args: argparse.Namespace) -> int:
    from seq2seq.formats import format_of, parse
    from seq2seq.textio import read_text, write_text

    text_format = args.format or format_of(args.input)
    if args.n_best is not None and text_format != "text":
        raise ValueError(f"--n-best takes plain text, not --format {text_format}")
    glossary = _read_glossary(args)
    translator = _load_translator(args)  # a wrong checkpoint fails before stdin is read
    if text_format == "text":
        return _translate_lines(translator, args, glossary)
    source = args.input or "<stdin>"
    document = parse(read_text(args.input), text_format, source)
    try:
        with progress_bar(None, "sentences", show=args.input is not None) as bar:
            [output] = translator.translate_documents(
                [document], args.beam_size, args.max_tokens, args.split_sentences, bar.advance,
                bar.set_total, glossary=glossary,
            )
    except KeyboardInterrupt as interrupt:
        print(f"seq2seq translate: interrupted; nothing written (a {text_format} document is "
              "written whole)", file=sys.stderr)  # fmt: skip
        return _interrupt_status(interrupt)
    write_text(output, args.output)
    return 0


def _translate_lines(translator, args: argparse.Namespace, glossary=None) -> int:
    """Plain text, one output line per input line, streamed a window of lines at a time:
    each window's lines are written (and flushed) as soon as they are translated."""
    from seq2seq.inference.translator import line_windows
    from seq2seq.textio import LineWriter, count_lines, stream_lines

    typing = args.input is None and sys.stdin.isatty()
    window = 1 if typing else args.window  # at a terminal, answer each line as it is typed
    # A pipe (--input <(zcat ...)) can be read once only: no count, no total.
    total = count_lines(args.input) if args.input and Path(args.input).is_file() else None
    destination = args.output or "stdout"
    with LineWriter(args.output) as out, \
            progress_bar(total, "lines", show=args.input is not None) as bar:  # fmt: skip
        lines = LineProgress(bar)
        try:
            for chunk in line_windows(stream_lines(args.input), window):
                lines.start(len(chunk))
                outputs = _translate_chunk(translator, chunk, args, lines, glossary)
                with signals_deferred():  # the lines written and their count agree
                    out.write(outputs)
                    lines.finish()
        except KeyboardInterrupt as interrupt:
            bar.stop()
            print(f"seq2seq translate: interrupted; the translations of the first "
                  f"{lines.done_lines:,} input line(s) are in {destination}",
                  file=sys.stderr)  # fmt: skip
            return _interrupt_status(interrupt)
        except BrokenPipeError:  # the reader went away (| head): stop quietly, as cat does
            sys.stdout = None  # nothing more to flush at exit
            return 0
    return 0


def _translate_chunk(translator, chunk: list[str], args, progress: LineProgress,
                     glossary=None) -> list[str]:  # fmt: skip
    """A window's output lines: translations, or with ``--n-best`` N lines per input line."""
    if args.n_best is None:
        return translator.translate(chunk, args.beam_size, args.max_tokens, progress.advance,
                                    args.split_sentences, progress.set_total,
                                    first_line=progress.done_lines + 1,
                                    glossary=glossary)  # fmt: skip
    beam = max(args.beam_size, args.n_best)
    found = translator.translate_n_best(chunk, args.n_best, beam, args.max_tokens,
                                        args.split_sentences, progress.advance,
                                        progress.set_total, glossary,
                                        progress.done_lines + 1)  # fmt: skip
    first = progress.done_lines
    return [f"{first + number} ||| {h.text} ||| F0= {h.log_prob:.4f} ||| {h.score:.4f}"
            for number, hyps in enumerate(found) for h in hyps]  # fmt: skip


class LineProgress:
    """A progress bar counting input lines, moved by the sentences decoded in each window
    (a window of L lines and S sentences advances L / S per sentence), and set exactly to the
    lines done when a window is written: blank lines and repeated sentences count right."""

    def __init__(self, bar: _Bar) -> None:
        self.bar = bar
        self.done_lines = 0  # lines of the windows already written
        self._window = 0
        self._per_sentence = 0.0

    def start(self, lines: int) -> None:
        self._window, self._per_sentence = lines, 0.0

    def set_total(self, sentences: int) -> None:
        self._per_sentence = self._window / sentences if sentences else 0.0

    def advance(self, sentences: int) -> None:
        self.bar.advance(sentences * self._per_sentence)

    def finish(self) -> None:
        self.done_lines += self._window
        self.bar.set_completed(self.done_lines)


def run_evaluate(args: argparse.Namespace) -> int:
    from seq2seq.inference.evaluation import (
        eval_set_label,
        hypotheses_path,
        load_eval_set,
        score_translations,
    )
    from seq2seq.textio import write_lines

    glossary = _read_glossary(args)
    translator = _load_translator(args)
    sources, references, name = load_eval_set(args.data_from or args.checkpoint, args.split,
                                              args.src, args.ref, args.engine)  # fmt: skip
    if not sources:
        raise ValueError(f"{args.src or name}: no sentences to score")
    data_from = None if args.src else args.data_from  # whose split was scored, if not its own
    hyps_path = Path(args.hyps or hypotheses_path(args.checkpoint, name, data_from))
    checks.writable_file(hyps_path, "hypotheses file")  # before the translating, not after
    hypotheses = _translate_with_progress(translator, sources, args, True, glossary)
    result = score_translations(hypotheses, references)
    write_lines(hypotheses, hyps_path)
    result.update({"beam_size": args.beam_size, "hypotheses": str(hyps_path),
                   "eval_set": eval_set_label(name, args.src, data_from)})  # fmt: skip
    if glossary is not None:
        result["glossary"] = args.glossary
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        print(f"BLEU = {result['bleu']:.2f}  ({result['bleu_signature']})")
        print(f"chrF = {result['chrf']:.2f}  ({result['chrf_signature']})")
        print(
            f"{result['sentences']:,} sentences, {result['references']:,} references, "
            f"beam {args.beam_size}; hypotheses in {hyps_path}"
        )
    return 0


def run_generate(args: argparse.Namespace) -> int:
    from seq2seq.decoding.search import SamplingConfig
    from seq2seq.inference.generation import Generator, check_sampling
    from seq2seq.textio import read_lines, write_lines

    temperature = 0.0 if args.greedy else args.temperature
    sampling = SamplingConfig(temperature, args.top_k, args.top_p, args.seed)
    check_sampling(sampling, args.beam_size, args.max_new_tokens)  # before the slow load
    if args.prompt is not None and args.input is not None:
        raise ValueError("give --prompt or --input, not both")
    prompts = [args.prompt] if args.prompt is not None else read_lines(args.input)
    generator = Generator.from_checkpoint(args.checkpoint, args.device, args.quantize)
    options = dict(max_new_tokens=args.max_new_tokens, sampling=sampling,
                   beam_size=args.beam_size, max_tokens=args.max_tokens)  # fmt: skip
    if args.prompt is not None and args.output is None and args.beam_size == 1:
        return _stream_one(generator, args.prompt, options)
    show = len(prompts) > 1 and (args.input is not None or args.output is not None)
    with progress_bar(len(prompts), "prompts", show) as bar:
        outputs = generator.generate(prompts, on_batch=bar.advance, **options)
    write_lines(outputs, args.output)
    return 0


def _stream_one(generator, prompt: str, options: dict) -> int:
    """Print the prompt, then each new piece of text as soon as it is generated."""
    shown = prompt.replace("\n", " ")

    def show(piece: str) -> None:
        nonlocal shown
        piece = piece.replace("\n", " ")
        shown += piece
        sys.stdout.write(piece)
        sys.stdout.flush()

    sys.stdout.write(shown)
    sys.stdout.flush()
    [final] = generator.generate([prompt], on_text=show, **options)
    sys.stdout.write((final[len(shown) :] if final.startswith(shown) else "") + "\n")
    sys.stdout.flush()
    return 0


def run_export(args: argparse.Namespace) -> int:
    from seq2seq.tools import export

    if args.format == "hf":
        out = export.export_hf(args.checkpoint, args.output, args.eval_json)
    else:
        out = export.export_ctranslate2(args.checkpoint, args.output, args.eval_json,
                                        args.quantization)  # fmt: skip
    print(f"exported {args.checkpoint} as {args.format} to {out}")
    return 0


def run_import(args: argparse.Namespace) -> int:
    from seq2seq.inference.checkpoint import load_model
    from seq2seq.tools.pretrained import import_marian

    out = import_marian(args.hf, args.output, args.target_token)
    config = load_model(out).model.config
    print(f"imported {args.hf} to {out}: d_model {config.d_model}, {config.n_encoder_layers}+"
          f"{config.n_decoder_layers} layers, vocabulary {config.vocab_size}, "
          f"activation {config.activation}")  # fmt: skip
    return 0


def run_attention(args: argparse.Namespace) -> int:
    from seq2seq.tools.pictures import attention_picture

    out = attention_picture(args.checkpoint, args.text, args.output, layer=args.layer,
                            head=args.head, beam_size=args.beam_size,
                            max_new_tokens=args.max_new_tokens, font=args.font)  # fmt: skip
    print(f"wrote {out}")
    return 0


def run_plot(args: argparse.Namespace) -> int:
    from seq2seq.tools.pictures import plot_curves

    print(f"wrote {plot_curves(args.run_dir, args.output)}")
    return 0


def run_average(args: argparse.Namespace) -> int:
    from seq2seq.inference.checkpoint import average_checkpoints

    average_checkpoints(args.checkpoints, args.output)
    print(f"averaged {len(args.checkpoints)} checkpoints into {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
