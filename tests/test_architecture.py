"""The package's layering, checked from its source: imports flow one way, down.

``FLOORS`` is the one map of the package: every module or package under ``seq2seq/`` has a
floor, and an import may only go to its own floor or one below. The table of floors in
docs/architecture.md and each package's docstring are checked against it.
"""

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "seq2seq"

# floor (bottom first): the top-level modules and packages that live there
FLOORS = {
    "ground": ("errors", "textio", "checks", "moved"),
    "the paper": ("config", "embedding", "attention", "layers", "model", "cache", "loss"),
    "decoding": ("decoding",),
    "data": ("data", "formats"),
    "inference": ("inference",),
    "training": ("training",),
    "tools": ("tools", "serve"),
    "the command line": ("cli", "__main__", "__init__"),
}
LAYERS = {name: level for level, names in enumerate(FLOORS.values()) for name in names}


def module_name(path: Path) -> str:
    """``seq2seq/decoding/search.py`` -> ``decoding.search``; a package is its ``__init__``."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(module: str) -> int:
    return LAYERS[module.split(".")[0]]  # decoding.search: its package's floor


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


MODULES = all_modules()


def seq2seq_imports(path: Path, top_level_only: bool) -> set[str]:
    """The seq2seq modules a file imports (``seq2seq.data.x`` -> ``data.x``); with
    ``top_level_only=False``, the imports inside functions too."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("seq2seq"):
            base = node.module.removeprefix("seq2seq").removeprefix(".")
            for alias in node.names:  # from seq2seq.decoding import search: the module
                submodule = f"{base}.{alias.name}".lstrip(".")
                found.add(submodule if submodule in MODULES else base or "__init__")
        elif isinstance(node, ast.Import):
            found.update(
                a.name.removeprefix("seq2seq.") for a in node.names if a.name.startswith("seq2seq.")
            )
    return found


def test_every_module_has_a_layer():
    unplaced = [name for name in MODULES if name.split(".")[0] not in LAYERS]
    assert unplaced == []


def test_imports_never_go_up_a_layer():
    """Module-level and function-level (lazy) imports alike."""
    upward = []
    for name, path in MODULES.items():
        for imported in seq2seq_imports(path, top_level_only=False):
            if layer_of(imported) > layer_of(name):
                upward.append(f"{name} -> {imported}")
    assert upward == []


def test_no_import_circle():
    """Counting imports inside functions: a lazy import hides a circle, it does not break it."""
    graph = {name: seq2seq_imports(path, top_level_only=False) for name, path in MODULES.items()}
    graph = {name: {i for i in deps if i in graph} for name, deps in graph.items()}
    visiting, done = set(), set()

    def visit(node, trail):
        assert node not in visiting, "import circle: " + " -> ".join([*trail, node])
        if node in done:
            return
        visiting.add(node)
        for dependency in sorted(graph[node]):
            visit(dependency, [*trail, node])
        visiting.discard(node)
        done.add(node)

    for node in sorted(graph):
        visit(node, [])


SEARCHES = ("search", "greedy", "beam", "sampling", "constrained", "term_constraints", "repetition")


def test_the_searches_never_see_a_model():
    searches = {f"decoding.{name}" for name in (*SEARCHES, "utf8")}
    for search in SEARCHES:
        path = PACKAGE / "decoding" / f"{search}.py"
        assert path.exists(), search  # a search renamed: this list follows it
        imported = seq2seq_imports(path, top_level_only=False)
        assert imported <= searches, search


CORE_MAY_IMPORT = (
    "__future__",
    "torch",
    "seq2seq",
    "dataclasses",
    "typing",
    "functools",
    "math",
    "collections",
)


def test_the_model_core_imports_only_torch_and_itself():
    core = [name for name, layer in LAYERS.items() if layer == 1]
    for name in core:
        tree = ast.parse((PACKAGE / f"{name}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] in CORE_MAY_IMPORT for a in node.names), name
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module.split(".")[0] in CORE_MAY_IMPORT, f"{name}: {node.module}"
                if node.module.startswith("seq2seq"):
                    assert layer_of(node.module.removeprefix("seq2seq.")) <= 1, name


def test_inference_does_not_import_lightning():
    """Translating, generating, evaluating and exporting load no Lightning (fast start-up, and
    a server or a user's script needs only torch)."""
    code = (
        "import sys\n"
        "import seq2seq.inference.translator, seq2seq.inference.generation\n"
        "import seq2seq.inference.evaluation, seq2seq.tools.export\n"
        "import seq2seq.inference.ctranslate2_engine, seq2seq.data.tokenizer\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'lightning'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def documented_floors() -> dict[str, tuple[str, ...]]:
    """docs/architecture.md's table of floors: floor -> the names in its modules column."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## The floors", 1)[1]
    table = section[section.index("| floor |") :].split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines()[2:]:
        floor, modules = (cell.strip() for cell in line.strip("|").split("|")[:2])
        rows[floor] = tuple(re.sub(r"(\.py|/)$", "", m) for m in re.findall(r"`([^`]+)`", modules))
    return rows


def test_the_architecture_page_table_is_the_map():
    expected = {
        floor: tuple(n for n in names if n not in {"__main__", "__init__"})
        for floor, names in FLOORS.items()
    }
    assert documented_floors() == dict(reversed(expected.items()))  # the top floor first


def test_each_package_docstring_names_its_modules():
    """A newcomer who opens a package's ``__init__`` learns where each job lives."""
    for init in PACKAGE.glob("*/__init__.py"):
        docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        floor = next(f for f, names in FLOORS.items() if init.parent.name in names)
        assert floor.removeprefix("the ") in docstring.lower(), init
        for module in init.parent.glob("*.py"):
            if module.stem != "__init__":
                assert module.stem in docstring, f"{init.parent.name}: {module.stem} unnamed"


def test_the_public_names_import_from_seq2seq_on_first_use():
    """``import seq2seq`` loads the model alone; ``from seq2seq import Translator`` and the
    other public names still work, each from its floor."""
    code = (
        "import sys, seq2seq\n"
        "floors = ('seq2seq.inference', 'seq2seq.decoding')\n"
        "light = not any(m.startswith(floors) for m in sys.modules)\n"
        "found = {name: getattr(seq2seq, name).__module__ for name in seq2seq.__all__}\n"
        "print(light, sorted(set(found.values())))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split(" ", 1)[0] == "True"
    assert "seq2seq.inference.translator" in out.stdout and "seq2seq.decoding.search" in out.stdout
