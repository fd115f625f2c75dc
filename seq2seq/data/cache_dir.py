"""A preparation's cache directory on disk: built atomically, recognised, read back.

:func:`build_atomically` writes the directory under a temporary name and renames it into place,
so a crash never leaves a half-written cache behind; :func:`is_prepared` tells a complete one
(its ``report.json`` is written last). :func:`fingerprint` identifies a corpus file's version for
the cache's name (:func:`seq2seq.data.prepare.cache_name`). What the directory holds is described
in :mod:`seq2seq.data.prepare`.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from seq2seq.errors import DataError

LANGS = ("en", "zh")  # file suffixes of the cached text, source first


def fingerprint(path: str) -> list[Any]:
    """Identifies a file's version cheaply (path, size, mtime) so edits invalidate the cache."""
    p = Path(path)
    if not p.exists():
        raise DataError.at(p, None, "file not found")
    stat = p.stat()
    return [str(p.resolve()), stat.st_size, stat.st_mtime_ns]


def is_prepared(cache: Path) -> bool:
    """Whether ``cache`` is complete (``report.json`` is written last)."""
    return (cache / "report.json").is_file()


def build_atomically(cache: Path, build: Callable[[Path], None]) -> None:
    """Runs ``build(directory)`` in a fresh temporary directory, then renames it to ``cache``.

    Another process may finish the same cache first; its copy is kept and ours dropped. The
    temporary name holds the host as well as the process id: on a shared filesystem, nodes
    (containers especially) repeat process ids, and one node's clean-up must never delete
    another's half-built cache. What a killed preparation of this host left behind (its process
    is gone) is removed first.
    """
    host = socket.gethostname()
    _remove_abandoned_builds(cache, host)
    tmp = cache.with_name(f"{cache.name}.tmp-{host}-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        build(tmp)
        try:
            tmp.rename(cache)
        except OSError:
            if not is_prepared(cache):  # a real error, not a race lost to another process
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _remove_abandoned_builds(cache: Path, host: str) -> None:
    """Deletes ``<cache>.tmp-<host>-<pid>`` directories whose process no longer runs."""
    prefix = f"{cache.name}.tmp-{host}-"
    for tmp in cache.parent.glob(f"{prefix}*") if cache.parent.is_dir() else ():
        pid = tmp.name.removeprefix(prefix)
        if pid.isdigit() and not _process_runs(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)


def _process_runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, run by another user
        return True
    return True


def read_report(cache: Path) -> dict[str, Any]:
    """The cache's ``report.json``."""
    return json.loads((cache / "report.json").read_text(encoding="utf-8"))


def write_report(out: Path, report: dict[str, Any]) -> None:
    (out / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")


def read_split_texts(cache: Path, split: str) -> tuple[list[str], list[str]]:
    """Cleaned (english, chinese) sentences of a translation cache's ``split``, all pairs."""
    en, zh = (_read_cache_lines(cache / f"{split}.{lang}") for lang in LANGS)
    return en, zh


def _read_cache_lines(path: Path) -> list[str]:
    # Not textio.read_lines: it drops a leading U+FEFF, which cleaning keeps (NFKC leaves it),
    # so a first sentence starting with one would no longer match its reference. Not
    # splitlines() either: it would also split at U+2028 and friends inside a sentence.
    return path.read_text(encoding="utf-8").split("\n")[:-1]
