"""Checks of what a user typed, made before any slow work: the one place every command
validates its paths, numbers and device, so a mistake costs a one-line error, not a model load
or a translated corpus thrown away.

Each check returns its (normalised) value or raises a one-line error: ``DataError`` or
``CheckpointError`` for a path, ``ValueError`` for a value. It imports nothing of the package but
the errors, so any layer can use it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from seq2seq.errors import CheckpointError, DataError

CT2_MARKER = "model.bin"  # what a CTranslate2 export directory always holds


def readable_file(path: str | Path, what: str = "file") -> Path:
    """``path`` as a Path if this process may read it: a file, or a pipe or device
    (``--input <(zcat news.en.gz)``, ``/dev/stdin``), not a directory."""
    path = Path(path)
    if path.is_dir():
        raise DataError.at(path, None, f"is a directory, not a {what}")
    if not path.exists():
        raise DataError.at(path, None, f"{what} not found")
    if not os.access(path, os.R_OK):
        raise DataError.at(path, None, f"{what} not readable (permission denied)")
    return path


def writable_file(path: str | Path, what: str = "output", make_parents: bool = False) -> Path:
    """``path`` as a Path if a file may be written there: not a directory, and either an
    existing file this process may write (``/dev/null`` too) or a new one in a directory this
    process may write to; ``make_parents``: the writer creates missing directories, so the
    nearest one that exists decides. Checked before the work that fills it."""
    path = Path(path)
    if path.is_dir():
        raise DataError.at(path, None, f"{what} is a directory; give a file name")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise DataError.at(path, None, f"{what} not writable (permission denied)")
        return path
    parent = _nearest_existing(path.parent) if make_parents else path.parent
    if not parent.is_dir():
        raise DataError.at(path, None, f"{what} directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DataError.at(path, None, f"{what} directory {parent} not writable")
    return path


def writable_directory(path: str | Path, what: str = "output") -> Path:
    """``path`` as a Path if it is, or may be made, a directory this process writes to."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise DataError.at(path, None, f"{what} exists and is not a directory")
    existing = _nearest_existing(path)
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise DataError.at(path, None, f"{what} directory not writable ({existing})")
    return path


def _nearest_existing(path: Path) -> Path:
    """``path``, or its nearest ancestor that exists: what decides whether directories that
    a writer makes on the way may be made."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def at_least(value: int | float, minimum: int | float, option: str) -> int | float:
    if not value >= minimum:  # also false for NaN
        raise ValueError(f"{option} must be >= {minimum}, got {value}")
    return value


def finite(value: float | None, option: str) -> float | None:
    if value is not None and not math.isfinite(value):
        raise ValueError(f"{option} must be a finite number, got {value}")
    return value


def device(name: str, engine: str = "torch") -> str:
    """A device name that exists in this build of the engine (torch or CTranslate2) and on
    this machine."""
    import torch

    if engine == "ctranslate2":
        return _ctranslate2_device(name)

    try:
        parsed = torch.device(name)
    except (RuntimeError, ValueError):
        raise ValueError(
            f"--device {name!r}: not a torch device; use cpu, cuda, cuda:N or mps"
        ) from None
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            build = "this torch is a CPU-only build" if torch.version.cuda is None else "no GPU"
            raise ValueError(f"--device {name}: CUDA is not available ({build}); use cpu")
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise ValueError(
                f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
    elif parsed.type == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError(f"--device {name}: MPS is not available here; use cpu")
    elif parsed.type != "cpu":
        raise ValueError(f"--device {name}: only cpu, cuda and mps are supported")
    return name


def _ctranslate2_device(name: str) -> str:
    try:
        import ctranslate2
    except ImportError:
        raise ValueError(
            "--engine ctranslate2 needs its extra: pip install -e '.[export]'"
        ) from None

    kind, _, index = name.partition(":")
    if kind not in ("cpu", "cuda") or (index and not index.isdigit()):
        raise ValueError(f"--device {name!r}: CTranslate2 runs on cpu, cuda or cuda:N")
    if kind == "cuda" and ctranslate2.get_cuda_device_count() <= int(index or 0):
        raise ValueError(f"--device {name}: CTranslate2 sees no such CUDA device; use cpu")
    return name


def checkpoint(path: str | Path, engine: str = "torch") -> Path:
    """A ``.ckpt`` file (engine torch) or a CTranslate2 export directory (engine
    ctranslate2), with a hint when it is the other one, or a directory of checkpoints."""
    path = Path(path)
    if engine == "ctranslate2":
        if path.is_file():
            raise CheckpointError(
                f"{path}: a file, but --engine ctranslate2 takes the directory written by "
                "'seq2seq export --format ctranslate2' (or drop --engine for a .ckpt)"
            )
        if not (path / CT2_MARKER).is_file():
            raise CheckpointError(f"{path}: no CTranslate2 export here (no {CT2_MARKER})")
        return path
    if path.is_dir():
        if (path / CT2_MARKER).is_file():
            raise CheckpointError(
                f"{path}: a CTranslate2 export; translate it with --engine ctranslate2"
            )
        inside = sorted(path.glob("*.ckpt"))
        if inside:
            example = next((p for p in inside if p.name == "last.ckpt"), inside[0])
            raise CheckpointError(f"{path}: a directory; give one checkpoint in it, e.g. {example}")
        raise CheckpointError(f"{path}: a directory, not a checkpoint")
    if not path.exists():
        raise CheckpointError(f"{path}: checkpoint not found")
    if not os.access(path, os.R_OK):
        raise CheckpointError(f"{path}: checkpoint not readable (permission denied)")
    return path


def unknown_options_message(parser, unknown: list[str]) -> str:
    """ "unknown option --beam; did you mean --beam-size?" for the first unknown option of an
    argparse ``parser``'s command line. A dotted option (``--model.warmup_step``) is compared
    with the options under the same parent (``--model.*``), by its last part."""
    import difflib

    options = [o for o in unknown if o.startswith("-")]
    if not options:
        return f"unexpected argument {unknown[0]!r}"
    name = options[0].split("=", 1)[0]
    known = [o for o in parser._option_string_actions if o.startswith("--")]
    parent, _, last = name.rpartition(".")
    siblings = {o.rpartition(".")[2]: o for o in known if parent and o.rpartition(".")[0] == parent}
    if siblings:  # --model.config.colour is not --model.config.norm, however alike the paths
        close = [siblings[m] for m in difflib.get_close_matches(last, siblings, 1, 0.6)]
    else:  # no such parent either (--trianer.max_steps): the whole name
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = close or [o for o in known if o.startswith(name)]
    return f"unknown option {name}" + (f"; did you mean {hint[0]}?" if hint else "")
