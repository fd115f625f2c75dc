"""What each command does once its options are checked: the ``run_*`` functions, one per
command, each returning the exit status. The heavy imports happen inside them, so a command
loads only what it uses."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from seq2seq import checks
from seq2seq.cli.confident_lines import (
    check_confidence_options,
    confident_lines,
    wants_confidence,
)
from seq2seq.cli.document_checks import (
    check_encodings,
    format_from_name,
    nothing_written,
    translate_whole,
    translate_zipped,
)
from seq2seq.cli.interrupts import interrupt_status, signals_deferred
from seq2seq.cli.progress import LineProgress, progress_bar


def _read_glossary(args: argparse.Namespace):  # noqa: ANN202 (Glossary | None)
    """The ``--glossary`` file, read and checked before the model loads (a bad line fails
    at once, naming it)."""
    if args.glossary is None:
        return None
    from seq2seq.inference.glossary import Glossary

    return Glossary.read(args.glossary)


def _read_verbatim(args: argparse.Namespace):  # noqa: ANN202 (Verbatim | bool)
    """``TranslateOptions.verbatim`` from ``--verbatim FILE`` and ``--no-verbatim``: the file
    is read and checked before the model loads (a bad line fails at once, naming it)."""
    if args.verbatim is None:
        return args.verbatim_builtin
    from seq2seq.formats.verbatim import Verbatim

    return Verbatim.read(args.verbatim, builtin=args.verbatim_builtin)


def _check_glossary_engine(translator, args: argparse.Namespace) -> None:  # noqa: ANN001
    """CTranslate2 has no constrained beam search: a glossary needs a model trained with term
    annotation there (``data.modifiers.terms``), which reads the terms in its source."""
    if getattr(args, "glossary", None) and args.engine == "ctranslate2":
        if not translator.annotates_terms:
            raise ValueError(
                "--glossary with --engine ctranslate2 needs a model trained with term "
                "annotation (data.modifiers.terms); CTranslate2 has no constrained beam search"
            )


def _load_translator(args: argparse.Namespace):  # noqa: ANN202 (Translator)
    from seq2seq.inference.translator import ANNOTATION_ONLY_IGNORED, Translator

    if args.engine == "ctranslate2":
        translator = Translator.from_ctranslate2(args.checkpoint, args.device, args.quantize)
    else:
        translator = Translator.from_checkpoint(
            args.checkpoint, args.device, args.quantize, args.shortlist
        )
    _check_glossary_engine(translator, args)
    alone = getattr(args, "glossary_annotation_only", False)
    if alone and getattr(args, "glossary", None) and not translator.annotates_terms:
        print(f"warning: {ANNOTATION_ONLY_IGNORED}", file=sys.stderr)
    translator.constrain_terms = not alone
    return translator.with_search(**search_changes(args))


SEARCH_OPTIONS = (
    "length_penalty",
    "max_len_a",
    "max_len_b",
    "max_repeats",
    "no_repeat_ngram_size",
    "repetition_penalty",
)


def search_changes(args: argparse.Namespace) -> dict[str, object]:
    """The search settings given on the command line, over the checkpoint's."""
    given = {name: getattr(args, name, None) for name in SEARCH_OPTIONS}
    return {name: value for name, value in given.items() if value is not None}


def run_translate(args: argparse.Namespace) -> int:
    from seq2seq.formats import ZIPPED, parse
    from seq2seq.formats.encoding import check_output_encoding, decode_document, encode_document
    from seq2seq.textio import read_bytes, write_bytes

    text_format = format_from_name(args)
    check_encodings(args, text_format)
    if args.n_best is not None and text_format != "text":
        raise ValueError(f"--n-best takes plain text, not --format {text_format}")
    check_confidence_options(args, text_format)
    glossary = _read_glossary(args)
    args.verbatim_rules = _read_verbatim(args)
    translator = _load_translator(args)  # a wrong checkpoint fails before stdin is read
    if text_format == "text":
        return _translate_lines(translator, args, glossary)
    if text_format in ZIPPED:
        return translate_zipped(
            translator, args, _options(args, glossary, text_format), text_format
        )
    source = args.input or "<stdin>"
    decoded = decode_document(read_bytes(args.input), text_format, source, args.encoding)
    for warning in decoded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    check_output_encoding(decoded, text_format, args.output_encoding)
    document = parse(decoded.text, text_format, source)
    show = args.input is not None
    try:
        options = _options(args, glossary, text_format)
        [output] = translate_whole(translator, [document], options, show)
    except KeyboardInterrupt as interrupt:
        return nothing_written(text_format, interrupt)
    destination = args.output or "<stdout>"
    encoded = encode_document(output, text_format, decoded, args.output_encoding, destination)
    write_bytes(encoded, args.output)
    return 0


def _translate_lines(translator, args: argparse.Namespace, glossary=None) -> int:
    """Plain text, one output line per input line, streamed a window of lines at a time:
    each window's lines are written (and flushed) as soon as they are translated."""
    from seq2seq.inference.pieces import line_windows
    from seq2seq.textio import LineWriter, count_lines, stream_lines

    typing = args.input is None and sys.stdin.isatty()
    window = 1 if typing else args.window  # at a terminal, answer each line as it is typed
    # A pipe (--input <(zcat ...)) can be read once only: no count, no total.
    total = count_lines(args.input) if args.input and Path(args.input).is_file() else None
    destination = args.output or "stdout"
    with (
        LineWriter(args.output) as out,
        progress_bar(total, "lines", args.input is not None, "seq2seq translate") as bar,
    ):
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
            print(
                f"seq2seq translate: interrupted; the translations of the first "
                f"{lines.done_lines:,} input line(s) are in {destination}",
                file=sys.stderr,
            )
            return interrupt_status(interrupt)
        except BrokenPipeError:  # the reader went away (| head): stop quietly, as cat does
            sys.stdout = None  # nothing more to flush at exit
            return 0
    return 0


def _translate_chunk(
    translator, chunk: list[str], args, progress: LineProgress, glossary=None
) -> list[str]:
    """A window's output lines: translations, or with ``--n-best`` N lines per input line."""
    options = _options(args, glossary)
    if wants_confidence(args):
        first = progress.done_lines + 1
        return confident_lines(translator, chunk, options, args, first, progress)
    if args.n_best is None:
        return translator.translate(
            chunk, options, progress=progress, first_line=progress.done_lines + 1
        )
    found = translator.translate_n_best(
        chunk,
        replace(options, n_best=args.n_best),
        progress=progress,
        first_line=progress.done_lines + 1,
    )
    first = progress.done_lines
    return [
        f"{first + number} ||| {h.text} ||| F0= {h.log_prob:.4f} ||| {h.score:.4f}"
        for number, hyps in enumerate(found)
        for h in hyps
    ]


def _options(args: argparse.Namespace, glossary=None, text_format: str = "text"):  # noqa: ANN202
    """The ``TranslateOptions`` of ``translate``'s and ``evaluate``'s options (``text_format``:
    the document's, so that an HTML page or a Word file says the target's language)."""
    from seq2seq.inference.options import TranslateOptions

    return TranslateOptions(
        format=text_format,
        beam_size=args.beam_size,
        max_tokens=args.max_tokens,
        split=args.split_sentences,
        glossary=glossary,
        truecase=args.truecase,
        verbatim=args.verbatim_rules,
        target=getattr(args, "target", "zh-Hans"),  # evaluate scores the model's Simplified
    )


def _translate_with_progress(
    translator, lines: list[str], args, show: bool, glossary=None
) -> list[str]:
    with progress_bar(len(lines), "lines", show) as bar:
        progress = LineProgress(bar)
        progress.start(len(lines))
        outputs = translator.translate(lines, _options(args, glossary), progress=progress)
        progress.finish()
        return outputs


def run_evaluate(args: argparse.Namespace) -> int:
    from seq2seq.inference.evaluation import (
        eval_set_label,
        hypotheses_path,
        load_eval_set,
        score_translations,
    )
    from seq2seq.textio import write_lines

    glossary = _read_glossary(args)
    args.verbatim_rules = _read_verbatim(args)
    translator = _load_translator(args)
    sources, references, name = load_eval_set(
        args.data_from or args.checkpoint, args.split, args.src, args.ref, args.engine
    )
    if not sources:
        raise ValueError(f"{args.src or name}: no sentences to score")
    data_from = None if args.src else args.data_from  # whose split was scored, if not its own
    hyps_path = Path(args.hyps or hypotheses_path(args.checkpoint, name, data_from))
    checks.writable_file(hyps_path, "hypotheses file")  # before the translating, not after
    hypotheses = _translate_with_progress(translator, sources, args, True, glossary)
    result = score_translations(hypotheses, references)
    write_lines(hypotheses, hyps_path)
    result.update(
        {
            "beam_size": args.beam_size,
            "hypotheses": str(hyps_path),
            "eval_set": eval_set_label(name, args.src, data_from),
        }
    )
    if glossary is not None:
        result["glossary"] = args.glossary
    if not args.truecase:
        result["truecase"] = False
    if args.verbatim is not None:
        result["verbatim"] = args.verbatim
    if not args.verbatim_builtin:
        result["verbatim_builtin"] = False
    _print_scores(result, args.json)
    return 0


def _print_scores(result: dict, as_json: bool) -> None:
    """``evaluate``'s answer: one JSON object, or three lines for a person."""
    if as_json:
        print(json.dumps(result, ensure_ascii=False))
        return
    print(f"BLEU = {result['bleu']:.2f}  ({result['bleu_signature']})")
    print(f"chrF = {result['chrf']:.2f}  ({result['chrf_signature']})")
    print(
        f"{result['sentences']:,} sentences, {result['references']:,} references, "
        f"beam {result['beam_size']}; hypotheses in {result['hypotheses']}"
    )


def run_generate(args: argparse.Namespace) -> int:
    from seq2seq.decoding.sampling import SamplingConfig
    from seq2seq.inference.generation import Generator, check_sampling
    from seq2seq.textio import read_lines, write_lines

    temperature = 0.0 if args.greedy else args.temperature
    sampling = SamplingConfig(temperature, args.top_k, args.top_p, args.seed)
    check_sampling(sampling, args.beam_size, args.max_new_tokens)  # before the slow load
    if args.prompt is not None and args.input is not None:
        raise ValueError("give --prompt or --input, not both")
    prompts = [args.prompt] if args.prompt is not None else read_lines(args.input)
    generator = Generator.from_checkpoint(args.checkpoint, args.device, args.quantize)
    generator.search = replace(generator.search, **search_changes(args))  # the guard's options
    options = dict(
        max_new_tokens=args.max_new_tokens,
        sampling=sampling,
        beam_size=args.beam_size,
        max_tokens=args.max_tokens,
    )
    if args.prompt is not None and args.output is None and args.beam_size == 1:
        return _stream_one(generator, args.prompt, options)
    show = len(prompts) > 1 and (args.input is not None or args.output is not None)
    with progress_bar(len(prompts), "prompts", show, "seq2seq generate") as bar:
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
    elif args.format == "argos":
        from seq2seq.tools.argos import export_argos

        out = export_argos(args.checkpoint, args.output, args.eval_json, args.quantization)
    else:
        out = export.export_ctranslate2(
            args.checkpoint, args.output, args.eval_json, args.quantization, None, args.shortlist
        )
    print(f"exported {args.checkpoint} as {args.format} to {out}")
    return 0


def run_import(args: argparse.Namespace) -> int:
    from seq2seq.inference.checkpoint import load_model
    from seq2seq.tools.pretrained import import_marian

    out = import_marian(args.hf, args.output, args.target_token)
    config = load_model(out).model.config
    print(
        f"imported {args.hf} to {out}: d_model {config.d_model}, {config.n_encoder_layers}+"
        f"{config.n_decoder_layers} layers, vocabulary {config.vocab_size}, "
        f"activation {config.activation}"
    )
    return 0


def run_attention(args: argparse.Namespace) -> int:
    from seq2seq.tools.pictures import attention_picture

    out = attention_picture(
        args.checkpoint,
        args.text,
        args.output,
        layer=args.layer,
        head=args.head,
        beam_size=args.beam_size,
        max_new_tokens=args.max_new_tokens,
        font=args.font,
    )
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


def run_serve(args: argparse.Namespace) -> int:
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as error:
        raise ValueError(f"serving needs its extra: pip install -e '.[serve]' ({error})") from None
    from seq2seq.serve.server import ServeOptions, serve

    return serve(
        ServeOptions(
            checkpoint=args.checkpoint,
            host=args.host,
            port=args.port,
            engine=args.engine,
            device=args.device,
            model_name=args.model_name,
            quantize=args.quantize,
            settings=_server_settings(args),
            shortlist=args.shortlist,
        )
    )


def _server_settings(args: argparse.Namespace):  # noqa: ANN202 (ServerSettings)
    """The routes' settings from ``serve``'s options, checked as they are made (a bad value,
    key file or glossary directory fails here, before the model loads)."""
    from seq2seq.serve.handling import ServerSettings
    from seq2seq.serve.protocol import Limits
    from seq2seq.serve.server import read_api_keys

    return ServerSettings(
        beam_size=args.beam_size,
        max_batch_tokens=args.max_batch_tokens,
        max_wait_ms=args.max_wait_ms,
        max_queue=args.max_queue,
        limits=Limits(char_limit=args.char_limit, batch_limit=args.batch_limit),
        api_keys=read_api_keys(args.api_keys) if args.api_keys else None,
        continuous=args.continuous,
        file_limit=args.file_limit,
        glossary_dir=Path(args.glossary_dir) if args.glossary_dir else None,
        glossary_annotation_only=args.glossary_annotation_only,
        truecase=args.truecase,
        verbatim=_serve_verbatim(args),
        max_repeats=args.max_repeats,
        no_repeat_ngram_size=args.no_repeat_ngram_size,
        repetition_penalty=args.repetition_penalty,
    )


def _serve_verbatim(args: argparse.Namespace):  # noqa: ANN202 (Verbatim | None)
    """The server's verbatim rules (``ServerSettings.verbatim``): the built-in kinds unless
    ``--no-verbatim``, and a ``--verbatim`` file's, read before the model loads."""
    from seq2seq.formats.verbatim import Verbatim

    rules = _read_verbatim(args)
    if isinstance(rules, bool):
        return Verbatim() if rules else None
    return rules or None
