"""EPUB books (.epub): real books nobody here wrote (tests/data/office/: epubcheck's,
epub.js's and markitdown's test files) read and written back by the identity and by a fake
translator, checked by independent readers (ElementTree, EbookLib): members, the stored
mimetype first, every page well formed with the same elements, attributes, links and images,
the manifest and spine as they were, the tables of contents and the title translated and the
language said; HTML entities and characters XML cannot hold; bad files refused in one line;
the CLI and /translate_file write an .epub."""

from __future__ import annotations

import io
import warnings
import xml.etree.ElementTree as ElementTree
import zipfile
from pathlib import Path

import pytest

from seq2seq.errors import DataError
from seq2seq.formats import format_of, read_zipped, segments
from tests.fake_translation import identity, translate, upper
from tests.helpers import cli_translate, translate_file
from tests.office import cli_refusal
from tests.office import entries as members

OFFICE = Path(__file__).parent / "data" / "office"
BOOKS = sorted(OFFICE.glob("*.epub"))
TEXT_PARTS = (".xhtml", ".html", ".opf", ".ncx")
LANG = ("lang", "{http://www.w3.org/XML/1998/namespace}lang")  # said again: the target
DC = "{http://purl.org/dc/elements/1.1/}"


def rewrite(data: bytes, change=upper) -> bytes:
    documents, write = read_zipped(data, "epub", "in.epub")
    return write(translate(documents, change))


def structure(xml: bytes) -> list[tuple[str, dict]]:
    """Every element in document order with its attributes (a language said aside), read by
    ElementTree: the page's, the manifest's and the spine's structure, link targets, images."""
    root = ElementTree.fromstring(xml)
    return [
        (e.tag, {k: v for k, v in e.attrib.items() if k not in LANG or e.tag.endswith("item")})
        for e in root.iter()
    ]


def letters(xml: bytes, fold: bool = True) -> list[str]:
    """Each element's own letters and digits, and those after it (upper case with ``fold``;
    white space and punctuation aside: sentences are joined without spaces in Chinese); a
    language said aside."""
    root = ElementTree.fromstring(xml)
    found = []
    for e in root.iter():
        own = "" if e.tag == f"{DC}language" else e.text or ""
        text = "".join(c for c in own + (e.tail or "") if c.isalnum())
        found.append(text.upper() if fold else text)
    return found


def language(xml: bytes) -> str | None:
    found = ElementTree.fromstring(xml).find(f".//{DC}language")
    return None if found is None else found.text


@pytest.mark.parametrize("path", BOOKS, ids=lambda p: p.name)
def test_identity_gives_back_every_member(path):
    data = path.read_bytes()
    before, after = members(data), members(rewrite(data, identity))
    assert [(n, c) for n, c, _ in after] == [(n, c) for n, c, _ in before]
    assert after[0][:2] == ("mimetype", zipfile.ZIP_STORED)
    for (name, _, old), (_, _, new) in zip(before, after, strict=True):
        if name.endswith(TEXT_PARTS) and name != "META-INF/container.xml":
            assert structure(new) == structure(old), name
            assert letters(new) == letters(old), name
        else:  # mimetype, container, stylesheets, images, SVG: as they were
            assert new == old, name


@pytest.mark.parametrize("path", BOOKS, ids=lambda p: p.name)
def test_every_text_is_translated_and_the_structure_kept(path):
    data = path.read_bytes()
    before, after = members(data), members(rewrite(data))
    changed = 0
    for (name, _, old), (_, _, new) in zip(before, after, strict=True):
        if not name.endswith(TEXT_PARTS):
            assert new == old, name
            continue
        assert structure(new) == structure(old), name  # pages, manifest, spine, NCX
        shown, source = letters(new, fold=False), letters(old, fold=False)
        assert [text.upper() for text in shown] == [text.upper() for text in source], name
        changed += sum(a != b for a, b in zip(shown, source, strict=True))
        if name.endswith(".opf"):  # the title translated, the language said, nothing else
            assert language(new) == "zh-Hans" and language(old) != "zh-Hans"
            assert metadata(new) == metadata(old)
            assert title(new) == title(old).upper()
    documents, _ = read_zipped(data, "epub", path.name)
    assert changed >= sum(len(segments(d)) for d in documents) // 2  # verbatim spans aside


def metadata(xml: bytes) -> list[str | None]:
    """The package's metadata but its title and language."""
    found = ElementTree.fromstring(xml).find("{http://www.idpf.org/2007/opf}metadata")
    return [e.text for e in found if e.tag not in (f"{DC}title", f"{DC}language")]


def title(xml: bytes) -> str:
    return ElementTree.fromstring(xml).find(f".//{DC}title").text


def test_an_independent_reader_sees_the_same_book_in_chinese(tmp_path):
    ebooklib = pytest.importorskip("ebooklib")
    from ebooklib import epub

    def read(data: bytes, name: str):
        path = tmp_path / name
        path.write_bytes(data)
        with warnings.catch_warnings():  # EbookLib's future-change warnings
            warnings.simplefilter("ignore")
            return epub.read_epub(str(path), {"ignore_ncx": False})

    def titles(toc) -> list:
        return [
            (entry[0].title, titles(entry[1])) if isinstance(entry, tuple) else entry.title
            for entry in toc
        ]

    for path in BOOKS:
        data = path.read_bytes()
        old, new = read(data, "old.epub"), read(rewrite(data), "new.epub")
        items = [(i.id, i.file_name, i.media_type) for i in old.get_items()]
        assert [(i.id, i.file_name, i.media_type) for i in new.get_items()] == items
        assert new.spine == old.spine, path.name
        assert new.get_metadata("DC", "language")[0][0] == "zh-Hans"
        [(title, _)] = new.get_metadata("DC", "title")
        assert title == old.get_metadata("DC", "title")[0][0].upper()
        assert titles(new.toc) == [_upper(t) for t in titles(old.toc)], path.name
        for item in new.get_items_of_type(ebooklib.ITEM_IMAGE):
            assert item.get_content() == old.get_item_with_id(item.id).get_content()


def _upper(entry):
    if entry is None:
        return None
    if isinstance(entry, tuple):
        return (_upper(entry[0]), [_upper(e) for e in entry[1]])
    return entry.upper()


def test_with_lang_says_another_target_everywhere_the_book_says_one():
    from seq2seq.formats.epub import with_lang

    data = (OFFICE / "epubcheck--lorem.epub").read_bytes()
    documents, write = read_zipped(data, "epub", "lorem.epub")
    retagged = [with_lang(document, "zh-TW") for document in documents]
    written = dict((n, b) for n, _, b in members(write(translate(retagged, identity))))
    assert language(written["EPUB/lorem.opf"]) == "zh-TW"
    xml_lang = LANG[1]
    assert ElementTree.fromstring(written["EPUB/lorem.ncx"]).get(xml_lang) == "zh-TW"
    assert ElementTree.fromstring(written["EPUB/lorem.xhtml"]).get(xml_lang) == "zh-TW"


def test_pages_hold_only_what_xml_can():
    page = (
        '<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml" '
        'lang="en"><head><title>A&nbsp;title</title></head><body><p>Fish&nbsp;&amp;&#160;chips'
        " <em>now</em>.</p></body></html>"
    )
    data = _book({"page.xhtml": "\ufeff" + page})
    documents, write = read_zipped(data, "epub", "b.epub")
    texts = [s.text for d in documents for s in segments(d)]
    assert "Fish & chips now." in texts and "Book" in texts  # entities read, title too
    written = dict((n, b) for n, _, b in members(write(translate(documents, _with_controls))))
    xhtml = written["OEBPS/page.xhtml"]
    assert xhtml.startswith("\ufeff".encode())  # the byte-order mark kept
    root = ElementTree.fromstring(xhtml.decode("utf-8").lstrip("\ufeff"))
    paragraph = root.find(".//{http://www.w3.org/1999/xhtml}p")
    assert "".join(paragraph.itertext()) == "FISH & CHIPS NOW."
    assert root.get("lang") == "zh-Hans"


def _with_controls(sentence: str) -> str:
    """Upper case with a vertical tab and a NUL in it, which XML 1.0 cannot hold."""
    return sentence.upper()[:2] + "\x0b\x00" + sentence.upper()[2:]


CONTAINER = (
    '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:'
    'xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" '
    'media-type="application/oebps-package+xml"/></rootfiles></container>'
)


# META-INF/encryption.xml naming a page, as a DRM scheme writes it (Adobe's, for one).
ENCRYPTED = (
    '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><EncryptedData '
    'xmlns="http://www.w3.org/2001/04/xmlenc#"><EncryptionMethod Algorithm="http://www.w3.org/'
    '2001/04/xmlenc#aes128-cbc"/><CipherData><CipherReference URI="OEBPS/a.xhtml"/>'
    "</CipherData></EncryptedData></encryption>"
)


def _package(pages: list[str]) -> str:
    items = "".join(
        f'<item id="p{i}" href="{name}" media-type="application/xhtml+xml"/>'
        for i, name in enumerate(pages)
    )
    spine = "".join(f'<itemref idref="p{i}"/>' for i in range(len(pages)))
    return (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Book</dc:title>'
        f"<dc:language>en</dc:language></metadata><manifest>{items}</manifest>"
        f"<spine>{spine}</spine></package>"
    )


def _book(pages: dict[str, str | bytes], parts: dict | None = None) -> bytes:
    """An EPUB of ``pages`` (``OEBPS/``); ``parts`` replace members by name, or (None) leave
    them out."""
    members = {
        "mimetype": b"application/epub+zip",
        "META-INF/container.xml": CONTAINER,
        "OEBPS/content.opf": _package(list(pages)),
        **{f"OEBPS/{name}": body for name, body in pages.items()},
    }
    members |= parts or {}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, body in members.items():
            if body is not None:
                method = zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED
                archive.writestr(name, body, method)
    return out.getvalue()


def test_the_mimetype_is_written_first_and_stored():
    page = "<html><body><p>Hello.</p></body></html>"
    book = io.BytesIO(_book({"a.xhtml": page}, {"mimetype": None}))
    with zipfile.ZipFile(book, "a") as archive:  # last, and compressed
        archive.writestr("mimetype", "application/epub+zip", zipfile.ZIP_DEFLATED)
    data = book.getvalue()
    after = members(rewrite(data))
    assert after[0] == ("mimetype", zipfile.ZIP_STORED, b"application/epub+zip")
    assert sorted(n for n, _, _ in after) == sorted(n for n, _, _ in members(data))


def test_what_is_not_an_epub_book_is_refused_in_one_line():
    page = {"a.xhtml": "<html><body><p>Hello.</p></body></html>"}
    book = _book(page)
    cases = [
        (b"Hello.", r"^x\.epub: not an EPUB book \(not a zip file, or a truncated one"),
        (book[: len(book) // 2], r"^x\.epub: not an EPUB book \(not a zip file, or a truncated"),
        (_book(page, {"mimetype": None}), r"^x\.epub: not an EPUB book \(no mimetype in the zip"),
        (
            (OFFICE / "odfpy--simplestyles.odt").read_bytes(),
            r"^x\.epub: not an EPUB book \(its mimetype is application/vnd\.oasis",
        ),
        (
            _book(page, {"META-INF/container.xml": None}),
            r"^x\.epub: not an EPUB book \(no META-INF/container\.xml in the zip\)$",
        ),
        (
            _book(page, {"OEBPS/content.opf": None}),
            r"^x\.epub: not an EPUB book \(its package document OEBPS/content\.opf is not in it\)",
        ),
        (
            _book(page, {"OEBPS/content.opf": '<!DOCTYPE p [<!ENTITY a "aaaa">]><package/>'}),
            r"^x\.epub:OEBPS/content\.opf:1: XML declares an entity",
        ),
        (
            _book({"a.xhtml": "<p>Caf\xe9.</p>".encode("latin-1")}),
            r"^x\.epub:OEBPS/a\.xhtml: not UTF-8",
        ),
        (
            _book(page, {"META-INF/encryption.xml": ENCRYPTED}),
            r"^x\.epub: OEBPS/a\.xhtml is encrypted \(DRM",
        ),
        (
            _book(page, {"OEBPS/big.css": b" " * 3_000_000}),
            r"^x\.epub: not an EPUB book \(OEBPS/big\.css expands over 200 times \(a zip bomb",
        ),
    ]
    for data, message in cases:
        with pytest.raises(DataError, match=message) as raised:
            read_zipped(data, "epub", "x.epub")
        assert "\n" not in str(raised.value)
    assert [format_of(n) for n in ("a.EPUB", "b.epub")] == ["epub", "epub"]


def test_the_cli_writes_an_epub(translation_checkpoint, tmp_path, capsys):
    source, out = OFFICE / "markitdown--test.epub", tmp_path / "out.epub"
    assert cli_translate(translation_checkpoint, source, out) == 0
    before, after = members(source.read_bytes()), members(out.read_bytes())
    assert after[0][:2] == ("mimetype", zipfile.ZIP_STORED)
    for (name, _, old), (_, _, new) in zip(before, after, strict=True):
        if name.endswith(TEXT_PARTS):
            assert structure(new) == structure(old), name
    opf = next(new for name, _, new in after if name.endswith(".opf"))
    assert language(opf) == "zh-Hans"
    assert cli_translate(translation_checkpoint, source, out, "--target", "zh-TW") == 0
    opf = next(new for name, _, new in members(out.read_bytes()) if name.endswith(".opf"))
    assert language(opf) == "zh-TW"  # the book says the Chinese it is written in
    assert "not an EPUB book" in cli_refusal(translation_checkpoint, tmp_path, ".epub", capsys)


@pytest.mark.slow
@pytest.mark.serial
def test_translate_file_answers_an_epub(http):
    pytest.importorskip("fastapi")
    source = (OFFICE / "markitdown--test.epub").read_bytes()
    answer, fetched = translate_file(http, "test.epub", source)
    assert answer.status_code == 200, answer.text
    assert fetched.headers["content-type"] == "application/epub+zip"
    after = dict((n, b) for n, _, b in members(fetched.content))
    assert list(after) == [n for n, _, _ in members(source)]
    assert language(after["EPUB/content.opf"]) == "zh-Hans"
    answer, _ = translate_file(http, "bad.epub", b"Hello.")
    assert answer.status_code == 400 and "not an EPUB book" in answer.json()["error"]
