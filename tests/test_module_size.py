"""The size rule (CONTRIBUTING.md, "Size: one job in view"): no Python module under
``seq2seq/`` or ``scripts/`` over ``MAX_MODULE_LINES`` lines, no function or method over
``MAX_FUNCTION_LINES`` (from its ``def`` line to its last, docstring included, decorators not).

What is over a limit is named in one of two lists, each entry with its reason: ``WHOLE``, a
function that reads better whole than cut; ``BEING_SPLIT``, TEMPORARY, code another change of
issue 56 is cutting by job right now. An entry is ``path`` (the module), ``path::name`` (a
function; ``Class.method``, ``outer.inner``) or a folder ``path/`` (everything under it). Every
entry must still be needed: one that names nothing over a limit fails, so the lists only
shrink.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parents[1]
FOLDERS = ("seq2seq", "scripts")
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60

# Functions that read better whole: "path::name": why.
WHOLE: dict[str, str] = {}

# TEMPORARY: being split (issue 56). Remove an entry with the change that cuts it; the test
# below fails once an entry names nothing over a limit.
BEING_SPLIT: dict[str, str] = {}


def modules() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, lines) of every function and method, nested ones too."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                yield name, node.end_lineno - node.lineno + 1
            yield from functions(node, f"{name}.")
        else:
            yield from functions(node, prefix)


def oversized() -> dict[str, int]:
    """``path`` or ``path::name`` -> lines, for everything over its limit."""
    found = {}
    for path in modules():
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(ROOT).as_posix()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            found[where] = len(text.splitlines())
        for name, lines in functions(ast.parse(text, where)):
            if lines > MAX_FUNCTION_LINES:
                found[f"{where}::{name}"] = lines
    return found


def covered(key: str, entry: str) -> bool:
    return key == entry or (entry.endswith("/") and key.startswith(entry))


def test_every_module_and_function_is_within_its_limit():
    allowed = {**WHOLE, **BEING_SPLIT}
    over = {
        key: lines
        for key, lines in oversized().items()
        if not any(covered(key, entry) for entry in allowed)
    }
    assert over == {}, (
        f"over {MAX_MODULE_LINES} lines a module or {MAX_FUNCTION_LINES} a function: split by "
        "job (CONTRIBUTING.md, 'Size: one job in view')"
    )


def test_every_allowed_entry_is_still_needed():
    over = oversized()
    stale = [
        entry for entry in {**WHOLE, **BEING_SPLIT} if not any(covered(key, entry) for key in over)
    ]
    assert stale == [], "within the limits now: take these out of the allow-lists"


def test_every_entry_says_why():
    for entry, reason in {**WHOLE, **BEING_SPLIT}.items():
        assert reason.strip(), entry
        assert (ROOT / entry.split("::")[0]).exists(), f"{entry}: no such path"
