"""A real LibreTranslate for the tests and benchmarks: Argos and LibreTranslate run offline in
their own virtualenv (``scripts/libretranslate_env.sh``), a package installed there with Argos'
own ``install_from_path``, a LibreTranslate server on 127.0.0.1, Argos' sentence splitter and
LibreTranslate's touch-ups of a translation run in that environment, and Argos' joining of a
paragraph's pieces. ``tests/test_argos.py`` and the ``libretranslate-answers`` and
``serve-libretranslate`` benches drive it; the package itself is ``seq2seq.tools.argos``'s
(docs/libretranslate.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, free_port, running_server
from seq2seq.tools.argos import FROM_CODE, TO_CODE


def offline_environment(home: str | Path) -> dict[str, str]:
    """Environment variables under which Argos and LibreTranslate keep their files under
    ``home`` and never reach the network: an empty package index of their own in ``home/index``
    (``ARGOS_PACKAGE_INDEX``; offline, the default one on GitHub costs 93 s of failing lookups
    at start), packages in ``home/packages``, Argos' data, settings and downloads in
    ``home/data``, ``home/config``, ``home/cache``. With ``--load-only en,zh`` LibreTranslate's
    start-up then stops at "Cannot update models" instead of fetching a MiniSBD model for
    every language (docs/libretranslate.md)."""
    home = Path(home).resolve()  # the server may run elsewhere; a file URI is absolute
    index = home / "index"
    index.mkdir(parents=True, exist_ok=True)
    (index / "index.json").write_text("[]", encoding="utf-8")
    return {
        "ARGOS_PACKAGE_INDEX": index.as_uri() + "/",
        "ARGOS_PACKAGES_DIR": str(home / "packages"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "ARGOS_DEVICE_TYPE": "cpu",
        "PYTHONWARNINGS": "ignore",  # requests 2.31 warns about the urllib3 pip picked
    }


def install_package(python: str | Path, package: str | Path, home: str | Path) -> Path:
    """Install ``package`` with Argos' own ``install_from_path`` in the environment of
    ``python``; return the installed package's directory."""
    env = {**os.environ, **offline_environment(home)}
    code = (
        "import sys\nfrom argostranslate import package\n"
        "package.install_from_path(sys.argv[1])\n"
        "print(*[p.package_path for p in package.get_installed_packages()], sep='\\n')\n"
    )
    run = subprocess.run(
        [str(python), "-c", code, str(package)], env=env, capture_output=True, text=True
    )
    if run.returncode:
        raise RuntimeError(f"argostranslate could not install {package}:\n{run.stderr[-2000:]}")
    name = zipfile.ZipFile(package).namelist()[0].split("/")[0]
    return Path(env["ARGOS_PACKAGES_DIR"]) / name


def libretranslate_python() -> Path:
    """LibreTranslate's virtualenv, made (or found cached) by scripts/libretranslate_env.sh
    with this environment's CTranslate2, as tests/test_argos.py makes it."""
    import ctranslate2

    env = {**os.environ, "PYTHON": sys.executable, "SEQ2SEQ_CTRANSLATE2": ctranslate2.__version__}
    made = subprocess.run(
        [str(ROOT / "scripts" / "libretranslate_env.sh")], env=env, capture_output=True, text=True
    )
    if made.returncode:
        raise SystemExit(f"LibreTranslate's virtualenv could not be made:\n{made.stderr[-2000:]}")
    return Path(made.stdout.strip().splitlines()[-1])


@contextmanager
def libretranslate(
    python: str | Path,
    home: str | Path,
    port: int | None = None,
    timeout: float = 300,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    threads: int = 1,
) -> Iterator[tuple[str, subprocess.Popen]]:
    """A LibreTranslate server (the venv of ``python``, packages installed under ``home``) on
    127.0.0.1:``port`` (default: a free one), offline, with ``threads`` request threads (its
    ``--threads``: waitress') and ``env`` over the offline environment (e.g.
    ``ARGOS_INTRA_THREADS``); yields (URL, server process) once ``/languages`` answers, stops
    it after. Its log is ``home/libretranslate.log``."""
    env = {**os.environ, **offline_environment(home), **(env or {})}
    port = port or free_port()
    command = [str(python), "-m", "libretranslate.main", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--load-only", f"{FROM_CODE},{TO_CODE}"]
    command += ["--disable-files-translation", "--threads", str(threads), *args]
    url, log = f"http://127.0.0.1:{port}", Path(home) / "libretranslate.log"
    with running_server(command, log, env, url, "/languages", timeout, 10) as server:
        yield url, server.process


# What runs inside LibreTranslate's environment, on JSON from stdin: Argos' splitter with a
# package's model, and LibreTranslate's touch-ups of a translation (as its /translate applies
# them to every answer).
_SPLIT = """
import json, sys
from argostranslate.package import Package
from argostranslate.sbd import MiniSBDSentencizer
splitter = MiniSBDSentencizer(Package(sys.argv[1]))
print(json.dumps([splitter.split_sentences(text) for text in json.load(sys.stdin)]))
"""
_TOUCH_UPS = """
import html, json, sys
from libretranslate.language import improve_translation_formatting
pairs = json.load(sys.stdin)
print(json.dumps([html.unescape(improve_translation_formatting(s, t)) for s, t in pairs]))
"""


def argos_sentences(
    python: str | Path, package_dir: str | Path, texts: Sequence[str], home: str | Path
) -> list[list[str]]:
    """The sentences Argos cuts each paragraph of ``texts`` into with the package installed
    at ``package_dir`` (its ``minisbd/`` model), run in the environment of ``python``."""
    return _run_json(python, home, _SPLIT, list(texts), str(package_dir))


def libretranslate_touch_ups(
    python: str | Path, sources: Sequence[str], translations: Sequence[str], home: str | Path
) -> list[str]:
    """Each translation as LibreTranslate's ``/translate`` returns it for its source: its
    ``improve_translation_formatting`` (the final punctuation made the source's, the case of
    the first letter the source's, ...) and ``html.unescape``."""
    pairs = [list(pair) for pair in zip(sources, translations, strict=True)]
    return _run_json(python, home, _TOUCH_UPS, pairs)


def _run_json(python: str | Path, home: str | Path, code: str, payload: Any, *args: str) -> Any:
    """``code`` run by ``python`` on ``payload`` as JSON; its last line of output, read as
    JSON."""
    env = {**os.environ, **offline_environment(home)}
    run = subprocess.run(
        [str(python), "-c", code, *args],
        input=json.dumps(payload),
        env=env,
        capture_output=True,
        text=True,
    )
    if run.returncode:
        raise RuntimeError(f"{python} failed:\n{run.stderr[-2000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def argos_text(pieces: Sequence[Sequence[str]], sentencepiece_model: str | Path) -> str:
    """A paragraph's translation as Argos writes it from its sentences' output pieces: all
    pieces decoded together (so a sentence whose first piece starts with ``▁`` is joined with
    a space), any ``▁`` and ``_`` left made spaces, one leading space dropped."""
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=str(sentencepiece_model))
    text = sp.decode_pieces([p for sentence in pieces for p in sentence])
    text = text.replace("\u2581", " ").replace("_", " ")
    return text[1:] if text.startswith(" ") else text
