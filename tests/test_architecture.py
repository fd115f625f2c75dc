"""The package's layering, checked from its source: imports flow one way, down.

Layers, bottom to top (README, "What is inside"): errors and text lines; the paper (config,
embedding, attention, layers, model, cache, loss); decoding (searches, scorers, CPU packing);
data; inference (checkpoints, translator and generator, engines, evaluation); training
(schedule, module, callbacks, Lightning CLI); tools (export, pictures, the server); the command
line.
"""

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "seq2seq"

LAYERS = {
    "errors": 0, "textio": 0, "checks": 0,
    "config": 1, "cache": 1, "embedding": 1, "attention": 1, "layers": 1, "model": 1, "loss": 1,
    "search": 2, "scoring": 2, "packing": 2, "quantization": 2, "attention_maps": 2,
    "continuous": 2, "constrained": 2,
    "data": 3, "formats": 3, "glossary": 3,
    "documents": 4,
    "checkpoint": 4, "translator": 4, "generation": 4, "ctranslate2_engine": 4, "evaluation": 4,
    "schedule": 5, "training": 5, "callbacks": 5, "lightning_cli": 5,
    "export": 6, "pictures": 6, "serve": 6, "pretrained": 6,
    "cli": 7, "__main__": 7, "__init__": 7,
}  # fmt: skip
# Deprecated names that seq2seq.search forwards, lazily, to their new home (PEP 562 hook).
ALLOWED_UPWARD = {("search", "scoring")}


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE).with_suffix("")
    return ".".join(relative.parts)


def layer_of(module: str) -> int:
    return LAYERS[module.split(".")[0]]  # data.x, serve.x: their package's layer


def seq2seq_imports(path: Path, top_level_only: bool) -> set[str]:
    """The seq2seq modules a file imports (``seq2seq.data.x`` -> ``data.x``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("seq2seq"):
            base = node.module.removeprefix("seq2seq").removeprefix(".")
            if base:
                found.add(base)
            else:  # from seq2seq import scoring
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name.removeprefix("seq2seq.") for a in node.names
                         if a.name.startswith("seq2seq."))  # fmt: skip
    return found


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def test_every_module_has_a_layer():
    unplaced = [name for name in all_modules() if name.split(".")[0] not in LAYERS]
    assert unplaced == []


def test_imports_never_go_up_a_layer():
    """Module-level and function-level (lazy) imports alike."""
    upward = []
    for name, path in all_modules().items():
        for imported in seq2seq_imports(path, top_level_only=False):
            if layer_of(imported) > layer_of(name) and (name, imported) not in ALLOWED_UPWARD:
                upward.append(f"{name} -> {imported}")
    assert upward == []


def test_no_import_circle_at_module_level():
    graph = {
        name: seq2seq_imports(path, top_level_only=True) for name, path in all_modules().items()
    }
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


def test_the_searches_never_see_a_model():
    assert seq2seq_imports(PACKAGE / "search.py", top_level_only=True) == set()


CORE_MAY_IMPORT = ("__future__", "torch", "seq2seq", "dataclasses", "typing", "functools", "math",
                   "collections")  # fmt: skip


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
        "import seq2seq.translator, seq2seq.generation, seq2seq.evaluation, seq2seq.export\n"
        "import seq2seq.ctranslate2_engine, seq2seq.data.tokenizer\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'lightning'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
