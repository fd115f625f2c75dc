"""The truecaser: SHOUTED and Title Cased lines read in sentence case with each word's usual
form, learnt where case is free; anything else left exactly as written."""

import pytest

from seq2seq.data.truecase import Truecaser, is_shouted, is_title_cased
from seq2seq.inference.options import TranslateOptions

CORPUS = [
    "Tom went to Paris with Mary.",
    "I saw Tom and Mary there.",
    "Where is the station? Tom is here.",
    "The station is big.",
    "He likes Paris and NASA.",
    "Mary works at NASA.",
    "Tom's friend is from Paris.",
    "Mary met Tom in the park.",
]


def test_usual_forms_are_learnt_where_case_is_free():
    forms = Truecaser.learn(CORPUS).forms
    assert forms["tom"] == "Tom" and forms["paris"] == "Paris" and forms["nasa"] == "NASA"
    assert forms["i"] == "I"
    # "The" and "Where" start sentences only: no evidence of a capital, so no entry.
    assert "the" not in forms and "where" not in forms


@pytest.fixture(scope="module")
def truecaser() -> Truecaser:
    return Truecaser.learn(CORPUS)


# What a line is read as, by rule: (written, read).
READ_IN_SENTENCE_CASE = [
    # SHOUTED and Title Cased lines, each word in its learnt form.
    ("WHERE IS THE TRAIN STATION?", "Where is the train station?"),
    ("Where Is The Train Station?", "Where is the train station?"),
    ("TOM WENT TO PARIS WITH NASA.", "Tom went to Paris with NASA."),
    ("I SAW TOM'S FRIEND", "I saw Tom's friend"),
    ("Getting Started with Paris", "Getting started with Paris"),
    ("I Don't Know Where Tom's Car Is.", "I don't know where Tom's car is."),
    # Acronyms and inner capitals in a title keep their case.
    ("USB Port Settings", "USB port settings"),
    ("REST API Guide", "REST API guide"),
    ("The IT Desk Of NASA", "The IT desk of NASA"),
    ("McDonald's Opening Hours", "McDonald's opening hours"),
    # One shouted word: the forms know it, or it is longer than an acronym usually is.
    ("TOM", "Tom"),
    ("TOM!", "Tom!"),
    ("HELLO", "Hello"),
    ("HELP!", "Help!"),
    ("E-MAIL", "E-mail"),
    ("STATION", "Station"),
    # Without a sentence's end, small words in lower case are a title's ("Gone with the Wind").
    ("Gone with the Wind", "Gone with the wind"),
    ("Flights From Paris To Tom", "Flights from Paris to Tom"),
    # Every sentence of an unsplit line starts with a capital.
    ("WHERE IS TOM? HE IS HERE.", "Where is Tom? He is here."),
    ("Where Is Tom? He Is Here!", "Where is Tom? He is here!"),
    ('"WHERE IS IT?" SHE ASKED. "HERE."', '"Where is it?" She asked. "Here."'),
    ("1. OPEN THE BOX", "1. Open the box"),
    # Full-width capitals are read after NFKC.
    ("ＷＨＥＲＥ ＩＳ ＴＯＭ？", "Where is Tom?"),
    ("Ｗｈｅｒｅ Ｉｓ Ｔｏｍ？", "Where is Tom?"),
]
LEFT_AS_WRITTEN = [
    "Where is the train station?",
    "Do NOT touch the wire.",
    "NASA launched it.",
    "Hello",
    "Tom",
    "我喜欢茶。",
    "",
    "3 + 4 = 7",
    # A one-word shouted label the forms do not know, as short as an acronym.
    "FAQ",
    "PDF",
    "OK",
    "OK!",
    "FAQ:",
    "WI-FI",
    "NASA",
    "ＦＡＱ",
    # Sentences with names, not titles.
    "Welcome to New York!",
    "Tom and Mary Went to Paris.",
    "Is It on the Table?",
]


@pytest.mark.parametrize(("written", "read"), READ_IN_SENTENCE_CASE)
def test_shouted_and_title_cased_lines_are_read_in_sentence_case(truecaser, written, read):
    assert truecaser.normalize(written) == read


@pytest.mark.parametrize("written", LEFT_AS_WRITTEN)
def test_everything_else_is_left_exactly_as_written(truecaser, written):
    assert truecaser.normalize(written) == written


def test_the_tests_of_case_read_words_not_characters():
    assert is_shouted("STOP!") and is_shouted("I AM HERE") and not is_shouted("A")
    assert not is_shouted("Stop 123") and not is_shouted("123")
    assert is_title_cased("The Lord of the Rings") and not is_title_cased("The lord of rings")
    assert not is_title_cased("NASA ESA")  # shouted, not a title


def translator_knowing_tom(tmp_path):  # noqa: ANN201 (a Translator)
    """A tiny checkpoint's translator whose truecaser knows one form: "Tom"."""
    import torch

    from seq2seq.inference.checkpoint import CHECKPOINT_KEY, TRUECASE_KEY
    from seq2seq.inference.translator import Translator
    from tests.helpers import tiny_checkpoint

    path = tiny_checkpoint(tmp_path / "tiny.ckpt", source_ends_with_eos=True)
    checkpoint = torch.load(path, weights_only=False)
    checkpoint[CHECKPOINT_KEY][TRUECASE_KEY] = {"tom": "Tom"}
    torch.save(checkpoint, path)
    return Translator.from_checkpoint(path)


def test_a_translator_reads_shouted_input_as_the_checkpoints_truecaser_writes_it(tmp_path):
    translator = translator_knowing_tom(tmp_path)
    assert translator.truecaser.forms["tom"] == "Tom"
    written = translator.encode(["Tom will buy apples today."])
    assert translator.encode(["TOM WILL BUY APPLES TODAY."]) == written
    assert translator.encode(["Tom Will Buy Apples Today."]) == written
    # One at a time: an untrained model's near-ties may differ between rows of one batch.
    shouted = translator.translate(["TOM WILL BUY APPLES TODAY."], TranslateOptions(beam_size=2))
    assert shouted == translator.translate(
        ["Tom will buy apples today."], TranslateOptions(beam_size=2)
    )


def test_without_learnt_forms_every_line_is_left_as_written():
    lines = [
        "WHERE IS THE TRAIN STATION?",
        "Where Is The Train Station?",
        "Paris, France",
        "ＷＨＥＲＥ ＩＳ ＴＯＭ？",
        "USB Port Settings",
        "HELLO",
    ]
    for truecaser in (Truecaser(), Truecaser({})):
        assert [truecaser.normalize(line) for line in lines] == lines
        assert not truecaser.learnt
    assert Truecaser.learn(CORPUS).learnt
    # Whatever a corpus holds, a checkpoint trained on it has learnt forms ("I" at least): its
    # SHOUTED lines are read in sentence case.
    lowered = Truecaser.learn(["no capitals here at all."])
    assert lowered.learnt and lowered.normalize(lines[0]) == "Where is the train station?"


def test_every_encode_path_reads_full_width_capitals_after_nfkc(tmp_path):
    translator = translator_knowing_tom(tmp_path)
    [expected] = translator.encode(["Where is Tom?"])
    assert expected != translator.encode(["Where is tom?"])[0]
    for line in ["ＷＨＥＲＥ ＩＳ ＴＯＭ？", "Ｗｈｅｒｅ Ｉｓ Ｔｏｍ？"]:
        assert translator.encode([line]) == [expected]
        assert translator.encode_sentence(line) == expected
        assert [piece.ids for piece in translator.plan([line])[0]] == [expected]


def test_titles_and_sentences_are_told_apart():
    assert is_title_cased("I Don't Know Where Tom's Car Is.")  # contractions: still a title
    for sentence in ["Welcome to New York!", "Tom and Mary Went to Paris.", "Is It on the Table?"]:
        assert not is_title_cased(sentence)
