"""gettext catalogs: every untranslated msgstr filled, nothing else changed, placeholders kept,
``msgfmt -c`` content (on real catalogs from polib's tests, tests/data/office/README)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from seq2seq.errors import DataError
from seq2seq.formats import format_of, parse, segments
from seq2seq.formats.po import unescape
from tests.fake_translation import identity, translate, upper

OFFICE = Path(__file__).parent / "data" / "office"
CATALOGS = sorted(OFFICE.glob("*.po")) + sorted(OFFICE.glob("*.pot"))

TEMPLATE = r"""# A template.
#, fuzzy
msgid ""
msgstr ""
"Project-Id-Version: demo 1.0\n"
"Language: \n"
"Content-Type: text/plain; charset=CHARSET\n"
"Plural-Forms: nplurals=INTEGER; plural=EXPRESSION;\n"

#. Translators: a greeting
#: app.py:10
#, python-format
msgid "Hello %(name)s, you have new mail."
msgstr ""

#: app.py:12
msgctxt "menu"
msgid "Open"
msgstr ""

#, c-format
msgid "%d file was deleted"
msgid_plural "%d files were deleted"
msgstr[0] ""
msgstr[1] ""

msgid ""
"A long message that is "
"wrapped over lines.\n"
msgstr ""

msgid "Already"
msgstr "已经"

#~ msgid "Old"
#~ msgstr "旧"
"""


def read(path: Path) -> str:
    """A catalog's text in the charset its header names."""
    data = path.read_bytes()
    charset = re.search(rb"charset=([\w-]+)", data)
    name = charset.group(1).decode() if charset else "utf-8"
    return data.decode("utf-8" if name.upper() == "CHARSET" else name).removeprefix("\ufeff")


def msgfmt_errors(text: str, tmp_path: Path) -> str:
    """What ``msgfmt -c`` says of ``text`` (fuzzy entries checked too), warnings left out."""
    path = tmp_path / "out.po"
    path.write_text(text, encoding="utf-8")
    run = subprocess.run(
        ["msgfmt", "-c", "--use-fuzzy", "-o", str(tmp_path / "out.mo"), str(path)],
        capture_output=True,
        text=True,
    )
    lines = [line for line in run.stderr.splitlines() if "warning:" not in line]
    return "\n".join(lines) if run.returncode else ""


def test_format_from_the_extension():
    assert format_of("a/messages.po") == format_of("x.POT") == "po"


def test_template_filled_and_everything_else_kept():
    out = translate([parse(TEMPLATE, "po")])[0]
    assert 'msgstr "HELLO %(name)s, YOU HAVE NEW MAIL."' in out  # the placeholder as written
    assert "#, fuzzy, python-format\nmsgid" in out
    assert '#: app.py:12\n#, fuzzy\nmsgctxt "menu"\nmsgid "Open"\nmsgstr "OPEN"' in out
    # Chinese has one plural form: msgstr[0] from the plural, msgstr[1] gone.
    assert 'msgstr[0] "%d FILES WERE DELETED"\n\n' in out and "msgstr[1]" not in out
    assert 'msgstr "A LONG MESSAGE THAT IS WRAPPED OVER LINES.\\n"' in out
    assert 'msgid "Already"\nmsgstr "ALREADY"' in out  # no language: not Chinese, replaced
    assert '#~ msgid "Old"\n#~ msgstr "旧"' in out
    assert '"Language: zh_CN\\n"' in out and '"Plural-Forms: nplurals=1; plural=0;\\n"' in out
    assert "charset=UTF-8" in out
    # Every line of the template is still there but the empty msgstrs and the header's.
    removed = set(TEMPLATE.splitlines()) - set(out.splitlines())
    kept = ("msgstr", "#, ", '"Language', '"Content', '"Plural')
    assert all(line.startswith(kept) for line in removed), removed


def test_not_fuzzy_when_asked():
    from seq2seq.formats.po import parse_po

    out = translate([parse_po(TEMPLATE, fuzzy=False)])[0]
    assert "fuzzy, python-format" not in out and "#, python-format" in out


def test_more_plural_forms_take_singular_then_plural():
    from seq2seq.formats.po import parse_po

    out = translate([parse_po(TEMPLATE, plural_forms="nplurals=2; plural=(n != 1);")])[0]
    assert 'msgstr[0] "%d FILE WAS DELETED"\nmsgstr[1] "%d FILES WERE DELETED"' in out


def test_symfony_choices_are_translated_one_by_one_their_pipes_and_intervals_kept():
    """Symfony's plural messages: each choice between pipes a sentence of its own, the
    intervals (``{0}``, ``]1,Inf[``) and ``%count%`` as written."""
    catalog = (
        'msgid ""\nmsgstr ""\n"Language: en\\n"\n\n'
        'msgid "{0} no foos|one foo|%count% foos"\nmsgstr ""\n\n'
        'msgid "[0,1] One apple.| ]1,Inf[ There are %count% apples."\nmsgstr ""\n'
    )
    document = parse(catalog, "po")
    choices = "no foos|one foo|%count% foos|One apple.|There are %count% apples."
    assert [s.text for s in segments(document)] == choices.split("|")
    out = translate([document])[0]
    assert 'msgstr "{0} NO FOOS|ONE FOO|%count% FOOS"' in out
    assert 'msgstr "[0,1] ONE APPLE.| ]1,Inf[ THERE ARE %count% APPLES."' in out


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="gettext's msgfmt not installed")
def test_msgfmt_passes_on_the_template(tmp_path):
    assert msgfmt_errors(translate([parse(TEMPLATE, "po")])[0], tmp_path) == ""


@pytest.mark.parametrize("path", CATALOGS, ids=lambda p: p.name)
def test_real_catalog_round_trip_and_translation(path, tmp_path):
    text = read(path)
    document = parse(text, "po", str(path))
    # Identity: nothing but msgstrs, the header's three fields and fuzzy flags changed.
    same = translate([document], identity)[0]
    changed = set(same.splitlines()) - set(text.splitlines())
    assert all(
        line.startswith(("msgstr", "#, fuzzy", '"Language', '"Content-Type', '"Plural'))
        or line.startswith('"')
        and "Plural-Forms" in same  # a header field line rewritten
        for line in changed
    ), changed
    out = translate([document], upper)[0]
    msgids = re.findall(r'^msgid "', text, re.M)
    assert len(re.findall(r'^msgid "', out, re.M)) == len(msgids)  # entries unchanged
    assert len(re.findall(r"^#~ msgid", out, re.M)) == len(re.findall(r"^#~ msgid", text, re.M))
    # Every msgstr filled (the header's too).
    assert not re.search(r'^msgstr(\[\d+\])? ""\n(?!")', out, re.M)
    if shutil.which("msgfmt"):
        assert msgfmt_errors(out, tmp_path) == ""


def test_a_chinese_catalog_keeps_its_translations_and_plural_rule():
    chinese = TEMPLATE.replace('"Language: \\n"', '"Language: zh_TW\\n"').replace(
        "nplurals=INTEGER; plural=EXPRESSION;", "nplurals=2; plural=0;"
    )
    out = translate([parse(chinese, "po")])[0]
    assert 'msgid "Already"\nmsgstr "已经"' in out and "Language: zh_CN" in out
    assert 'msgstr[0] "%d FILE WAS DELETED"\nmsgstr[1] "%d FILES WERE DELETED"' in out


def test_a_catalog_in_another_language_is_translated_whole():
    french = 'msgid ""\nmsgstr ""\n"Language: fr\\n"\n\nmsgid "Yes"\nmsgstr "Oui"\n'
    out = translate([parse(french, "po")])[0]
    assert 'msgstr "YES"' in out and "Oui" not in out and "Language: zh_CN" in out


def test_not_po_is_one_line_error():
    with pytest.raises(DataError, match=r"^x.po:2: not a PO line: 'garbage here'$"):
        parse('msgid "a"\ngarbage here\n', "po", "x.po")


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x0c", "\x0b", "\x85", "\x1e"])
def test_lines_end_at_newlines_only(separator, tmp_path):
    # str.splitlines cut a msgid at these, and its halves read as "not a PO line".
    text = (
        f'msgid ""\nmsgstr ""\n"Language: fr\\n"\n\nmsgid "one{separator}two"\nmsgstr ""\n\n'
        f'msgid "three{separator}"\nmsgstr ""\n'
    )
    found = segments(parse(text, "po", "x.po"))
    # (white space at a msgid's edges is kept around its segment, not translated)
    assert [(s.text, s.line) for s in found] == [(f"one{separator}two", 5), ("three", 8)]
    out = translate([parse(text, "po")], identity)[0]
    written = "" if separator == "\x1e" else separator  # no PO escape: a model's is dropped
    msgstrs = [unescape(m) for m in re.findall(r'^msgstr "(.*)"$', out, re.M)[1:]]
    assert msgstrs == [f"one{written}two", f"three{written}"]
    if shutil.which("msgfmt"):
        assert msgfmt_errors(out, tmp_path) == ""
    # An error's line number still counts newlines.
    with pytest.raises(DataError, match=r"^x.po:12: not a PO line: 'garbage'$"):
        parse(text + f'\nmsgid "a{separator}b"\ngarbage\n', "po", "x.po")


def test_segments_are_msgids_with_lines():
    found = segments(parse(TEMPLATE, "po"))
    assert [s.text for s in found][:2] == ["Hello %(name)s, you have new mail.", "Open"]
    assert found[0].line == 10


def test_a_catalog_is_written_in_utf8_whatever_it_was_read_in():
    from seq2seq.formats.encoding import check_output_encoding, decode_document

    latin = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=ISO-8859-1\\n"\n\n'
    decoded = decode_document((latin + 'msgid "Caf\xe9"\nmsgstr ""\n').encode("latin1"), "po", "x")
    with pytest.raises(ValueError, match="written in UTF-8"):
        check_output_encoding(decoded, "po", "input")
    check_output_encoding(decoded, "po", "utf-8")  # the default: fine
