"""The README is the front door: one screen or two, opening with the two commands, its Python
API example runs as written (the API it shows is the stable one), and its links lead somewhere.
Its command lines, and the docs' examples, are checked by tests/test_docs.py."""

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"


def test_python_api_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    namespace: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    assert tuple(namespace["logits"].shape) == (2, 5, 8000)
    assert tuple(namespace["step_logits"].shape) == (2, 1, 8000)
    assert tuple(namespace["lm_logits"].shape) == (2, 9, 8000)
    assert "encoder" not in dict(namespace["lm"].named_children())


def test_readme_opens_with_the_two_commands():
    head = README.read_text(encoding="utf-8")[:600]
    assert "./scripts/demo.sh" in head and "./scripts/test.sh" in head


def test_readme_is_one_screen_or_two():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300


def test_readme_links_lead_to_files():
    """Relative links (the docs pages, CHANGELOG.md, LICENSE...) name files that exist."""
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    local = [link for link in links if "://" not in link]
    assert local
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, missing
