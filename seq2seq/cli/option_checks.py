"""Every option a command took, checked before any model is loaded or any input read: the
one place where all commands validate their numbers, paths and device. Each check itself is
``seq2seq.checks``'s, with its one-line error; this module says which option gets which."""

from __future__ import annotations

import argparse
from pathlib import Path

from seq2seq import checks
from seq2seq.cli.shortlist import check_shortlist_use

# Options whose values must be at least 1 / at least 0, wherever a command has them.
# (serve's own settings, port included, are checked by seq2seq.serve before its model loads.)
AT_LEAST_ONE = ("beam_size", "max_tokens", "n_best", "window", "max_new_tokens")
AT_LEAST_ZERO = (
    "max_len_a",
    "top_k",
    "temperature",
    "top_p",
    "layer",
    "head",
    "max_repeats",
    "no_repeat_ngram_size",
)
FINITE = ("length_penalty", "max_len_a", "temperature", "top_p", "repetition_penalty")
READABLE = {
    "input": "input file",
    "src": "source file",
    "eval_json": "evaluation JSON",
    "font": "font file",
    "shortlist": "shortlist file",
    "tgt": "target file",
}
OUTPUT_DIRECTORIES = {"export"}  # commands whose --output is a directory
MAKES_PARENTS = {"import", "average"}  # commands that create --output's directories


def check_arguments(args: argparse.Namespace) -> None:
    """Every option ``args`` holds, checked (numbers, then paths, then what they name)."""
    _check_numbers(args)
    check_shortlist_use(args)
    _check_inputs(args)
    _check_runtime(args)
    _check_outputs(args)


def _given(args: argparse.Namespace, name: str):  # noqa: ANN202 (the option's value)
    """The option's value; None when it was not given, or when this command has no such
    option."""
    return getattr(args, name, None)


def _option(name: str) -> str:
    """The option a field comes from: ``beam_size`` -> ``--beam-size``."""
    return "--" + {"run_dir": "run"}.get(name, name).replace("_", "-")


def _check_numbers(args: argparse.Namespace) -> None:
    for name in AT_LEAST_ONE:
        if _given(args, name) is not None:
            checks.at_least(_given(args, name), 1, _option(name))
    for name in FINITE:
        checks.finite(_given(args, name), _option(name))
    for name in AT_LEAST_ZERO:
        if _given(args, name) is not None:
            checks.at_least(_given(args, name), 0, _option(name))
    _check_repetition_guard(args)


def _check_repetition_guard(args: argparse.Namespace) -> None:
    """What ``seq2seq.decoding.repetition.check_guard`` would refuse once the model loads."""
    if _given(args, "repetition_penalty") is not None:
        checks.at_least(args.repetition_penalty, 1.0, "--repetition-penalty")
    if _given(args, "no_repeat_ngram_size") == 1:
        raise ValueError(
            "--no-repeat-ngram-size 1 would forbid every piece twice; use 0 (off) or >= 2"
        )


def _check_inputs(args: argparse.Namespace) -> None:
    """The files and checkpoints a command reads."""
    for name, what in READABLE.items():
        if _given(args, name) is not None:
            checks.readable_file(_given(args, name), what)
    for path in _given(args, "ref") or []:
        checks.readable_file(path, "reference file")
    if _given(args, "checkpoint") is not None:
        checks.checkpoint(args.checkpoint, _given(args, "engine") or "torch")
    for path in [_given(args, "data_from"), *(_given(args, "checkpoints") or [])]:
        if path is not None:
            checks.checkpoint(path)


def _check_runtime(args: argparse.Namespace) -> None:
    """The quantization and the device, then what an import or an export reads, the
    encoding a document is read in and the Chinese a translation is written in."""
    if _given(args, "quantize") is not None:  # int8 on a GPU says so, whatever the GPU
        from seq2seq.inference.cpu import check_quantize

        check_quantize(args.quantize, _given(args, "device") or "cpu")
    if _given(args, "device") is not None:
        checks.device(args.device, _given(args, "engine") or "torch")
    if _given(args, "hf") is not None:
        _check_hf_source(args.hf)
    if _given(args, "encoding") is not None:
        _check_encoding(args.encoding)
    if _given(args, "target") is not None:  # read as the tag it names: zt -> zh-Hant
        from seq2seq.formats.chinese_script import target_tag

        try:
            args.target = target_tag(args.target)
        except ValueError as error:
            raise ValueError(f"--target: {error}") from None
    if _given(args, "eval_json") is not None:
        from seq2seq.inference.evaluation import read_eval_json

        read_eval_json(args.eval_json)


def _check_encoding(label: str) -> None:
    """``translate --encoding``: a text encoding Python knows (read as a browser reads it)."""
    from seq2seq.formats.encoding import codec_name

    try:
        codec_name(label)
    except ValueError:
        raise ValueError(
            f"--encoding {label}: not an encoding Python knows (e.g. utf-8, windows-1252, "
            "gb18030, shift_jis)"
        ) from None


def _check_hf_source(name: str) -> None:
    """``import --hf``: a save_pretrained directory, or a hub name (``owner/model``)."""
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ValueError(f"--hf {name}: not a save_pretrained directory (no config.json)")
    elif name.startswith(("/", ".", "~")) or name.count("/") != 1:
        raise ValueError(f"--hf {name}: no such directory (nor a hub name like owner/model)")


def _check_outputs(args: argparse.Namespace) -> None:
    """``--output`` (a file, or a directory for export) and ``--hyps`` may be written, and
    ``--output`` is not the ``--input`` it would overwrite."""
    output, hyps = _given(args, "output"), _given(args, "hyps")
    if output is not None and args.command in OUTPUT_DIRECTORIES:
        checks.writable_directory(output, "--output")
    elif output is not None:
        checks.writable_file(output, "--output", args.command in MAKES_PARENTS)
        source = _given(args, "input")
        if source is not None and Path(source).resolve() == Path(output).resolve():
            raise ValueError(f"--output {output} is the --input file; write elsewhere")
    if hyps is not None:
        checks.writable_file(hyps, "--hyps")
