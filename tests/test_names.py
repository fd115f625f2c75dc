"""One home per name: ``from seq2seq.X import N`` names something that X itself defines.

A name imported through a module that only imports it (``ConfigError`` through ``config`` when
``errors`` defines it) hides where the name lives; a reader opening ``config.py`` finds no
``ConfigError`` there. Only a package's ``__init__`` re-exports: its imports are its interface.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "seq2seq"
SCANNED = ("seq2seq", "tests", "scripts")


def module_path(module: str) -> Path | None:
    """``seq2seq.data.tokenizer`` -> its file (a package: its ``__init__.py``); None if none."""
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _bound_names(target: ast.expr) -> set[str]:
    return {node.id for node in ast.walk(target) if isinstance(node, ast.Name)}


@cache
def defined_names(path: Path) -> frozenset[str]:
    """What a module binds at its top level (under ``if``/``try`` too): defs, classes,
    assignments, and, in a package's ``__init__`` only, imports."""
    package = path.name == "__init__.py"
    names: set[str] = set()
    todo = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names |= _bound_names(target)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            names |= _bound_names(node.target)
        elif isinstance(node, ast.Import | ast.ImportFrom) and package:
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.If | ast.Try | ast.With):
            for block in ("body", "orelse", "finalbody"):
                todo += getattr(node, block, [])
            todo += [stmt for handler in getattr(node, "handlers", []) for stmt in handler.body]
    return frozenset(names)


def lazy_names(path: Path) -> frozenset[str]:
    """A package's names imported on first use (by its module ``__getattr__``): its
    ``__all__``, which names them with the rest."""
    if path.name != "__init__.py" or "__getattr__" not in defined_names(path):
        return frozenset()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and _bound_names(node.targets[0]) == {"__all__"}:
            return frozenset(ast.literal_eval(node.value))
    return frozenset()


def seq2seq_from_imports(path: Path) -> list[tuple[int, str, str]]:
    """Each ``from seq2seq.X import N`` in a file, at any depth: (line, X, N)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "seq2seq" or node.module.startswith("seq2seq."):
                found += [(node.lineno, node.module, alias.name) for alias in node.names]
    return found


def homes(name: str) -> list[str]:
    """The modules under ``seq2seq/`` that define ``name`` (re-exports aside)."""
    return sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py" and name in defined_names(path)
    )


def misplaced_imports() -> list[str]:
    wrong = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "data" in path.relative_to(ROOT).parts[1:-1] and top == "tests":
                continue  # tests/data: documents kept as their authors wrote them
            where = path.relative_to(ROOT)
            for line, module, name in seq2seq_from_imports(path):
                source = module_path(module)
                if source is None:
                    wrong.append(f"{where}:{line}: no module {module}")
                elif module_path(f"{module}.{name}") is not None:
                    continue  # from seq2seq.data import tokenizer: a submodule
                elif name not in defined_names(source) | lazy_names(source):
                    home = " or ".join(homes(name)) or "nowhere"
                    wrong.append(f"{where}:{line}: {name} from {module}: defined in {home}")
    return wrong


def test_every_name_is_imported_from_its_home():
    """``from seq2seq.X import N``: X defines N (or, a package, re-exports it in __init__)."""
    wrong = misplaced_imports()
    assert not wrong, "import each name from the module that defines it:\n" + "\n".join(wrong)


def test_the_check_sees_a_name_imported_through_another_module(tmp_path):
    module = tmp_path / "config.py"
    module.write_text("from errors import ConfigError\n\nclass ModelConfig: ...\nX: int = 1\n")
    assert defined_names(module) == {"ModelConfig", "X"}
    package = tmp_path / "__init__.py"
    package.write_text("from a.b import C\nif True:\n    from d import E as F\n")
    assert defined_names(package) == {"C", "F"}


def test_the_version_has_one_home():
    """``pyproject.toml`` sets it; ``seq2seq.__version__`` reads it from the installed metadata,
    never from a copy of its own."""
    from importlib.metadata import version

    import seq2seq

    assert seq2seq.__version__ == version("seq2seq")
    copies = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Assign)
        and _bound_names(node.targets[0]) == {"__version__"}
        and isinstance(node.value, ast.Constant)
    ]
    assert copies == []
