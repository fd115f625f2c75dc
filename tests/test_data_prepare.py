"""Preparation helpers: the atomic cache directory and the cached text read back exactly."""

import pytest

from seq2seq.data.cache_dir import build_atomically, is_prepared, read_split_texts
from seq2seq.textio import write_lines


def test_cached_sentences_come_back_exactly_line_for_line(tmp_path):
    # Cleaning keeps a leading U+FEFF and U+2028 inside a sentence; both must survive.
    en = ["\ufeffHello.", "a\u2028b", "Bye."]
    zh = ["你好。", "甲\u2028乙", "再见。"]
    write_lines(en, tmp_path / "dev.en")
    write_lines(zh, tmp_path / "dev.zh")
    assert read_split_texts(tmp_path, "dev") == (en, zh)


def test_a_failed_build_leaves_nothing_behind(tmp_path):
    cache = tmp_path / "tsv-0123"

    def fail(out):
        (out / "spm.model").write_bytes(b"half")
        raise RuntimeError("crash")

    with pytest.raises(RuntimeError, match="crash"):
        build_atomically(cache, fail)
    assert not list(tmp_path.iterdir())
    build_atomically(cache, lambda out: (out / "report.json").write_text("{}"))
    assert is_prepared(cache) and [p.name for p in tmp_path.iterdir()] == [cache.name]


def test_another_hosts_half_built_cache_with_the_same_pid_is_left_alone(tmp_path, monkeypatch):
    """Containers on two nodes of a shared filesystem can have the same process id: a build
    here must not delete (or reuse) the other node's temporary directory."""
    import os
    import socket

    cache = tmp_path / "tsv-0123"
    other = tmp_path / f"{cache.name}.tmp-othernode-{os.getpid()}"
    other.mkdir()
    (other / "spm.model").write_bytes(b"the other node is still writing this")
    monkeypatch.setattr(socket, "gethostname", lambda: "thisnode")
    seen = []

    def build(out):
        seen.append(out.name)
        (out / "report.json").write_text("{}")

    build_atomically(cache, build)
    assert seen == [f"{cache.name}.tmp-thisnode-{os.getpid()}"]
    assert (other / "spm.model").read_bytes() == b"the other node is still writing this"
    assert is_prepared(cache)
