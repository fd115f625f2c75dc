"""LibreTranslate's and OpenAI's request shapes, checked without a server."""

from __future__ import annotations

import pytest

from seq2seq.serve.completion_routes import StopScanner, cut_at_stop
from seq2seq.serve.protocol import (
    ApiError,
    Limits,
    detect_languages,
    detected_language,
    parse_body,
    translate_args,
)


def test_arguments_come_from_the_query_a_form_or_json():
    assert parse_body(b"", "", {"q": "a", "source": "en"}) == {"q": "a", "source": "en"}
    form = parse_body(
        b"q=Hello%20there&source=en&q=second", "application/x-www-form-urlencoded", {"target": "zh"}
    )
    assert form == {"q": "Hello there", "source": "en", "target": "zh"}  # first q wins
    body = b'{"q": ["a", "b"], "alternatives": 2}'
    assert parse_body(body, "application/json; charset=utf-8", {"source": "en"}) == {
        "q": ["a", "b"],
        "alternatives": 2,
        "source": "en",
    }


def test_form_line_endings_become_newlines_and_bad_utf8_is_replaced_not_refused():
    args = parse_body(b"q=one%0D%0Atwo%FFthree", "application/x-www-form-urlencoded", {})
    assert args["q"] == "one\ntwo\ufffdthree"


@pytest.mark.parametrize("body", [b'{"q": ', b"[1, 2]", b'"text"', b"\xff\xfe{}"])
def test_a_json_body_that_is_not_an_object_is_a_400(body):
    with pytest.raises(ApiError) as caught:
        parse_body(body, "application/json", {})
    assert caught.value.status == 400 and "\n" not in caught.value.message


def good(**changes):
    return {"q": "Hello.", "source": "en", "target": "zh", **changes}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"source": "en", "target": "zh"}, "missing q parameter"),
        (good(source=None), "missing source parameter"),
        (good(target=""), "missing target parameter"),
        (good(q=5), "q must be a string or an array of strings"),
        (good(q=["a", 3]), "q must be a string or an array of strings"),
        (good(target="fr"), "fr is not supported"),
        (good(source="de"), "de is not supported"),
        (good(format="xml"), "format xml is not supported"),
        (good(alternatives="two"), "alternatives must be an integer"),
        (good(alternatives=True), "alternatives must be an integer"),
        (good(alternatives=99), r"alternatives must be in \[0, 10\]"),
        (good(q="x" * 11), r"request \(11 characters\) exceeds text limit \(10\)"),
        (good(q=["a"] * 4), r"request \(4 texts\) exceeds batch limit \(3\)"),
    ],
)
def test_bad_translate_arguments_are_400s_naming_the_problem(args, message):
    with pytest.raises(ApiError, match=message) as caught:
        translate_args(args, Limits(char_limit=10, batch_limit=3))
    assert caught.value.status == 400


def test_good_translate_arguments():
    checked = translate_args(
        good(q=["a", ""], source="auto", target="zh-Hans", alternatives="2"), Limits()
    )
    assert (checked.texts, checked.batch, checked.detect, checked.alternatives) == (
        ["a", ""],
        True,
        True,
        2,
    )
    assert translate_args(good(q="", target="zh-CN"), Limits()).texts == [""]
    assert translate_args(good(alternatives=None), Limits()).alternatives == 0  # JSON null


def test_detection_is_each_scripts_share_of_the_letters_most_confident_first():
    assert detect_languages("Hello there") == [{"confidence": 100.0, "language": "en"}]
    assert detect_languages("你好，世界！") == [{"confidence": 100.0, "language": "zh"}]
    assert detect_languages("你好 world") == [
        {"confidence": 71.4, "language": "en"},
        {"confidence": 28.6, "language": "zh"},
    ]
    assert detected_language("你好 world") == {"confidence": 71.4, "language": "en"}
    assert detect_languages("ＡＢ中文") == [
        {"confidence": 50.0, "language": "en"},
        {"confidence": 50.0, "language": "zh"},
    ]
    # other scripts count as letters that are neither: Japanese kana lower zh's share
    assert detect_languages("日本語です") == [{"confidence": 60.0, "language": "zh"}]
    nothing = [{"confidence": 0.0, "language": "en"}]  # what LibreTranslate answers
    assert detect_languages("") == detect_languages("3.14 !?") == nothing
    assert detect_languages("Привет") == nothing


def test_stop_strings_cut_the_text_and_streaming_never_shows_what_the_cut_removes():
    assert cut_at_stop("one. two. three", [". t", "x"]) == ("one", True)
    assert cut_at_stop("abc", ["x"]) == ("abc", False)
    pieces, stops = ["he", "llo wo", "rld", " again"], ["o wor", "zz"]
    scanner = StopScanner(stops)
    shown = "".join(scanner.feed(piece) for piece in pieces) + scanner.flush()
    assert shown == cut_at_stop("".join(pieces), stops)[0] == "hell"
    assert scanner.stopped
    plain = StopScanner(["zz"])
    assert "".join(plain.feed(p) for p in ["a", "z", "b"]) + plain.flush() == "azb"
