"""XLIFF 1.2 and 2.0: targets filled with a state, inline codes placed, sources and everything
else unchanged (on real files from Symfony's tests, tests/data/office/README), entities never
expanded."""

from __future__ import annotations

import re
import xml.dom.minidom
from pathlib import Path

import pytest

from seq2seq.errors import DataError
from seq2seq.formats import format_of, parse, segments
from tests.fake_translation import identity, translate

OFFICE = Path(__file__).parent / "data" / "office"
FILES = sorted(OFFICE.glob("*.xlf")) + sorted(OFFICE.glob("*.xliff"))

V12 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file source-language="en" datatype="plaintext" original="app">
    <body>
      <trans-unit id="1">
        <source>Click <g id="1">Save</g> to keep <x id="2"/> your %s changes.</source>
        <note>A note</note>
      </trans-unit>
      <trans-unit id="2">
        <source>Open</source>
        <target/>
      </trans-unit>
      <trans-unit id="3" translate="no">
        <source>Brand</source>
      </trans-unit>
      <trans-unit id="5">
        <source>Press <ph id="1">&lt;b&gt;</ph>here<ph id="2">&lt;/b&gt;</ph> &amp; go.</source>
      </trans-unit>
      <trans-unit id="6">
        <source>Keep <mrk mtype="protected">Acme Cloud</mrk> running.</source>
      </trans-unit>
    </body>
  </file>
</xliff>
"""

V20 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en">
 <file id="f1">
  <unit id="u1">
   <segment>
    <source>Hello <pc id="1">bold</pc> world<ph id="2"/>.</source>
   </segment>
   <ignorable><source> </source></ignorable>
   <segment state="initial">
    <source>Second {0} sentence.</source>
    <target></target>
   </segment>
  </unit>
 </file>
</xliff>
"""


def sources(text: str) -> list[str]:
    """Each source element as written (one per unit: none of these has a <seg-source>)."""
    dom = xml.dom.minidom.parseString(text)
    return [node.toxml() for node in dom.getElementsByTagName("source")]


def targets(text: str) -> list[str]:
    dom = xml.dom.minidom.parseString(text)
    return [
        "".join(child.toxml() for child in node.childNodes)
        for node in dom.getElementsByTagName("target")
    ]


def test_format_from_the_extension():
    assert format_of("m.xlf") == format_of("m.XLIFF") == "xliff"


def test_xliff_12_targets_states_and_inline_codes():
    out = translate([parse(V12, "xliff")])[0]
    xml.dom.minidom.parseString(out)  # well formed
    assert sources(out) == sources(V12)
    state = 'state="needs-review-translation" state-qualifier="mt-suggestion"'
    assert (
        f'</source>\n        <target {state}>CLICK <g id="1">SAVE</g> TO KEEP '
        '<x id="2"/>YOUR %s CHANGES.</target>\n        <note>' in out
    )
    assert f"<target {state}>OPEN</target>" in out  # <target/> filled
    assert "<source>Brand</source>\n      </trans-unit>" in out  # translate="no"
    assert '<ph id="1">&lt;b&gt;</ph>HERE<ph id="2">&lt;/b&gt;</ph> &amp; GO.</target>' in out
    assert '<mrk mtype="protected">Acme Cloud</mrk> RUNNING.' in out
    assert 'target-language="zh-CN"' in out


def test_xliff_20_segments_translated():
    out = translate([parse(V20, "xliff")])[0]
    xml.dom.minidom.parseString(out)
    assert sources(out) == sources(V20)
    assert '<segment state="translated">' in out and 'state="initial"' not in out
    assert '<target>HELLO <pc id="1">BOLD</pc> WORLD<ph id="2"/>.</target>' in out
    assert "<target>SECOND {0} SENTENCE.</target>" in out  # placeholder as written
    assert 'trgLang="zh-CN"' in out and "<ignorable><source> </source></ignorable>" in out


def test_chinese_targets_are_kept():
    chinese = V20.replace('srcLang="en"', 'srcLang="en" trgLang="zh-CN"').replace(
        "<target></target>", "<target>第二句。</target>"
    )
    out = translate([parse(chinese, "xliff")])[0]
    assert "<target>第二句。</target>" in out and "SECOND" not in out


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_real_files(path):
    text = path.read_text(encoding="utf-8")
    document = parse(text, "xliff", str(path))
    out = translate([document])[0]
    xml.dom.minidom.parseString(out)
    assert sources(out) == sources(text)
    units = len(re.findall(r"<(?:trans-unit|segment)\b", text))
    assert len(re.findall(r"<(?:trans-unit|segment)\b", out)) == units
    assert len(re.findall(r"<target\b", out)) == units  # every unit has its target
    found = targets(out)
    assert len(found) == units and all(found), found  # every target filled
    # Each translated, or a dotted key kept as written (a verbatim identifier).
    assert all(t == t.upper() or re.fullmatch(r"\w+(\.\w+)+", t) for t in found), found
    same = translate([document], identity)[0]
    # Identity: every line but targets, states and the language as in the original.
    changed = set(same.splitlines()) - set(text.splitlines())
    assert all(re.search(r"<target|<segment|<file|<xliff", line) for line in changed), changed


@pytest.mark.parametrize(
    ("doctype", "body", "problem"),
    [
        ('[<!ENTITY a "aaaa"><!ENTITY b "&a;&a;">]', "", r"2: XML declares an entity \(refused"),
        ('SYSTEM "http://example.com/x.dtd"', "&ext;", r"\d+: XML (refers to an|uses an entity)"),
    ],
    ids=["expansion", "external"],
)
def test_entities_are_refused(doctype, body, problem):
    xml_text = (
        f'<?xml version="1.0"?>\n<!DOCTYPE x {doctype}>\n'
        f'<xliff version="1.2"><file><body>{body}</body></file></xliff>'
    )
    with pytest.raises(DataError, match=rf"^b\.xlf:{problem}"):
        parse(xml_text, "xliff", "b.xlf")


def test_bad_xml_and_not_xliff_are_one_line_errors():
    with pytest.raises(DataError, match=r"^x\.xlf:1: XML does not parse: "):
        parse("<xliff version='1.2'><file>", "xliff", "x.xlf")
    with pytest.raises(DataError, match=r"^x\.xlf: not XLIFF"):
        parse("<html/>", "xliff", "x.xlf")


def test_segment_text_reads_as_one_sentence():
    [first, *_] = segments(parse(V12, "xliff"))
    assert first.text == "Click Save to keep your %s changes."


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_a_line_ends_at_a_newline_only(separator):
    # The trap PO and SRT fell into (str.splitlines): a source holding U+2028 is one text,
    # kept whole in its target, and a unit's line counts newlines only.
    page = (
        '<?xml version="1.0"?>\n<xliff version="1.2"><file source-language="en" '
        'target-language="fr" datatype="plaintext" original="x">\n<body>\n'
        f'<trans-unit id="1"><source>one{separator}two</source></trans-unit>\n'
        '<trans-unit id="2"><source>three</source></trans-unit>\n</body></file></xliff>\n'
    )
    found = segments(parse(page, "xliff"))
    assert [(s.text, s.line) for s in found] == [(f"one{separator}two", 4), ("three", 5)]
    [out] = translate([parse(page, "xliff")], identity)
    assert re.findall(r"<target[^>]*>(.*?)</target>", out) == [f"one{separator}two", "three"]
