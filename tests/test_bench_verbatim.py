"""``scripts/bench.py verbatim``: its counts on hand-made (input, output) pairs, each a known
number, and the driver end to end on a few sentences and documents with a tiny model."""

from __future__ import annotations

import importlib
import json

from tests.helpers import tiny_checkpoint

bench = importlib.import_module("benchmarks.verbatim")
counts = importlib.import_module("benchmarks.verbatim_counts")

HTML = (
    "<p>Install <b>3.2.7</b> from https://x.org/a or mail info@shop.example; set "
    "<code>max_len</code> and max_tokens with the API.</p>"
)


def test_running_text_leaves_code_and_link_targets_out():
    text = counts.running_text(HTML + '<p><a href="https://y.org/z">here</a></p>', "html")
    assert "max_len" not in text and "https://y.org/z" not in text and "max_tokens" in text
    markdown = "Use `max_len`, <https://auto.link> and [v1.2.3](https://t.org) here.\n"
    text = counts.running_text(markdown, "markdown")
    assert "max_len" not in text and "auto.link" not in text and "v1.2.3" in text
    srt = "1\n00:00:01,000 --> 00:00:02,000\n<i>Call 555-0199</i> at 10:30.\n"
    assert counts.running_text(srt, "srt").strip() == "Call 555-0199 at 10:30."


def test_each_kind_is_counted_and_a_glued_span_is_lost():
    source = counts.running_text(HTML, "html")
    assert sorted(counts.spans(source)) == [
        ("acronym", "API"),
        ("email", "info@shop.example"),
        ("identifier", "max_tokens"),
        ("url", "https://x.org/a"),
        ("version", "3.2.7"),
    ]
    faithful = "从https://x.org/a安装3.2.7，或者写信给info@shop.example；用API设max_tokens。"
    assert all(held == count for count, held in counts.kept(source, faithful).values())
    glued = "安装3.2.77，https://x.org/a，info@shop.example；APIs设max_tokens。"
    assert counts.lost_spans(source, glued) == [("version", "3.2.7"), ("acronym", "API")]


def test_the_bench_runs_end_to_end(tmp_path, capsys):
    checkpoint = tiny_checkpoint(tmp_path / "model.ckpt")
    sentences = tmp_path / "sentences.tsv"
    sentences.write_text(
        "english\tchinese\tspans\n"
        "I will buy version 3.2.7 today.\t我今天会买3.2.7版本。\tversion:3.2.7\n"
        "Tom can see info@shop.example.\t汤姆能看见info@shop.example。\temail:info@shop.example\n",
        encoding="utf-8",
    )
    documents = tmp_path / "docs"
    documents.mkdir()
    (documents / "page.html").write_text(HTML, encoding="utf-8")
    out = tmp_path / "result.json"
    arguments = ["--checkpoint", str(checkpoint), "--sentences", str(sentences), "--rounds", "1"]
    arguments += ["--documents", str(documents), "--no-test", "--json", str(out)]
    assert bench.main(arguments) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    literal, plain = result["sentences"]["literal"], result["sentences"]["plain"]
    assert literal["kept"] == literal["spans"] == 2 and plain["kept"] == 0
    kinds = result["documents"]["by_kind"]["literal"]
    assert all(held == count for count, held in kinds.values())
    assert "| literal | 2/2 (100.0%)" in capsys.readouterr().out
