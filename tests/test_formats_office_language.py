"""The language of a translated Office file's runs follows the target (issue 57): Word's
<w:lang w:val w:eastAsia>, PowerPoint's <a:rPr lang>, set where a run had one and added where
it had none, only on the runs the translation is written into. Checked by ElementTree on
python-docx and python-pptx test files and on hand-written paragraphs (a field, tracked
formatting, properties the schema orders after the language)."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ElementTree
import zipfile
from pathlib import Path

import pytest

from seq2seq.formats import read_zipped
from seq2seq.formats.office import finish, parse_part
from seq2seq.formats.office_language import OFFICE_LANGUAGES, with_lang
from seq2seq.inference.translator import LANGUAGE_TAGGED
from tests.fake_translation import translate

OFFICE = Path(__file__).parent / "data" / "office"
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
WORD = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
# CT_RPr's children in schema order, those these tests use
RPR_ORDER = ["rStyle", "b", "i", "color", "sz", "lang", "eastAsianLayout", "rPrChange"]


def part(body: str) -> str:
    return f"<w:document {WORD}><w:body>{body}</w:body></w:document>"


def rewritten(xml: str, target: str, change=str.upper) -> ElementTree.Element:
    """``xml`` read as a part, its runs' language set to ``target``, translated by ``change``,
    written back and read by ElementTree."""
    [out] = translate([with_lang(parse_part(xml), target)], change)
    return ElementTree.fromstring(finish(out))


def languages(root, namespace=W) -> list[tuple[str, dict[str, str]]]:
    """Each run with text: (its text, its language attributes)."""
    found = []
    for run in root.iter(f"{namespace}r"):
        text = "".join(t.text or "" for t in run.iter(f"{namespace}t"))
        props = run.find(f"{namespace}rPr")
        if namespace == A:
            found.append((text, {} if props is None else dict(props.attrib)))
            continue
        lang = None if props is None else props.find(f"{W}lang")
        found.append((text, {} if lang is None else dict(lang.attrib)))
    return [(text, attrs) for text, attrs in found if text]


def test_word_runs_say_the_target_set_or_added_where_the_schema_puts_it():
    xml = part(
        '<w:p><w:r><w:rPr><w:b/><w:lang w:val="en-US" w:bidi="ar-SA"/></w:rPr>'
        "<w:t>Hello </w:t></w:r>"
        '<w:r><w:rPr><w:i/><w:eastAsianLayout w:vert="1"/><w:rPrChange w:id="1" w:author="x">'
        '<w:rPr><w:lang w:val="fr-FR"></w:lang></w:rPr></w:rPrChange></w:rPr>'
        "<w:t>big</w:t></w:r>"
        '<w:r><w:t xml:space="preserve"> world.</w:t></w:r></w:p>'
        "<w:p><w:r><w:t>Plain.</w:t></w:r></w:p>"
    )
    root = rewritten(xml, "zh-Hans")
    zh = {f"{W}val": "zh-CN", f"{W}eastAsia": "zh-CN"}
    found = languages(root)
    assert [text for text, _ in found] == ["HELLO ", "BIG", " WORLD.", "PLAIN."]
    assert found[0][1] == {**zh, f"{W}bidi": "ar-SA"}  # its right-to-left language kept
    assert all(attrs == zh for _, attrs in found[1:])
    for props in root.iter(f"{W}rPr"):  # every <w:rPr> in the schema's order, one <w:lang>
        names = [child.tag.removeprefix(W) for child in props]
        assert names == sorted(names, key=RPR_ORDER.index) and names.count("lang") <= 1
    old = root.find(f".//{W}rPrChange/{W}rPr/{W}lang")  # a tracked change's old language
    assert old.attrib == {f"{W}val": "fr-FR"}


def test_runs_kept_as_written_keep_their_language():
    field = (
        '<w:r><w:rPr><w:lang w:val="en-GB"/></w:rPr><w:fldChar w:fldCharType="begin"/></w:r>'
        "<w:r><w:instrText> PAGE </w:instrText></w:r>"
        '<w:r><w:fldChar w:fldCharType="separate"/></w:r>'
        '<w:r><w:rPr><w:lang w:val="en-GB"/></w:rPr><w:t>Page one</w:t></w:r>'
        '<w:r><w:fldChar w:fldCharType="end"/></w:r>'
    )
    xml = part(f"<w:p><w:r><w:t>See </w:t></w:r>{field}</w:p><w:p><w:r><w:t> </w:t></w:r></w:p>")
    found = languages(rewritten(xml, "zh-TW"))
    assert found[0] == ("SEE", {f"{W}val": "zh-TW", f"{W}eastAsia": "zh-TW"})
    assert ("Page one", {f"{W}val": "en-GB"}) in found  # a field's result: not translated


@pytest.mark.parametrize("target", sorted(OFFICE_LANGUAGES))
def test_real_word_files_every_translated_run_says_the_target(target):
    tag = OFFICE_LANGUAGES[target]
    for path in sorted(OFFICE.glob("python-docx--*.docx")):
        documents, write = read_zipped(path.read_bytes(), "docx", path.name)
        tagged = [with_lang(document, target) for document in documents]
        written = write(translate(tagged))
        with zipfile.ZipFile(io.BytesIO(written)) as archive:
            root = ElementTree.fromstring(archive.read("word/document.xml"))
        found = languages(root)
        translated = [attrs for text, attrs in found if text.upper() == text and text.strip()]
        assert translated and all(a[f"{W}eastAsia"] == tag for a in translated), path.name


def test_powerpoint_runs_lang_is_set_or_added_other_attributes_kept():
    path = OFFICE / "python-pptx--txt-font-props.pptx"
    documents, write = read_zipped(path.read_bytes(), "pptx", path.name)
    written = write(translate([with_lang(d, "zh-HK") for d in documents]))
    with zipfile.ZipFile(io.BytesIO(path.read_bytes())) as archive:
        before = ElementTree.fromstring(archive.read("ppt/slides/slide5.xml"))
    with zipfile.ZipFile(io.BytesIO(written)) as archive:
        after = ElementTree.fromstring(archive.read("ppt/slides/slide5.xml"))
    old, new = languages(before, A), languages(after, A)
    assert len(old) == len(new) and any("lang" not in attrs for _, attrs in old)
    for (_, was), (_, now) in zip(old, new, strict=True):
        assert now == {**was, "lang": "zh-HK"}  # fr-FR, pl-PL or none before; dirty kept


def test_the_translator_tags_word_powerpoint_and_html():
    assert LANGUAGE_TAGGED["docx"] is with_lang and LANGUAGE_TAGGED["pptx"] is with_lang
    assert "html" in LANGUAGE_TAGGED


def test_the_cli_writes_the_targets_language(translation_checkpoint, tmp_path):
    from seq2seq.cli import main

    source = OFFICE / "python-docx--fnt-color.docx"
    out = tmp_path / "out.docx"
    args = ["translate", "--checkpoint", str(translation_checkpoint), "--input", str(source)]
    assert main([*args, "--output", str(out), "--target", "zh-Hant"]) == 0
    with zipfile.ZipFile(out) as archive:
        found = languages(ElementTree.fromstring(archive.read("word/document.xml")))
    assert found and all(attrs.get(f"{W}eastAsia") == "zh-TW" for _, attrs in found)
