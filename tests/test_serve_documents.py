"""Text, HTML and files over real loopback HTTP: multi-sentence text split and joined, newlines
kept, LibreTranslate's format "html", its /translate_file + /download_file with a real
multipart client, what could not be translated whole said in the answer, and bad files
answered with 400 while the server stays up."""

from __future__ import annotations

import codecs

import httpx
import pytest

from seq2seq.inference.options import TranslateOptions
from tests.serving import SENTENCES
from tests.serving import libre_translate as libre

pytest.importorskip("fastapi")
pytestmark = [pytest.mark.slow, pytest.mark.serial]


def test_a_paragraph_is_translated_sentence_by_sentence(http, translator):
    paragraph = " ".join(SENTENCES)
    answer = libre(http, q=paragraph).json()
    assert answer["translatedText"] == "".join(translator.translate(SENTENCES))
    assert "warnings" not in answer


def test_format_html_keeps_the_markup(http, translator):
    page = f"<p>{SENTENCES[0]} <b>{SENTENCES[1]}</b></p><pre>{SENTENCES[2]}</pre>"
    answer = libre(http, q=page, format="html").json()
    assert set(answer) == {"translatedText", "confidence"}
    assert (
        answer["translatedText"] == translator.translate([page], TranslateOptions(format="html"))[0]
    )
    assert answer["translatedText"].endswith(f"</b></p><pre>{SENTENCES[2]}</pre>")
    form = {"q": page, "source": "en", "target": "zh", "format": "html"}
    assert http.post("/translate", data=form).json() == answer  # as LibreTranslate's page sends
    bad = libre(http, q="<p>Hi <b", format="html")
    assert bad.status_code == 400 and "unterminated '<b'" in bad.json()["error"]
    alternatives = libre(http, q=page, format="html", alternatives=2).json()
    assert alternatives["translatedText"] == answer["translatedText"]
    assert all(alt.count("<b>") == 1 for alt in alternatives["alternatives"])
    attention = http.post(
        "/v1/translate", json={"text": page, "format": "html", "return_attention": True}
    )
    assert attention.status_code == 400 and "return_attention" in attention.json()["error"]


def test_v1_translate_keeps_newlines_and_takes_format_and_split(http, translator):
    text = f"{SENTENCES[0]} {SENTENCES[1]}\n\n{SENTENCES[2]}"
    [item] = http.post("/v1/translate", json={"text": text}).json()["translations"]
    one = translator.translate(SENTENCES)
    assert item["text"] == f"{one[0]}{one[1]}\n\n{one[2]}"
    [whole] = http.post("/v1/translate", json={"text": text, "split": False}).json()["translations"]
    assert whole["text"] == "\n\n".join(
        translator.translate(
            [f"{SENTENCES[0]} {SENTENCES[1]}", SENTENCES[2]], TranslateOptions(split=False)
        )
    )
    md = http.post("/v1/translate", json={"text": f"# {SENTENCES[2]}", "format": "markdown"})
    assert md.json()["translations"][0]["text"] == f"# {one[2]}"


def test_what_is_not_translated_whole_is_said(http):
    long_line = "apples " * 400  # one 'sentence' beyond the model's positions, no commas
    answer = libre(http, q=["Hello.", long_line]).json()
    assert len(answer["translatedText"][1]) > 0
    [warning] = answer["warnings"]
    assert warning.startswith("q[1]: a sentence longer than the model's ")
    assert warning.endswith("was translated in windows, not as a whole")
    [item] = http.post("/v1/translate", json={"text": long_line}).json()["translations"]
    assert item["windowed"] is True


FILES = {
    "page.html": f"<html><body><h1>{SENTENCES[0]}</h1><p>{SENTENCES[1]} <i>{SENTENCES[2]}</i>"
    "</p></body></html>\n",
    "notes.md": f"# {SENTENCES[0]}\n\n- {SENTENCES[1]}\n\n```\ncode\n```\n",
    "subs.srt": f"1\n00:00:01,000 --> 00:00:02,000\n{SENTENCES[0]}\n{SENTENCES[1]}\n\n"
    f"2\n00:00:03,000 --> 00:00:04,500\n{SENTENCES[2]}\n",
    "plain.txt": f"{SENTENCES[0]} {SENTENCES[1]}\n\n{SENTENCES[2]}\n",
    "app.pot": f'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
    f'#: app.py:1\nmsgid "{SENTENCES[0]}"\nmsgstr ""\n',
    "app.xlf": '<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="1.2" '
    'xmlns="urn:oasis:names:tc:xliff:document:1.2"><file source-language="en" '
    'datatype="plaintext" original="app"><body><trans-unit id="1"><source>'
    f"{SENTENCES[1]}</source></trans-unit></body></file></xliff>\n",
}
FORMAT = {
    "html": "html",
    "md": "markdown",
    "srt": "srt",
    "txt": "text",
    "pot": "po",
    "xlf": "xliff",
}


@pytest.mark.parametrize("name", list(FILES))
def test_translate_file_round_trip(http, translator, name):
    body = FILES[name]
    upload = {"file": (name, body.encode(), "application/octet-stream")}
    answer = http.post("/translate_file", data={"source": "en", "target": "zh"}, files=upload)
    assert answer.status_code == 200, answer.text
    url = answer.json()["translatedFileUrl"]
    assert url.startswith(str(http.base_url).rstrip("/") + "/download_file/") and url.endswith(name)
    download = httpx.get(url, timeout=60)
    assert download.status_code == 200
    assert f"filename*=UTF-8''{name}" in download.headers["content-disposition"]
    expected = translator.translate(
        [body], TranslateOptions(format=FORMAT[name.rsplit(".", 1)[1]])
    )[0]
    assert download.content.decode("utf-8") == expected
    if name == "subs.srt":
        assert download.text.startswith("1\n00:00:01,000 --> 00:00:02,000\n")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.srt", b"1\n00:00:01 -> 2\nHello.\n", "malformed SRT timing"),
        ("bad.html", b"<p>Hello <i", "unterminated '<i'"),
        ("image.txt", b"\x89PNG\r\n\x1a\n\x00\x00", "not a text file"),
        ("font.html", b"\x00\x01\x00\x00\x00\x0cOS/2" * 8, "not a text file"),
        ("marked.srt", b"\xef\xbb\xbf1\n\xff\n", "marked.srt:2: not valid utf-8"),
        ("sheet.xls", b"Hello.", "file format not supported"),
        ("big.txt", b"Hello. " * 40000, "exceeds file limit (200000)"),
    ],
)
def test_bad_files_are_400s_and_the_server_stays_up(http, name, content, message):
    answer = http.post(
        "/translate_file", data={"source": "en", "target": "zh"}, files={"file": (name, content)}
    )
    assert answer.status_code == 400 and message in answer.json()["error"]
    assert http.get("/health").json() == {"status": "ok"}


def download(http, name: str, content: bytes) -> bytes:
    upload = {"file": (name, content, "application/octet-stream")}
    answer = http.post("/translate_file", data={"source": "en", "target": "zh"}, files=upload)
    assert answer.status_code == 200, answer.text
    fetched = httpx.get(answer.json()["translatedFileUrl"], timeout=60)
    assert fetched.headers["content-type"].endswith("charset=utf-8")
    return fetched.content


def test_files_in_any_encoding_come_back_in_utf8(http, translator):
    """A Latin-1 page declared so, a UTF-16 subtitle file with its mark, and an undeclared
    windows-1252 note: read exactly, answered in UTF-8 (the declaration says so, a mark kept)."""
    page = (
        "<html><head><meta charset=ISO-8859-1></head>"
        f"<body><p>{SENTENCES[0]}</p><pre>na\xefve code</pre></body></html>\n"
    )
    expected = translator.translate([page], TranslateOptions(format="html"))[0].replace(
        "ISO-8859-1", "UTF-8"
    )
    assert download(http, "page.html", page.encode("latin-1")) == expected.encode("utf-8")
    assert "<pre>na\xefve code</pre>" in expected
    subs = FILES["subs.srt"]
    marked = codecs.BOM_UTF16_LE + subs.encode("utf-16-le")
    expected = translator.translate([subs], TranslateOptions(format="srt"))[0]
    assert download(http, "subs.srt", marked) == codecs.BOM_UTF8 + expected.encode("utf-8")
    note = f"{SENTENCES[2]} The caf\xe9 is na\xefve.\n"
    expected = translator.translate([note], TranslateOptions(format="text"))[0]
    assert download(http, "note.txt", note.encode("cp1252")) == expected.encode("utf-8")


def test_file_route_arguments_and_settings(http):
    missing = http.post("/translate_file", data={"source": "en", "target": "zh"})
    assert missing.status_code == 400
    wrong = http.post(
        "/translate_file",
        data={"source": "en", "target": "fr"},
        files={"file": ("a.txt", b"Hello.")},
    )
    assert wrong.status_code == 400 and "fr is not supported" in wrong.json()["error"]
    assert http.get("/download_file/nope.txt").status_code == 404
    settings = http.get("/frontend/settings").json()
    assert settings["filesTranslation"] is True
    assert set(settings["supportedFilesFormat"]) >= {".txt", ".html", ".md", ".srt"}
