"""What ``documents-office`` reads of a document, with readers independent of ``seq2seq``:
python-docx, python-pptx, openpyxl, EbookLib, polib, lxml, zipfile and ElementTree.

``read(path)`` gives a ``Reading``: the text units in document order (a unit's text, its
style and its number of formatting runs, as a reader sees them), the structure's counts, the link
targets, the PO/XLIFF sources beside their translations, and the zip members' bytes.
"""

from __future__ import annotations

import re
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from seq2seq.formats import EXTENSIONS

# Symfony's %name%, printf (Python's %(name)s too) and brace placeholders (ICU, str.format).
PLACEHOLDER = re.compile(
    r"%[A-Za-z_][\w.-]*%|%(?:\([^)]+\))?[-#0 +]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]|\{[^{}\s]*\}"
)
ODF_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
ODF_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
ODF_DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
XLINK_HREF = "{http://www.w3.org/1999/xlink}href"
XHTML_BLOCKS = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "li", "td", "th", "dt", "dd", "caption"}
XLIFF_CODES = {"g", "x", "bx", "ex", "ph", "pc", "sc", "ec", "it", "bpt", "ept"}


@dataclass
class Reading:
    """One document as the independent readers see it."""

    units: list[tuple[str, str, int]] = field(default_factory=list)  # (text, style, runs)
    counts: Counter = field(default_factory=Counter)
    links: list[str] = field(default_factory=list)
    pairs: list[tuple[str, str]] = field(default_factory=list)  # PO/XLIFF (source, target)
    members: dict[str, bytes] = field(default_factory=dict)
    other_cells: list[tuple[str, str]] = field(default_factory=list)  # xlsx: not strings
    # docx, pptx, xlsx: per unit, the formattings its runs with text have (``_formatting``)
    formats: list[frozenset] = field(default_factory=list)


def _local(tag: object) -> str:
    return str(tag).rsplit("}", 1)[-1]


# Run properties that say nothing of how text looks: editing ids, language, proofing marks.
NOT_FORMATTING = {"lang", "noProof", "altLang", "dirty", "err", "smtClean", "smtId"}


def _formatting(run) -> str:
    """A docx ``<w:r>``'s or pptx ``<a:r>``'s formatting as a string: its properties' elements
    and attributes but editing ids and language, and the link it is in (docx) or has (pptx)."""
    properties = next((c for c in run if _local(c.tag) == "rPr"), None)
    parts = []
    for element in [] if properties is None else properties.iter():
        if _local(element.tag) in NOT_FORMATTING:
            continue
        kept = sorted(
            (_local(k), v)
            for k, v in element.attrib.items()
            if _local(k) not in NOT_FORMATTING and not _local(k).startswith("rsid")
        )
        if element is not properties or kept:  # an empty <w:rPr/> formats nothing
            parts.append(f"{_local(element.tag)}{kept}")
    parent = run.getparent()
    if parent is not None and _local(parent.tag) == "hyperlink":
        parts.append(f"link{sorted(parent.attrib.items())}")
    return " ".join(parts)


def _docx_paragraphs(part, reading: Reading) -> None:
    from docx.oxml.ns import qn
    from docx.text.paragraph import Paragraph

    for element in part.element.iter(qn("w:p")):
        paragraph = Paragraph(element, part)
        runs = sum(1 for r in element.iter(qn("w:r")) if r.find(qn("w:t")) is not None)
        style = paragraph.style.name if paragraph.style is not None else ""
        reading.units.append((paragraph.text, style, runs))
        worded = [
            r
            for r in element.iter(qn("w:r"))
            if "".join(t.text or "" for t in r.iter(qn("w:t"))).strip()
        ]
        reading.formats.append(frozenset(_formatting(r) for r in worded))
        reading.counts["hyperlinks"] += len(element.findall(qn("w:hyperlink")))
    reading.counts["tables"] += sum(1 for _ in part.element.iter(qn("w:tbl")))
    reading.counts["cells"] += sum(1 for _ in part.element.iter(qn("w:tc")))


def read_docx(path: Path, reading: Reading) -> None:
    """Body, header and footer paragraphs (tables' included) through python-docx."""
    import docx

    document = docx.Document(str(path))
    _docx_paragraphs(document.part, reading)
    seen = set()
    for section in document.sections:
        for part in (section.header, section.footer, section.first_page_header):
            if not part.is_linked_to_previous and id(part.part) not in seen:
                seen.add(id(part.part))
                _docx_paragraphs(part.part, reading)
    reading.counts["sections"] = len(document.sections)


def _pptx_frame(frame, reading: Reading) -> None:
    for paragraph in frame.paragraphs:
        reading.units.append((paragraph.text, str(paragraph.level), len(paragraph.runs)))
        worded = [run._r for run in paragraph.runs if run.text.strip()]
        reading.formats.append(frozenset(_formatting(r) for r in worded))
        reading.links += [r.hyperlink.address for r in paragraph.runs if r.hyperlink.address]


def _pptx_shapes(shapes, reading: Reading) -> None:
    for shape in shapes:
        reading.counts["shapes"] += 1
        if shape.shape_type == 6:  # MSO_SHAPE_TYPE.GROUP
            _pptx_shapes(shape.shapes, reading)
        if shape.has_text_frame:
            _pptx_frame(shape.text_frame, reading)
        if getattr(shape, "has_table", False) and shape.has_table:
            reading.counts["tables"] += 1
            for cell in (c for row in shape.table.rows for c in row.cells):
                reading.counts["cells"] += 1
                _pptx_frame(cell.text_frame, reading)


def read_pptx(path: Path, reading: Reading) -> None:
    """Slides' shapes (grouped, tables), then each slide's speaker notes, through python-pptx."""
    import pptx

    for slide in pptx.Presentation(str(path)).slides:
        reading.counts["slides"] += 1
        _pptx_shapes(slide.shapes, reading)
        if slide.has_notes_slide:
            reading.counts["notes"] += 1
            _pptx_frame(slide.notes_slide.notes_text_frame, reading)


def read_xlsx(path: Path, reading: Reading) -> None:
    """String cells are units (signature: the cell's style ids and rich-text runs); every other
    cell (numbers, formulas, dates) is kept aside to be compared as it is."""
    import openpyxl

    book = openpyxl.load_workbook(str(path), rich_text=True)
    for index, sheet in enumerate(book.worksheets):
        reading.counts["sheets"] += 1
        reading.counts["merged"] += len(sheet.merged_cells.ranges)
        for cell in (c for row in sheet.iter_rows() for c in row):
            if cell.value is None:
                continue
            reading.counts["cells"] += 1
            if cell.hyperlink is not None and cell.hyperlink.target:
                reading.links.append(cell.hyperlink.target)
            if cell.data_type in ("s", "inlineStr"):
                runs = len(cell.value) if isinstance(cell.value, list) else 1
                reading.units.append((str(cell.value), str(tuple(cell._style)), runs))
                blocks = cell.value if isinstance(cell.value, list) else [cell.value]
                reading.formats.append(
                    frozenset(repr(getattr(b, "font", "base")) for b in blocks if str(b).strip())
                )
                continue
            reading.other_cells.append((f"{index}!{cell.coordinate}", repr(cell.value)))


def _odf_part(data: bytes, reading: Reading) -> None:
    from lxml import etree

    root = etree.fromstring(data, etree.XMLParser(recover=True, resolve_entities=False))
    for element in root.iter(etree.Element):
        name = _local(element.tag)
        if element.tag in (f"{{{ODF_TEXT}}}p", f"{{{ODF_TEXT}}}h"):
            spans = sum(1 for e in element.iter() if e.tag == f"{{{ODF_TEXT}}}span")
            style = element.get(f"{{{ODF_TEXT}}}style-name", "")
            reading.units.append(("".join(element.itertext()), f"{name}:{style}", spans))
        elif element.tag == f"{{{ODF_TABLE}}}table":
            reading.counts["tables"] += 1
        elif element.tag == f"{{{ODF_TABLE}}}table-cell":
            reading.counts["cells"] += 1
        elif element.tag == f"{{{ODF_DRAW}}}page":
            reading.counts["slides"] += 1
        if element.get(XLINK_HREF):
            reading.links.append(element.get(XLINK_HREF))


def read_odf(path: Path, reading: Reading) -> None:
    """content.xml and styles.xml (headers, footers, master pages) through ElementTree."""
    for part in ("content.xml", "styles.xml"):
        if part in reading.members:
            _odf_part(reading.members[part], reading)


def _xhtml_blocks(data: bytes, reading: Reading) -> None:
    from lxml import etree

    root = etree.fromstring(data, etree.XMLParser(recover=True, resolve_entities=False))
    if root is None:
        return
    for element in root.iter(etree.Element):
        name = _local(element.tag)
        if name in XHTML_BLOCKS:
            inline = sum(1 for _ in element.iterdescendants())
            text = " ".join("".join(element.itertext()).split())
            reading.units.append((text, f"{name}.{element.get('class', '')}", inline))
        for attribute in ("href", "src"):
            if element.get(attribute) and name in ("a", "img", "link", "image"):
                reading.links.append(element.get(attribute))


def read_epub(path: Path, reading: Reading) -> None:
    """The spine's and manifest's XHTML documents, each through lxml, as EbookLib lists them."""
    import ebooklib
    from ebooklib import epub

    book = epub.read_epub(str(path), {"ignore_ncx": True})
    for item in book.get_items_of_type(ebooklib.ITEM_DOCUMENT):
        reading.counts["documents"] += 1
        _xhtml_blocks(item.get_content(), reading)


def read_po(path: Path, reading: Reading) -> None:
    """Entries (not the header, not obsolete ones) through polib: (msgid, msgstr) pairs; a
    plural entry is one pair per form, each beside msgid_plural from the second on."""
    import polib

    catalog = polib.pofile(str(path))
    for entry in (e for e in catalog if not e.obsolete):
        reading.counts["entries"] += 1
        reading.counts["fuzzy"] += "fuzzy" in entry.flags
        key = f"{entry.msgctxt}\x04{entry.msgid}\x00{entry.msgid_plural}"
        reading.units.append((key, f"{entry.comment}|{entry.tcomment}|{entry.occurrences}", 0))
        if entry.msgid_plural:
            forms = sorted(entry.msgstr_plural.items()) or [(0, "")]
            sources = [entry.msgid] + [entry.msgid_plural] * (len(forms) - 1)
            reading.pairs += [(s, t) for s, (_, t) in zip(sources, forms, strict=True)]
        else:
            reading.pairs.append((entry.msgid, entry.msgstr))


def read_xliff(path: Path, reading: Reading) -> None:
    """XLIFF 1.2 trans-units and 2.0 segments through lxml (no entities, no network): each
    unit's source and target text; a unit's signature counts its inline codes by name."""
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True)
    root = etree.fromstring(reading.members["."], parser)
    units = [e for e in root.iter() if _local(e.tag) in ("trans-unit", "segment")]
    for unit in units:
        reading.counts["units"] += 1
        source = next((e for e in unit if _local(e.tag) == "source"), None)
        target = next((e for e in unit if _local(e.tag) == "target"), None)
        codes = _codes(source)
        reading.counts["source codes"] += sum(codes.values())
        reading.counts["codes lost"] += sum((codes - _codes(target)).values())
        text = "".join(source.itertext()) if source is not None else ""
        reading.units.append((text, str(sorted(codes.items())), 0))
        reading.pairs.append((text, "".join(target.itertext()) if target is not None else ""))


def _codes(element) -> Counter:
    """The XLIFF inline codes inside ``element`` (None: none), by name."""
    if element is None:
        return Counter()
    return Counter(_local(e.tag) for e in element.iter() if _local(e.tag) in XLIFF_CODES)


READERS = {
    "docx": read_docx,
    "pptx": read_pptx,
    "xlsx": read_xlsx,
    "odt": read_odf,
    "odp": read_odf,
    "ods": read_odf,
    "epub": read_epub,
    "po": read_po,
    "xliff": read_xliff,
}
# The formats measured, by extension, as seq2seq picks them.
KINDS = {extension: kind for extension, kind in EXTENSIONS.items() if kind in READERS}


def read(path: Path) -> Reading:
    """``path`` read by its format's independent reader (the kind from its extension)."""
    reading = Reading()
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            reading.members = {i.filename: archive.read(i) for i in archive.infolist()}
    else:
        reading.members = {".": path.read_bytes()}
    READERS[KINDS[path.suffix.lower()]](path, reading)
    reading.links = sorted(reading.links + external_targets(reading.members))
    return reading


def external_targets(members: dict[str, bytes]) -> list[str]:
    """The external targets (hyperlinks) of an OOXML package's relationship parts."""
    targets = []
    for name in (n for n in members if n.endswith(".rels")):
        for relation in ElementTree.fromstring(members[name]):
            if relation.get("TargetMode") == "External":
                targets.append(relation.get("Target", ""))
    return targets


def placeholders(text: str) -> Counter:
    """The printf and brace placeholders in ``text``, as a multiset."""
    return Counter(PLACEHOLDER.findall(text))
