"""SRT cues read by lines that end at a newline only: U+2028, U+2029, form feeds and the other
characters ``str.splitlines`` also cuts at stay inside a cue's text (issue 57's list of losses:
text was cut there, and a cue's later words read as a malformed timing)."""

import pytest

from seq2seq.errors import DataError
from seq2seq.formats import parse, rebuild, segments

SEPARATORS = ["\u2028", "\u2029", "\x0c", "\x0b", "\x85", "\x1c"]


@pytest.mark.parametrize("separator", SEPARATORS)
@pytest.mark.parametrize("where", ["inside a line", "ending a line"])
def test_a_line_separator_inside_a_cue_does_not_cut_it(separator, where):
    # at a line's end, splitlines left an empty line after it: the cue ended there, and its
    # next line was read as a cue without a timing
    separator += "\n" if where == "ending a line" else ""
    two_cues = "1\n00:00:01,000 --> 00:00:02,000\n{}\n\n2\n00:00:03,000 --> 00:00:04,000\n{}\n"
    document = parse(two_cues.format(f"Where is{separator}the station?", "Thank you."), "srt")
    texts = [s.text for s in segments(document)]
    assert texts == ["Where is the station?", "Thank you."]  # each cue one text, whole
    assert rebuild(document, ["车站在哪里？", "谢谢。"]) == two_cues.format(
        "车站在哪里？", "谢谢。"
    )


def test_a_separator_in_a_dialogue_line_does_not_make_another_speaker():
    srt = "1\r\n00:00:01,000 --> 00:00:02,000\r\n- Hi,\u2028- you said.\r\n- Hello.\r\n"
    document = parse(srt, "srt")
    assert [s.text for s in segments(document)] == ["Hi, - you said.", "Hello."]
    out = rebuild(document, ["嗨，你说。", "你好。"])
    assert out == "1\r\n00:00:01,000 --> 00:00:02,000\r\n- 嗨，你说。\r\n- 你好。\r\n"


def test_an_error_names_the_line_counted_by_newlines():
    srt = "1\n00:00:01,000 --> 00:00:02,000\nOne\u2028two\x0cthree\n\n2\n00:00:04 -> x\n"
    with pytest.raises(DataError, match=r"^subs.srt:6: malformed SRT timing '00:00:04 -> x'"):
        parse(srt, "srt", "subs.srt")
