"""Sentence splitting on tricky English, spans that point back into the text, and the
translations joined as Chinese is written (no space, newlines kept)."""

import pytest

from seq2seq.data.sentences import clauses, join_translations, split_sentences

TRICKY = [
    ("Mr. Smith went to Washington. He arrived at 5 p.m. on Monday.", 2),
    ("Dr. Brown lives in the U.S. now. She likes it.", 2),
    ("I like fruit, e.g. apples and pears. Do you?", 2),
    ("The price is 3.50 dollars. That is cheap.", 2),
    ("Wait... what happened? I don't know!", 2),
    ('"Are you coming?" she asked. "Yes!" he said.', 2),
    ("Visit https://example.com/a.b?c=d. It is useful.", 2),
    ("Write to tom.smith@example.com. He answers quickly.", 2),
    ("1. Open the box. 2. Take the phone out.", 2),
    ("Hello. How are you? I'm fine! Thanks.", 4),
    ("She arrived at 10 a.m. and left at noon.", 1),
    ("It costs $1,000.00 in total.", 1),
    ("This is version 2.0 of the app. Download it now.", 2),
]


@pytest.mark.parametrize(("text", "count"), TRICKY)
def test_tricky_english_splits_where_sentences_end(text, count):
    found = split_sentences(text)
    assert len(found) == count, [s.text for s in found]
    assert " ".join(s.text for s in found) == text  # nothing lost, nothing added


def test_spans_point_into_the_text_and_skip_white_space():
    text = "  Hello there.  How are you?\n\nFine.  "
    found = split_sentences(text)
    assert [s.text for s in found] == ["Hello there.", "How are you?", "Fine."]
    assert all(text[s.start : s.end] == s.text for s in found)


def test_a_url_and_an_email_address_keep_their_dots():
    [first, _] = split_sentences("See https://x.org/a.html?q=1. Then go.")
    assert first.text == "See https://x.org/a.html?q=1."
    assert [s.text for s in split_sentences("Mail a.b@c.org now. Ok.")][0] == "Mail a.b@c.org now."


def test_a_newline_always_ends_a_sentence_and_comes_back_between_translations():
    text = "One. Two\nThree.\n\nFour."
    found = split_sentences(text)
    assert [s.text for s in found] == ["One.", "Two", "Three.", "Four."]
    assert join_translations(["一。", "二", "三。", "四。"], found, text) == "一。二\n三。\n\n四。"


def test_white_space_has_no_sentences():
    assert split_sentences("") == [] and split_sentences(" \n\t ") == []
    with pytest.raises(ValueError):
        join_translations(["x"], [], "")


def test_clauses_cut_after_commas_semicolons_colons_and_before_dashes_and_lose_nothing():
    text = "When I came, the house was empty; nobody was there: not the dog -- gone, too."
    pieces = clauses(text)
    assert pieces == [
        "When I came,",
        "the house was empty;",
        "nobody was there:",
        "not the dog",
        "-- gone,",
        "too.",
    ]
    assert " ".join(pieces) == text
