"""Documents' bytes in and out (formats/encoding.py): the encoding found in the documented order
(byte-order mark, asked for, declaration, UTF-8, detection), text read exactly, declarations
rewritten label by label, binary refused in one line, and the input's encoding on request."""

from __future__ import annotations

import codecs
import re
from pathlib import Path

import pytest

from seq2seq.errors import DataError
from seq2seq.formats import parse, segments
from seq2seq.formats.encoding import (
    check_output_encoding,
    codec_name,
    declare_utf8,
    decode_document,
    encode_document,
)
from seq2seq.textio import count_lines, stream_lines

PAGE = "<p>Hello 中文.</p>\n<pre>naïve</pre>\n"
SRT = "1\n00:00:01,000 --> 00:00:02,000\nHello there.\n\n2\n00:00:03,000 --> 00:00:04,500\nBye.\n"
TRANSLATED = "<p>你好中文。</p>\n<pre>naïve</pre>\n"


@pytest.mark.parametrize(
    ("bom", "codec"),
    [
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
    ],
)
def test_a_byte_order_mark_names_the_encoding_and_is_written_back(bom, codec):
    data = bom + PAGE.encode(codec)
    decoded = decode_document(data, "html", "page.html")
    assert (decoded.text, decoded.encoding, decoded.bom) == (PAGE, codec, True)
    assert decoded.found_by == "byte-order mark" and decoded.warnings == ()
    utf8 = encode_document(TRANSLATED, "html", decoded)
    assert utf8 == codecs.BOM_UTF8 + TRANSLATED.encode("utf-8")
    assert encode_document(PAGE, "html", decoded, "input") == data  # byte for byte


def test_utf16_html_and_srt_keep_their_markup_and_timings():
    html = decode_document(codecs.BOM_UTF16_LE + PAGE.encode("utf-16-le"), "html", "p.html")
    assert [s.text for s in segments(parse(html.text, "html"))] == ["Hello 中文."]
    srt = decode_document(codecs.BOM_UTF16_BE + SRT.encode("utf-16-be"), "srt", "s.srt")
    document = parse(srt.text, "srt", "s.srt")  # today: malformed SRT timing '\ufffd\ufffd1\x00'
    assert [s.text for s in segments(document)] == ["Hello there.", "Bye."]
    assert encode_document(SRT, "srt", srt) == codecs.BOM_UTF8 + SRT.encode("utf-8")


LATIN_PAGES = {  # (declaration as read, as written in UTF-8)
    "meta charset, unquoted": ("<meta charset=ISO-8859-1>", "<meta charset=UTF-8>"),
    "meta charset, quoted": ('<meta charset="latin1" />', '<meta charset="utf-8" />'),
    "http-equiv": (
        '<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">',
        '<meta http-equiv="Content-Type" content="text/html; charset=utf-8">',
    ),
    "http-equiv, other order": (
        "<META CONTENT='text/html;charset=windows-1252' HTTP-EQUIV='content-type'>",
        "<META CONTENT='text/html;charset=utf-8' HTTP-EQUIV='content-type'>",
    ),
}


@pytest.mark.parametrize("case", list(LATIN_PAGES))
def test_a_meta_declaration_is_read_and_only_its_label_rewritten(case):
    declared, rewritten = LATIN_PAGES[case]
    page = f"<html><head>{declared}<title>Caf\xe9</title></head>\n<pre>na\xefve code</pre></html>"
    decoded = decode_document(page.encode("cp1252"), "html", "page.html")
    assert (decoded.encoding, decoded.found_by) == ("cp1252", "declaration")
    assert decoded.text == page  # today: na\ufffdve
    assert encode_document(decoded.text, "html", decoded) == page.replace(
        declared, rewritten
    ).encode("utf-8")
    assert encode_document(decoded.text, "html", decoded, "input") == page.encode("cp1252")


def test_the_xml_declaration_is_read_and_rewritten_with_the_meta():
    page = (
        '<?xml version="1.0" encoding="ISO-8859-1"?>\n<html><head>'
        '<meta http-equiv="content-type" content="text/html; charset=iso-8859-1"/></head>'
        "<p>Caf\xe9.</p></html>"
    )
    decoded = decode_document(page.encode("latin-1"), "html", "page.xhtml")
    assert (decoded.text, decoded.encoding) == (page, "cp1252")
    assert encode_document(page, "html", decoded).decode("utf-8") == (
        '<?xml version="1.0" encoding="UTF-8"?>\n<html><head>'
        '<meta http-equiv="content-type" content="text/html; charset=utf-8"/></head>'
        "<p>Caf\xe9.</p></html>"
    )


def test_the_prescan_skips_comments_and_stops_after_1024_bytes():
    commented = '<!-- <meta charset="koi8-r"> --><meta charset="windows-1251"><p>\xef\xf0</p>'
    assert decode_document(commented.encode("latin-1"), "html", "a.html").text.endswith("<p>пр</p>")
    late = "<!--" + "x" * 1100 + '--><meta charset="windows-1251"><p>caf\xe9</p>'
    decoded = decode_document(late.encode("cp1252"), "html", "b.html")
    assert decoded.found_by == "detection" and decoded.text == late
    assert decode_document(b'<meta charset="foo"><p>x</p>', "html", "c.html").warnings == (
        "c.html: declares an unknown encoding 'foo'",
    )


def test_declarations_belong_to_html_only():
    text = "# <meta charset=koi8-r> Caf\xe9\n"
    decoded = decode_document(text.encode("cp1252"), "markdown", "a.md")
    assert decoded.found_by == "detection" and decoded.text == text
    assert encode_document(text, "markdown", decoded) == text.encode("utf-8")  # untouched


def test_declare_utf8_touches_only_labels_in_the_head():
    page = '<head><meta charset="utf-8"><meta charset=GB2312></head><p>charset=gbk</p>'
    assert declare_utf8(page) == page.replace("GB2312", "UTF-8")


def test_undeclared_bytes_are_utf8_else_detected():
    assert decode_document("Hello 中文\n".encode(), "srt", "a.srt").found_by == "utf-8"
    chinese = SRT.replace("Hello there.", "我今天会买苹果。她明天能看到那本书。你好，世界。")
    decoded = decode_document(chinese.encode("gb18030"), "srt", "zh.srt")
    assert (decoded.text, decoded.encoding, decoded.found_by) == (chinese, "gb18030", "detection")
    western = "# Caf\xe9 notes\n\nWe eat cr\xe8me br\xfbl\xe9e at the caf\xe9. It is na\xefve.\n"
    decoded = decode_document(western.encode("cp1252"), "markdown", "w.md")
    assert (decoded.text, decoded.encoding) == (western, "cp1252")


@pytest.mark.parametrize(
    ("name", "data", "problem"),
    [
        ("font.html", b"\x00\x01\x00\x00\x00\x0cOS/2\x00\x00glyf" * 8, "it holds NUL bytes"),
        ("noise.srt", bytes(range(1, 256)) * 8, "no text encoding fits its bytes"),
    ],
)
def test_a_binary_file_is_refused_in_one_line(name, data, problem):
    with pytest.raises(DataError) as error:
        decode_document(data, "html" if name.endswith("html") else "srt", name)
    message = str(error.value)
    assert message.startswith(f"{name}: not a text file (") and problem in message
    assert "\n" not in message


def test_utf16_without_a_mark_needs_the_encoding_named():
    data = PAGE.encode("utf-16-le")
    with pytest.raises(DataError, match="NUL bytes"):
        decode_document(data, "html", "p.html")
    decoded = decode_document(data, "html", "p.html", encoding="UTF-16")  # WHATWG: LE
    assert (decoded.text, decoded.encoding, decoded.bom) == (PAGE, "utf-16-le", False)


def test_bytes_invalid_in_a_named_encoding_are_an_error_naming_the_line():
    with pytest.raises(DataError) as error:
        decode_document(codecs.BOM_UTF8 + b"ok\nbad \xff here\n", "srt", "bad.srt")
    assert str(error.value) == (
        "bad.srt:2: not valid utf-8, as its byte-order mark says (byte 0xff)"
    )
    with pytest.raises(DataError, match=r"^x\.md:3: not valid utf-8, the encoding asked for"):
        decode_document(b"a\nb\n\xe9\n", "markdown", "x.md", encoding="utf8")


def test_the_order_mark_over_asked_over_declared():
    page = '<meta charset="windows-1251"><p>\xe9</p>'
    asked = decode_document(page.encode("latin-1"), "html", "a.html", encoding="latin1")
    assert (asked.text, asked.encoding, asked.found_by) == (page, "cp1252", "asked for")
    marked = decode_document(codecs.BOM_UTF8 + page.encode(), "html", "a.html", "gbk")
    assert (marked.text, marked.encoding) == (page, "utf-8")
    assert marked.warnings == (
        "a.html: its utf-8 byte-order mark overrides the encoding asked for (gbk)",
    )


def test_a_wrong_declaration_falls_back_with_a_warning():
    page = '<meta charset="utf-8">\n<p>The caf\xe9 serves \u201cna\xefve\u201d food.</p>'
    decoded = decode_document(page.encode("cp1252"), "html", "w.html")
    assert (decoded.text, decoded.encoding, decoded.found_by) == (page, "cp1252", "detection")
    assert decoded.warnings == (
        "w.html:2: not valid utf-8 as declared (byte 0xe9); read as windows-1252 (detection)",
    )
    stale = '<meta charset="iso-8859-1"><p>caf\xe9</p>'  # a saved page: its server said UTF-8
    decoded = decode_document(stale.encode("utf-8"), "html", "s.html")
    assert (decoded.text, decoded.encoding) == (stale, "utf-8")
    assert decoded.warnings[0].startswith("s.html: declares iso-8859-1 but its bytes are UTF-8")


def test_windows_1252_reads_its_unassigned_bytes_as_browsers_do():
    decoded = decode_document(b"<meta charset=latin1><p>\x81\x8d\x80</p>", "html", "a.html")
    assert decoded.text == "<meta charset=latin1><p>\x81\x8d\u20ac</p>"


def test_the_input_encoding_on_request():
    page = "<meta charset=iso-8859-1><pre>na\xefve</pre>"
    decoded = decode_document(page.encode("latin-1"), "html", "a.html")
    translated = page + "<p>中文</p>"
    assert encode_document(translated, "html", decoded, "input") == (
        b"<meta charset=iso-8859-1><pre>na\xefve</pre><p>&#20013;&#25991;</p>"
    )
    srt = decode_document(SRT.replace("Bye.", "Caf\xe9.").encode("cp1252"), "srt", "a.srt")
    assert srt.encoding == "cp1252"
    with pytest.raises(ValueError, match="windows-1252 .* cannot hold simplified Chinese"):
        check_output_encoding(srt, "srt", "input")
    check_output_encoding(srt, "srt", "utf-8")
    check_output_encoding(decoded, "html", "input")  # references hold anything
    with pytest.raises(DataError) as error:
        encode_document(SRT.replace("Bye.", "中."), "srt", srt, "input", "out.srt")
    assert str(error.value).startswith("out.srt:7: windows-1252 (the input's encoding) cannot")


def test_labels_are_read_as_browsers_read_them():
    expected = {
        "ISO-8859-1": "cp1252",
        " latin1 ": "cp1252",
        "us-ascii": "cp1252",
        "GB2312": "gb18030",
        "x-gbk": "gb18030",
        "big5": "big5hkscs",
        "Shift_JIS": "cp932",
        "euc-kr": "cp949",
        "utf-16": "utf-16-le",
        "UTF8": "utf-8",
        "koi8-r": "koi8-r",
    }
    assert {label: codec_name(label) for label in expected} == expected
    for label in ("nonsense", "rot13", ""):
        with pytest.raises(ValueError, match="unknown encoding"):
            codec_name(label)


def test_text_lines_follow_a_byte_order_mark(tmp_path):
    """Plain text shares the marks: ``textio.stream_lines`` reads UTF-16/32 lines."""
    lines = ["Hello 中文.", "", "上下 \u2028 kept", "last"]
    path = tmp_path / "in.txt"
    for codec, bom in (("utf-16-le", codecs.BOM_UTF16_LE), ("utf-32-be", codecs.BOM_UTF32_BE)):
        path.write_bytes(bom + "\r\n".join(lines).encode(codec))
        assert list(stream_lines(path)) == lines and count_lines(path) == len(lines)
    path.write_bytes("\n".join(lines).encode("utf-16-be") + "\n".encode("utf-16-be"))
    assert list(stream_lines(path, "utf-16-be")) == lines
    assert count_lines(path, "utf-16-be") == len(lines)


def test_the_documented_example_runs():
    """docs/documents.md's Python example, as written."""
    text = (Path(__file__).parents[1] / "docs" / "documents.md").read_text(encoding="utf-8")
    section = text.split("## Encodings", 1)[1].split("\n## ", 1)[0]
    [example] = re.findall(r"```python\n(.*?)```", section, re.S)
    exec(compile(example, "docs/documents.md", "exec"), {})
