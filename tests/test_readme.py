"""The README's Python API example runs as written (the API it shows is the stable one)."""

import re
from pathlib import Path

README = Path(__file__).parent.parent / "README.md"


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
