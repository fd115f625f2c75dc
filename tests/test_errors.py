"""User errors (errors.py): one line naming the file and line, and every kind caught by the
commands."""

import ast
from pathlib import Path

import seq2seq.errors
from seq2seq.errors import USER_ERRORS, ConfigError, DataError


def test_data_error_names_the_file_and_the_line():
    assert str(DataError.at("corpus.tsv", 17, "expected 2 fields")) == (
        "corpus.tsv:17: expected 2 fields"
    )
    assert str(DataError.at(Path("dir") / "x.txt", None, "file not found")) == (
        f"{Path('dir') / 'x.txt'}: file not found"
    )
    assert isinstance(DataError.at("x", 1, "y"), DataError)


def test_every_error_of_the_module_is_a_user_error():
    defined = {
        value
        for value in vars(seq2seq.errors).values()
        if isinstance(value, type) and value.__module__ == "seq2seq.errors"
    }
    assert defined == set(USER_ERRORS)
    assert issubclass(ConfigError, ValueError)  # a bad config is also a plain ValueError


def test_the_module_imports_no_other_part_of_the_toolkit():
    tree = ast.parse(Path(seq2seq.errors.__file__).read_text(encoding="utf-8"))
    imported = [
        alias.name if isinstance(node, ast.Import) else node.module
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    ]
    assert imported and not any(name.startswith("seq2seq") for name in imported)
