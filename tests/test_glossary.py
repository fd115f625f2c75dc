"""Glossaries: reading TSV/CSV with one-line errors, finding terms in sentences (whole words,
any case, multi-word, longest first), and forcing them through the Translator and the CLI."""

from __future__ import annotations

import pytest

from seq2seq.cli import main
from seq2seq.inference.glossary import Glossary, Term, missing_terms
from seq2seq.inference.options import TranslateOptions
from tests.helpers import file_error

GLOSSARY = Glossary(
    [
        Term("teacher", "导师"),
        Term("machine learning", "机器学习"),
        Term("learning", "学习"),
        Term("e-mail", "电邮"),
        Term("New York", "纽约"),
        Term("York", "约克"),
    ]
)


def targets(sentence: str) -> list[str]:
    return [term.target for term in GLOSSARY.terms_in(sentence)]


def test_terms_match_whole_words_in_any_case():
    assert targets("My TEACHER's e-mail.") == ["导师", "电邮"]
    assert targets("Teachers and email") == []  # not a word of the sentence


def test_overlapping_terms_take_the_longest_and_multi_word_terms_match():
    assert targets("He studies machine learning.") == ["机器学习"]  # not 学习 too
    assert targets("Learning is fun; machine learning more.") == ["学习", "机器学习"]
    assert targets("I flew to new   york.") == ["纽约"]
    assert targets("York and New York") == ["约克", "纽约"]


def test_a_term_that_occurs_twice_applies_once():
    assert targets("teacher, teacher!") == ["导师"]


def test_tsv_and_csv_and_dicts_read_the_same():
    tsv = Glossary.parse("teacher\t导师\n\nNew York\t纽约\n")
    csv = Glossary.parse('teacher,导师\n"New York",纽约,en,zh\n', format="csv")
    entries = Glossary.from_dict({"teacher": "导师", "New York": "纽约"})
    assert (
        list(tsv)
        == list(csv)
        == list(entries)
        == [Term("teacher", "导师"), Term("New York", "纽约")]
    )
    assert Glossary.parse(tsv.to_tsv()).terms == tsv.terms


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "teacher\t导师\nbook\n",
            "g.tsv:2: expected 2 tab-separated fields (source, target), found 1",
        ),
        ("teacher\t导师\ta\n", "g.tsv:1: expected 2 tab-separated fields"),
        ("teacher\t\n", "g.tsv:1: empty target term"),
        (" teacher\t导师\n", "g.tsv:1: source term ' teacher' has leading or trailing white space"),
        (
            "teacher\t导师\n\nTeacher\t老师\n",
            "g.tsv:3: duplicate source term 'Teacher' (first on line 1)",
        ),
        ("a\x07b\tc\n", "g.tsv:1: source term 'a\\x07b' holds a control character"),
        # A line ends at a newline only: a form feed is in the term, and lines count newlines.
        ("a\x0cb\tc\nd\te\n", "g.tsv:1: source term 'a\\x0cb' holds a control character"),
        ("a\u2028b\tc\nbook\n", "g.tsv:1: source term 'a\\u2028b' holds a tab or a line break"),
    ],
)
def test_a_bad_entry_is_a_one_line_error_naming_its_line(tmp_path, text, message):
    path = tmp_path / "g.tsv"
    error = file_error(path, text, Glossary.read)
    assert error.startswith(f"{path}:{message.split(':', 1)[1]}")


def test_missing_terms_are_read_on_the_text():
    terms = [Term("teacher", "导师"), Term("book", "书")]
    assert missing_terms(terms, "我的导师有一本书。") == []
    assert missing_terms(terms, "我的老师有一本书。") == [Term("teacher", "导师")]


# -- through the Translator and the CLI (the tiny untrained translator) ---------------------


def test_terms_are_forced_only_in_the_sentences_that_hold_them(translator):
    glossary = Glossary([Term("apples", "苹果"), Term("book", "一本书")])
    lines = [
        "I will buy apples today. She can see the book.",
        "We will eat rice.",
        "",
        "He can see a new car tomorrow.",
    ]
    plain = translator.translate(lines, TranslateOptions(beam_size=3))
    forced = translator.translate(lines, TranslateOptions(beam_size=3, glossary=glossary))
    assert forced[1:] == plain[1:]  # no term: byte-identical
    assert "苹果" in forced[0] and "一本书" in forced[0]
    # Each sentence is searched apart: the second holds the book, the first the apples.
    sentences = translator.translate_sentences(
        ["I will buy apples today.", "She can see the book."],
        TranslateOptions(beam_size=3, glossary=glossary),
    )
    assert "苹果" in sentences[0].texts[0] and "一本书" not in sentences[0].texts[0]
    assert "一本书" in sentences[1].texts[0] and "苹果" not in sentences[1].texts[0]
    assert all(not s.missing for s in sentences)


def test_sentences_with_and_without_terms_share_a_batch_at_one_beam(translator, monkeypatch):
    glossary = Glossary([Term("apples", "苹果")])
    lines = ["I will buy apples today.", "We will eat rice.", "He can see a new car tomorrow."]
    plain = translator.translate(lines, TranslateOptions(beam_size=5))
    batches = []
    real = translator.engine.hypotheses

    def hypotheses(sources, beam_size, n_best=1, constraints=None):  # noqa: ANN001, ANN202
        batches.append((len(sources), beam_size, constraints is not None))
        return real(sources, beam_size, n_best, constraints)

    monkeypatch.setattr(translator.engine, "hypotheses", hypotheses)
    forced = translator.translate(lines, TranslateOptions(beam_size=5, glossary=glossary))
    assert batches == [(3, 5, True)]  # one batch: the term's beam is the beam asked for
    assert forced[1:] == plain[1:] and "苹果" in forced[0]


def test_a_term_that_cannot_fit_is_reported_not_raised(translator, capsys):
    long_term = "苹果" * 40  # far beyond the length limit of a two-word sentence
    out = translator.translate(
        ["Buy apples.", "Eat rice."],
        TranslateOptions(beam_size=3, glossary=Glossary([Term("apples", long_term)])),
    )
    assert len(out) == 2 and long_term not in out[0]
    warning = capsys.readouterr().err
    assert "1 input(s) lack glossary term(s)" in warning and "(apples): line 1" in warning


def test_greedy_with_a_glossary_still_forces_terms(translator):
    out = translator.translate(
        ["I will buy apples today."],
        TranslateOptions(beam_size=1, glossary=Glossary([Term("apples", "一辆新车")])),
    )
    assert "一辆新车" in out[0]


def test_cli_translate_and_evaluate_take_a_glossary(translation_checkpoint, tmp_path, capsys):
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("apples\t苹果\nbook\t那本书\n", encoding="utf-8")
    source = tmp_path / "in.en"
    source.write_text("I will buy apples today.\nWe will eat rice.\n", encoding="utf-8")
    reference = tmp_path / "ref.zh"
    reference.write_text("我今天会买苹果。\n我们会吃米饭。\n", encoding="utf-8")
    output = tmp_path / "out.zh"
    common = [
        "--checkpoint",
        str(translation_checkpoint),
        "--glossary",
        str(glossary),
        "--beam-size",
        "2",
    ]
    assert main(["translate", *common, "--input", str(source), "--output", str(output)]) == 0
    lines = output.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and "苹果" in lines[0]
    assert (
        main(
            [
                "evaluate",
                *common,
                "--src",
                str(source),
                "--ref",
                str(reference),
                "--hyps",
                str(tmp_path / "hyps.zh"),
                "--json",
            ]
        )
        == 0
    )
    assert '"glossary"' in capsys.readouterr().out
    assert "苹果" in (tmp_path / "hyps.zh").read_text(encoding="utf-8").splitlines()[0]


def test_cli_names_the_bad_line_of_a_glossary(translation_checkpoint, tmp_path, capsys):
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("apples\t苹果\nbook 那本书\n", encoding="utf-8")
    code = main(
        [
            "translate",
            "--checkpoint",
            str(translation_checkpoint),
            "--glossary",
            str(glossary),
            "--input",
            str(glossary),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err == (
        f"seq2seq translate: error: {glossary}:2: expected 2 tab-separated fields "
        "(source, target), found 1"
    )


# -- the server's LibreTranslate and /v1/translate routes (inline glossaries) ----------------


def test_libretranslate_takes_an_inline_glossary_as_json_or_form(http):
    body = {
        "q": ["I will buy apples today.", "We will eat rice."],
        "source": "en",
        "target": "zh",
        "glossary": {"apples": "苹果"},
    }
    answer = http.post("/translate", json=body).json()
    assert "苹果" in answer["translatedText"][0]
    assert answer["glossaryTermsNotMet"] == [[], []] and "warnings" not in answer
    plain = http.post("/translate", json={**body, "glossary": None}).json()
    assert answer["translatedText"][1] == plain["translatedText"][1]  # no term: unchanged
    form = {"q": body["q"][0], "source": "en", "target": "zh", "glossary": "apples\t苹果"}
    assert (
        http.post("/translate", data=form).json()["translatedText"] == answer["translatedText"][0]
    )


def test_the_server_says_which_terms_it_could_not_place(http):
    body = {"q": "Buy apples.", "source": "en", "target": "zh", "glossary": {"apples": "苹果" * 40}}
    answer = http.post("/translate", json=body).json()
    assert answer["glossaryTermsNotMet"] == ["apples"]
    assert answer["warnings"] == ["q: glossary term(s) not placed within the length limit: apples"]
    native = http.post(
        "/v1/translate", json={"text": ["Buy apples."], "glossary": {"apples": "苹果" * 40}}
    ).json()
    assert native["translations"][0]["glossary_terms_not_met"] == ["apples"]


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        (
            "/translate",
            {
                "q": "x",
                "source": "en",
                "target": "zh",
                "glossary": {"apples": "苹果", "Apples": "苹"},
            },
            "Invalid request: glossary:2: duplicate source term 'Apples' (first on line 1)",
        ),
        (
            "/translate",
            {"q": "x", "source": "en", "target": "zh", "glossary": "apples"},
            "Invalid request: glossary:1: expected 2 tab-separated fields (source, target), "
            "found 1",
        ),
        (
            "/v1/translate",
            {"text": "x", "glossary": {"apples": ""}},
            "Invalid request: glossary:1: empty target term",
        ),
        (
            "/v1/translate",
            {"text": "x", "glossary": {"a": "b"}, "return_attention": True},
            "Invalid request: return_attention takes no glossary",
        ),
    ],
)
def test_bad_inline_glossaries_are_400s_naming_the_entry(http, path, body, message):
    answer = http.post(path, json=body)
    assert answer.status_code == 400 and answer.json()["error"] == message


def test_constrained_requests_decode_in_whole_batches(http):
    """The continuous decoder takes plain requests; a glossary's go to whole batches."""
    before = http.get("/v1/stats").json()
    http.post("/v1/translate", json={"text": ["We will eat rice today."]})
    middle = http.get("/v1/stats").json()
    assert middle["batches"] == before["batches"] and middle["steps"] > before["steps"]
    http.post(
        "/v1/translate", json={"text": ["We will eat rice today."], "glossary": {"rice": "米饭"}}
    )
    after = http.get("/v1/stats").json()
    assert after["batches"] == middle["batches"] + 1 and after["steps"] == middle["steps"]
