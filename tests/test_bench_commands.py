"""Every figure in the docs keeps a command that reproduces it (issue 56): each
``bench.py NAME [options]`` the docs write (in a code block or an inline code span) names a
bench of ``scripts/benchmarks`` and parses with that bench's own options, and every bench is
named by at least one page. Nothing is measured: parsing stops before a bench starts."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from benchmarks import BENCHES, main  # scripts/ is on pytest's pythonpath (pyproject.toml)

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
BENCH = re.compile(r"bench\.py ([a-z][a-z0-9-]*)(.*)")


class Parsed(Exception):
    """Raised once a bench's options are parsed, before it measures anything."""


def documented_commands() -> list[tuple[str, str, list[str]]]:
    """(page:line, bench name, its options) of every bench command the pages write; options
    None where a sentence names a bench without running it."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8").replace("\\\n", " ")  # continued lines
        fenced = False
        for number, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            spans = [line.split(" #")[0]] if fenced else re.findall(r"`([^`]+)`", line)
            for span in spans:
                match = BENCH.search(span)
                if match:
                    options = shlex.split(match.group(2).replace("...", ""))
                    # "`bench.py NAME`" in a sentence names the bench; a command says python
                    mention = not options and "python" not in span
                    found.append(
                        (f"{page.name}:{number}", match.group(1), None if mention else options)
                    )
    return found


COMMANDS = documented_commands()


def test_every_bench_is_documented_by_a_command():
    named = {name for _, name, _ in COMMANDS}
    assert len(COMMANDS) >= len(BENCHES)
    assert sorted(set(BENCHES) - named) == []


@pytest.mark.parametrize("where, name, options", COMMANDS, ids=[w for w, _, _ in COMMANDS])
def test_a_documented_bench_command_parses(where, name, options, monkeypatch, capsys):
    assert name in BENCHES, f"{where}: no bench {name!r}"
    if options is None:
        return
    parse_args = argparse.ArgumentParser.parse_args

    def parse_then_stop(parser, args=None, namespace=None):
        parse_args(parser, args, namespace)
        raise Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    try:
        main([name, *options])
    except Parsed:
        return
    except SystemExit as error:
        pytest.fail(f"{where}: {capsys.readouterr().err.strip()} (exit {error.code})")
    pytest.fail(f"{where}: bench {name} ran past its options")
