"""The documentation works as written: every ``seq2seq`` command line in README.md and docs/
parses with the command's own parser, their Python examples run, and the site builds with
``mkdocs build --strict`` (a broken link or anchor, or a page missing from the nav, fails).

Command lines are parsed, never run: ``fit`` and ``validate`` through LightningCLI with
``--print_config`` added (the whole configuration is built and checked, nothing trained), the
other commands through ``seq2seq.cli.arguments.build_parser``. Paths in them (checkpoints,
inputs, configs other than ``configs/``) are placeholders: only their options are checked.
Lines that run something else (``curl``, ``python scripts/...``, ``pip``) are not checked here.

Python examples run in a directory holding the files they name: an untrained translation
checkpoint at ``runs/demo/checkpoints/last.ckpt``, a decoder-only one at
``runs/lm/checkpoints/last.ckpt`` and a glossary ``terms.tsv``; a page's examples share one
namespace, in order. An example preceded by ``<!-- docs-test: skip (why) -->`` is not run.
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md"))
DOCUMENTS = [ROOT / "README.md", *PAGES]

SHELL_BLOCK = re.compile(r"^```(?:bash|sh|shell)\b[^\n]*\n(.*?)^```", re.M | re.S)
PYTHON_BLOCK = re.compile(r"(<!-- docs-test: skip[^>]*-->\n)?^```python\n(.*?)^```", re.M | re.S)
# Where a page's Python examples are run instead, or why they cannot be here.
RUN_ELSEWHERE = {
    "documents.md": "tests/test_formats_encoding.py runs it",
    "libretranslate.md": "needs a real LibreTranslate in its own environment; tests/test_argos.py "
    "drives one the same way",
}


def command_lines(text: str) -> list[list[str]]:
    """The ``seq2seq`` invocations of a page's shell blocks, as argument lists (no program
    name): at a line's start, after a pipe, under ``srun`` or as ``-m seq2seq``."""
    found = []
    for block in SHELL_BLOCK.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            for i, word in enumerate(words):
                if word == "seq2seq" and (i == 0 or words[i - 1] in ("|", "srun", "-m")):
                    args = words[i + 1 :]
                    end = next((j for j, w in enumerate(args) if w in ("|", ">", "&&", ";")), None)
                    found.append(args[:end])
    return found


COMMANDS = [
    pytest.param(args, id=f"{page.name}: seq2seq {' '.join(args)}"[:120])
    for page in DOCUMENTS
    for args in command_lines(page.read_text(encoding="utf-8"))
]


def test_the_docs_show_commands():
    names = {args[0] for args in (p.values[0] for p in COMMANDS) if args}
    assert {"fit", "translate", "evaluate", "serve", "export", "import", "generate"} <= names


@pytest.mark.parametrize("args", COMMANDS)
def test_command_line_parses(args, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # --config configs/... as the docs write it
    if args and args[0] in ("fit", "validate"):
        from seq2seq.cli import main

        if not any(a.startswith("--print_config") for a in args):
            args = [*args, "--print_config"]
        with pytest.raises(SystemExit) as exit_info:
            status = main(args)  # returns (2) instead of exiting when the line is refused
            pytest.fail(f"seq2seq {shlex.join(args)}: status {status}: {capsys.readouterr().err}")
    else:
        from seq2seq.cli.arguments import build_parser

        with pytest.raises(SystemExit) as exit_info:
            build_parser().parse_args(args)
            raise SystemExit(0)
    assert exit_info.value.code in (0, None), capsys.readouterr().err


def python_examples(page: Path) -> list[str]:
    """The page's Python examples that run here."""
    blocks = PYTHON_BLOCK.findall(page.read_text(encoding="utf-8"))
    return [code for skip, code in blocks if not skip]


EXAMPLE_PAGES = [
    page for page in DOCUMENTS if page.name not in RUN_ELSEWHERE and python_examples(page)
]


@pytest.fixture
def example_files(tmp_path, monkeypatch, translation_checkpoint, lm_checkpoint):
    """A working directory holding what the examples name."""
    for run, checkpoint in (("demo", translation_checkpoint), ("lm", lm_checkpoint)):
        folder = tmp_path / "runs" / run / "checkpoints"
        folder.mkdir(parents=True)
        (folder / "last.ckpt").symlink_to(checkpoint)
    (tmp_path / "terms.tsv").write_text("teacher\t导师\nmachine learning\t机器学习\n", "utf-8")
    (tmp_path / "news.en").write_text("I like tea.\nWhere is the station?\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("page", EXAMPLE_PAGES, ids=lambda p: p.name)
def test_python_examples_run(page, example_files):
    namespace: dict = {}
    for number, code in enumerate(python_examples(page), 1):
        exec(compile(code, f"{page.name}, example {number}", "exec"), namespace)


def test_the_pages_said_to_run_elsewhere_have_examples():
    for page in PAGES:
        if page.name in RUN_ELSEWHERE:
            assert python_examples(page), f"{page.name}: no example; drop it from RUN_ELSEWHERE"


def test_the_site_builds_strict(tmp_path):
    missing = 'the docs extra is not installed: pip install -e ".[docs]"'
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python"):
        pytest.importorskip(module, reason=missing)
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice, not a build warning
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", tmp_path / "site"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "site" / "api" / "index.html").is_file()
