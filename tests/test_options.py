"""TranslateOptions, and the pre-0.3 calls of every Translator entry point: each still works,
warns once that it is deprecated, and answers exactly what its TranslateOptions form does."""

from __future__ import annotations

import warnings

import pytest

from seq2seq import TranslateOptions
from seq2seq.formats import FORMATS, parse_text
from seq2seq.inference.glossary import Glossary, Term
from seq2seq.inference.options import CallbackProgress

LINES = ["We eat rice. They drink tea.", "", "I will buy apples today."]
PAGE = "<p>I will <b>buy apples</b> today.</p>"


def deprecated(call):
    """``call()``'s result, asserting it warned that its form is deprecated since 0.3."""
    with pytest.warns(DeprecationWarning, match=r"deprecated since 0\.3 and goes in 0\.4"):
        return call()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"beam_size": 0}, "beam_size must be an integer >= 1, got 0"),
        ({"max_tokens": 2.5}, "max_tokens must be an integer >= 1, got 2.5"),
        ({"n_best": True}, "n_best must be an integer >= 1, got True"),
        (
            {"format": "pdf"},
            f"format must be one of {', '.join(FORMATS)}, got 'pdf'",
        ),
    ],
)
def test_options_refuse_bad_values_in_one_line(fields, message):
    with pytest.raises(ValueError, match=message):
        TranslateOptions(**fields)


def test_options_are_keyword_only_and_the_beam_widens_to_n_best():
    with pytest.raises(TypeError):
        TranslateOptions(4)  # type: ignore[misc]
    assert TranslateOptions(beam_size=2, n_best=5).search_beam == 5
    assert TranslateOptions(beam_size=4, n_best=2).search_beam == 4


def test_new_calls_do_not_warn(translator):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        translator.translate(LINES, TranslateOptions(beam_size=2))
        translator.translate(LINES, options=TranslateOptions(beam_size=2), first_line=3)
        translator.translate(LINES)
        translator.translate_n_best(LINES, TranslateOptions(n_best=2))


def test_old_translate_calls_answer_as_the_new_ones(translator):
    beam2 = translator.translate(LINES, TranslateOptions(beam_size=2))
    assert deprecated(lambda: translator.translate(LINES, 2)) == beam2
    assert deprecated(lambda: translator.translate(LINES, beam_size=2)) == beam2
    whole = translator.translate(LINES, TranslateOptions(beam_size=2, split=False))
    assert deprecated(lambda: translator.translate(LINES, 2, split=False)) == whole
    glossary = Glossary([Term("apples", "苹果")])
    forced = translator.translate(LINES, TranslateOptions(beam_size=2, glossary=glossary))
    assert deprecated(lambda: translator.translate(LINES, beam_size=2, glossary=glossary)) == forced


def test_old_callbacks_still_report_progress(translator):
    totals, batches = [], []
    deprecated(lambda: translator.translate(LINES, 2, 4000, batches.append, True, totals.append))
    assert totals == [3] and sum(batches) == 3  # three distinct sentences; the empty line none
    new_totals, new_batches = [], []
    progress = CallbackProgress(on_total=new_totals.append, on_batch=new_batches.append)
    translator.translate(LINES, TranslateOptions(beam_size=2), progress=progress)
    assert (new_totals, new_batches) == (totals, batches)


def test_old_n_best_stream_documents_and_sentences_calls(translator):
    n_best = translator.translate_n_best(LINES, TranslateOptions(beam_size=3, n_best=2))
    old = deprecated(lambda: translator.translate_n_best(LINES, 2, 3))
    assert [[h.text for h in hyps] for hyps in old] == [[h.text for h in hyps] for hyps in n_best]

    windows = list(translator.translate_stream(LINES, TranslateOptions(beam_size=2), window=2))
    old_windows = deprecated(lambda: list(translator.translate_stream(LINES, 2, window=2)))
    assert old_windows == windows
    assert [len(w) for w in windows] == [2, 1]
    assert sum(windows, []) == translator.translate(LINES, TranslateOptions(beam_size=2))

    documents = [parse_text(line) for line in LINES]
    rebuilt = translator.translate_documents(documents, TranslateOptions(beam_size=2))
    assert deprecated(lambda: translator.translate_documents(documents, 2)) == rebuilt

    found = translator.translate_sentences(LINES[:1], TranslateOptions(beam_size=3, n_best=2))
    old_found = deprecated(lambda: translator.translate_sentences(LINES[:1], 3, n_best=2))
    assert [s.texts for s in old_found] == [s.texts for s in found]
    assert len(found[0].texts) == 2


def test_the_deprecated_methods_name_their_replacement(translator):
    html = translator.translate([PAGE], TranslateOptions(format="html"))
    with pytest.warns(DeprecationWarning, match=r"TranslateOptions\(format=\.\.\.\)"):
        assert translator.translate_text([PAGE], "html") == html
    with pytest.warns(DeprecationWarning, match=r"translate_n_best\(lines, TranslateOptions"):
        hypotheses = translator.translate_hypotheses(LINES, 3, n_best=2)
    n_best = translator.translate_n_best(
        LINES, TranslateOptions(beam_size=3, n_best=2, split=False)
    )
    assert [len(h) for h in hypotheses] == [2, 0, 2]  # the old answer to an empty line: none
    for old, new in zip(hypotheses, n_best, strict=True):
        assert [h.text for h in old] == [h.text for h in new][: len(old)]
        assert [h.tokens for h in old] == [h.tokens for h in new][: len(old)]


def test_a_text_keeps_its_line_breaks_line_for_line(translator):
    [two_lines] = translator.translate(["We eat rice.\nThey drink tea."])
    assert two_lines.count("\n") == 1
    assert two_lines.split("\n") == translator.translate(["We eat rice.", "They drink tea."])
