"""``scripts/bench.py documents-wild``: its counts on small hand-made (input, output) pairs,
each a known number and zero for a faithful output; the corpus manifest and its fetcher; and
the driver end to end on ``tests/data/documents``."""

from __future__ import annotations

import gzip
import hashlib
import importlib
import importlib.util
import io
import tarfile
from pathlib import Path

import pytest

from tests.helpers import tiny_checkpoint

ROOT = Path(__file__).resolve().parents[1]
bench = importlib.import_module("benchmarks.documents_wild")
wild = importlib.import_module("benchmarks.documents_compare")
encodings = importlib.import_module("benchmarks.documents_encodings")
_spec = importlib.util.spec_from_file_location(
    "fetch_documents", ROOT / "scripts" / "data" / "fetch_documents.py"
)
fetcher = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fetcher)

DOCUMENTS = ROOT / "tests" / "data" / "documents"
HTML = (
    '<html><head><meta charset="utf-8"><title>Guide</title></head><body>\n'
    '<p>See <a href="manual.html">the manual</a> and <a href="faq.html">this page</a>.</p>\n'
    "<p>Call <code>ffi_call</code> with <var>cif</var> and <b>check</b> it.</p>\n"
    "</body></html>\n"
)
MARKDOWN = (
    "---\ntitle: Guide\n---\n\n"
    "Read [the docs](https://example.org/docs) _now_ and **always**[^1].\n\n"
    "Use `async` / `await` here.\n\n"
    "- [ ] one\n- [x] two\n\n"
    "[^1]: A note.\n"
)
SRT = (
    "1\r\n00:00:01,000 --> 00:00:02,000\r\n<i>Hello</i> world\r\n\r\n"
    "2\r\n00:00:03,000 --> 00:00:04,000\r\nCafé\r\n"
)


def zero(comparison) -> bool:
    counts = [
        comparison.links_lost,
        comparison.inline_emptied,
        comparison.code_lost or 0,
        comparison.emphasis_lost or 0,
        comparison.notes_lost or 0,
        comparison.fffd_added,
        len(comparison.encoding),
        comparison.structure_changed or 0,
    ]
    return not any(counts) and not comparison.front_matter_changed


@pytest.mark.parametrize(
    ("text", "format", "encoding"),
    [(HTML, "html", "utf-8"), (MARKDOWN, "markdown", "utf-8"), (SRT, "srt", "utf-8-sig")],
)
def test_a_faithful_output_counts_nothing(text, format, encoding):
    raw = text.encode(encoding)
    comparison = wild.compare(raw, raw, format)
    assert zero(comparison)
    assert comparison.inline_with_text > 0


def test_the_test_documents_against_themselves_count_nothing():
    encodings = bench.manifest_encodings(bench.MANIFEST)
    for path in bench.documents(DOCUMENTS):
        raw = path.read_bytes()
        known = encodings[hashlib.sha256(raw).hexdigest()]
        assert zero(wild.compare(raw, raw, wild.FORMATS[path.suffix], known)), path.name


def test_html_an_emptied_link_a_lost_one_and_a_translated_variable():
    output = (
        '<html><head><meta charset="utf-8"><title>指南</title></head><body>\n'
        '<p>见<a href="manual.html"></a>和这一页。</p>\n'
        "<p>用<code>ffi_call</code>调用<var>论坛</var>并<b>检查</b>它。</p>\n"
        "</body></html>\n"
    )
    c = wild.compare(HTML.encode(), output.encode(), "html")
    assert (c.links_lost, c.links) == (1, 2)  # faq.html
    assert (c.inline_emptied, c.inline_with_text) == (2, 5)  # one emptied, one missing
    assert (c.code_lost, c.code, c.code_out) == (1, 2, 2)  # cif became 论坛
    assert c.structure_changed == 2  # the second <a> and its </a>
    assert c.fffd_added == 0 and c.encoding == []
    assert c.emphasis is None and c.front_matter_changed is None


def test_markdown_a_lost_link_emphasis_beside_chinese_and_code_spans():
    output = (
        "---\ntitle: 指南\n---\n\n"
        "阅读文档_现在_和**总是**[^1]。\n\n"
        "在这里使用`async`/等待。\n\n"
        "- [ ]一\n- [x] 二\n\n"
        "[^1]：一个注释。\n"
    )
    c = wild.compare(MARKDOWN.encode(), output.encode(), "markdown")
    assert (c.links_lost, c.links) == (1, 1)
    assert (c.emphasis_lost, c.emphasis, c.emphasis_out) == (1, 2, 1)  # _现在_ is no em
    assert (c.inline_emptied, c.inline_with_text) == (2, 3)  # the link and the em
    assert (c.code_lost, c.code, c.code_out) == (1, 2, 1)
    assert c.front_matter_changed is True
    assert (c.notes_lost, c.notes) == (2, 4)  # the definition's ：, the task with no space
    assert c.structure is None


def test_front_matter_yaml_and_toml_kept_or_changed():
    toml = "+++\ntitle = 'Guide'\n+++\n\nSome text.\n"
    assert wild.front_matter(toml) == "+++\ntitle = 'Guide'\n+++\n"
    kept = wild.compare(toml.encode(), b"+++\ntitle = 'Guide'\n+++\n\n Some.\n", "markdown")
    assert kept.front_matter_changed is False
    assert wild.compare(toml.encode(), b"+++\n\n", "markdown").front_matter_changed is True
    assert wild.compare(b"Text.\n", "文本。\n".encode(), "markdown").front_matter_changed is None


def test_srt_a_changed_timing_an_emptied_tag_an_added_fffd_and_a_dropped_bom():
    output = (
        "1\n00:00:01,000 --> 00:00:02,500\n<i></i>你好世界\n\n"
        "2\n00:00:03,000 --> 00:00:04,000\n咖啡\ufffd\n"
    )
    c = wild.compare(SRT.encode("utf-8-sig"), output.encode(), "srt")
    assert (c.structure_changed, c.structure) == (1, 2)
    assert (c.inline_emptied, c.inline_with_text) == (1, 1)
    assert c.fffd_added == 1
    assert c.encoding == ["utf-8 BOM dropped"]
    assert c.links == 0 and c.code is None and c.emphasis is None


def test_declared_charsets_latin1_read_and_utf8_written():
    page = '<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1"><p>Café</p>'
    raw_in = page.encode("latin-1")
    assert encodings.declared_charsets(raw_in) == ["iso-8859-1"]
    assert encodings.decode_input(raw_in, "html").endswith("Café</p>")
    read_as_utf8 = raw_in.decode("utf-8", errors="replace")  # what a UTF-8 reader does
    c = wild.compare(raw_in, read_as_utf8.encode(), "html")
    assert c.fffd_added == 1
    assert c.encoding == ["says iso-8859-1, is UTF-8"]
    ascii_page = '<meta charset="us-ascii"><p>咖啡</p>'.encode()
    assert encodings.encoding_mistakes(ascii_page, ascii_page, "html") == ["not us-ascii"]
    xml = b'<?xml version="1.0" encoding="ISO-8859-1"?>\n<html><p>x</p></html>'
    assert encodings.declared_charsets(xml) == ["iso-8859-1"]


def test_utf16_input_and_kept_encodings():
    raw = SRT.encode("utf-16")  # with its BOM
    assert encodings.decode_input(raw, "srt") == SRT
    assert encodings.decode_input(raw, "srt", "utf-16") == SRT
    utf8 = SRT.replace("Café", "咖啡").encode()
    c = wild.compare(raw, utf8, "srt")
    assert c.encoding == [f"{encodings.bom_of(raw)} BOM dropped"] and c.fffd_added == 0
    cp1252 = SRT.encode("cp1252")  # an output kept in the input's encoding is no mistake
    assert wild.compare(cp1252, cp1252, "srt", "windows-1252").encoding == []


def test_words_are_the_text_to_translate():
    page = b"<title>A title</title><p>Two words <code>not these</code></p><pre>nor these</pre>"
    assert wild.words(page, "html") == 4
    assert wild.words(b"# Title here\n\nSome `code` text.\n\n    code block\n", "markdown") == 4
    assert wild.words(SRT.encode(), "srt") == 3


def test_the_table_has_a_row_per_file_totals_and_failures():
    raw = HTML.encode()
    good = bench.Row("a.html", "html", "utf-8", 2048, 10, 2.0, 0)
    good.comparison = wild.compare(raw, raw, "html")
    bad = bench.Row("b.srt", "srt", "?", 100, 3, 1.0, 2, "seq2seq translate: error: b.srt:2: bad")
    text = bench.table([good, bad])
    lines = text.splitlines()
    assert lines[2].startswith("| a.html | html | utf-8 | 2.0 | 10 | 0 | 2.0 | 5 | 0 / 2 |")
    assert lines[3].startswith("| b.srt | srt | ? |") and "failed" in lines[3]
    assert lines[4].startswith("| **total (2 files)** |") and "1 failed" in lines[4]
    assert "0 / 5 (0.0%)" in lines[4]
    assert "- `b.srt`: exit 2: seq2seq translate: error: b.srt:2: bad" in text


def test_documents_skip_the_readme_and_quick_takes_the_two_smallest(tmp_path):
    for name, size in [("README.md", 1), ("a.md", 30), ("b.md", 10), ("c.md", 20), ("x.txt", 1)]:
        (tmp_path / name).write_text("x" * size)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.srt").write_text("1")
    names = [p.name for p in bench.documents(tmp_path)]
    assert names == ["a.md", "b.md", "c.md", "d.srt"]
    assert [p.name for p in bench.documents(tmp_path, quick=True)] == ["b.md", "c.md", "d.srt"]


def test_the_manifest_records_every_file_and_the_test_documents_come_from_it():
    rows = fetcher.read_manifest()
    formats = [row["format"] for row in rows]
    assert formats.count("html") >= 10 and formats.count("markdown") >= 10
    assert formats.count("srt") >= 5
    for row in rows:
        assert wild.FORMATS[Path(row["name"]).suffix] == row["format"]
        assert row["registry"] in ("debian", "pypi") and row["licence"] and row["version"]
        assert len(row["sha256"]) == 64 and int(row["bytes"]) > 0
        assert encodings.codec_of(row["encoding"]), row["encoding"]
    by_name = {row["name"]: row for row in rows}
    test_documents = bench.documents(DOCUMENTS)
    assert 3 <= len(test_documents) <= 6
    assert sum(p.stat().st_size for p in test_documents) < 60_000
    readme = (DOCUMENTS / "README.md").read_text(encoding="utf-8")
    for path in test_documents:
        assert hashlib.sha256(path.read_bytes()).hexdigest() == by_name[path.name]["sha256"]
        assert path.name in readme


def _tar(members: dict[str, bytes], mode: str = "w:gz") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _deb(members: dict[str, bytes]) -> bytes:
    """A minimal Debian package: an ar archive with debian-binary and data.tar.xz."""
    out = bytearray(b"!<arch>\n")
    for name, data in [("debian-binary", b"2.0\n"), ("data.tar.xz", _tar(members, "w:xz"))]:
        header = f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n"
        out += header.encode() + data + (b"\n" if len(data) % 2 else b"")
    return bytes(out)


def _row(name, registry, package, version, path, data) -> dict[str, str]:
    return dict(
        name=name,
        registry=registry,
        package=package,
        version=version,
        path=path,
        sha256=hashlib.sha256(data).hexdigest(),
    )


def test_the_fetcher_extracts_and_checks_files_from_cached_archives(tmp_path, monkeypatch):
    page, notes = b"<p>Hello.</p>\n", b"# Notes\n"
    archives = tmp_path / "archives"
    archives.mkdir()
    (archives / "demo_1%3a1.0-1_all.deb").write_bytes(
        _deb({"./usr/share/doc/demo/page.html.gz": gzip.compress(page)})
    )
    (archives / "demo_docs-2.0.tar.gz").write_bytes(_tar({"demo_docs-2.0/NOTES.md": notes}))
    rows = [
        _row(
            "demo--page.html", "debian", "demo", "1:1.0-1", "usr/share/doc/demo/page.html.gz", page
        ),
        _row("demo--NOTES.md", "pypi", "demo-docs", "2.0", "demo_docs-2.0/NOTES.md", notes),
    ]
    monkeypatch.setattr(fetcher, "download", lambda *a: pytest.fail("downloaded"))
    assert fetcher.fetch(rows, tmp_path) == (2, [])  # offline: the archives are there
    assert (tmp_path / "files" / "demo--page.html").read_bytes() == page
    assert fetcher.fetch(rows, tmp_path) == (0, [])  # nothing to do
    (tmp_path / "files" / "demo--NOTES.md").write_bytes(b"changed")
    rows[0]["sha256"] = "0" * 64
    written, problems = fetcher.fetch(rows, tmp_path)
    assert written == 1 and len(problems) == 1
    assert problems[0].startswith("demo--page.html: sha256 ")


def test_a_failed_download_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(fetcher, "download", lambda *a: "E: Version '9' was not found")
    rows = [_row("x--a.html", "debian", "x", "9", "usr/a.html", b"")]
    assert fetcher.fetch(rows, tmp_path) == (
        0,
        ["download failed: debian x 9 (E: Version '9' was not found); 1 file(s) missing"],
    )


@pytest.mark.slow
def test_the_driver_translates_the_test_documents_with_the_cli(tmp_path, capsys):
    checkpoint = tiny_checkpoint(tmp_path / "tiny.ckpt")
    out = tmp_path / "out"
    args = ["--checkpoint", str(checkpoint), "--dir", str(DOCUMENTS), "--out", str(out)]
    short = "--beam-size 1 --max-len-a 0 --max-len-b 8"  # an untrained model: bound its outputs
    assert bench.main([*args, "--quick", "--translate-args", short]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("seq2seq imported from: ")
    names = [p.name for p in bench.documents(DOCUMENTS, quick=True)]
    rows = [line for line in printed.splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows[1:-1]] == names
    assert rows[-1].startswith(f"| **total ({len(names)} files)** |")
    assert (out / "runs.json").is_file()
    assert bench.main([*args, "--quick", "--compare-only"]) == 0  # the same table again
    again = capsys.readouterr().out
    assert again.split("outputs in", 1)[1] == printed.split("outputs in", 1)[1]
