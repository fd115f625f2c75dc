"""The language an Office file's translated runs say they are in (issue 57): Word's
``<w:lang w:val="..." w:eastAsia="..."/>`` in a run's ``<w:rPr>``, PowerPoint's ``lang`` on a
run's ``<a:rPr>``, set to the target or added, so that Word and PowerPoint proofread, pick
fonts and read aloud the translation as Chinese. Only the runs the translation is written into
change (``seq2seq.formats.office`` marks them); fields, untranslated paragraphs and the rest
keep their own. Pure text: no model.
"""

from __future__ import annotations

import re
from dataclasses import replace

from seq2seq.formats.inline import Document, Markup

# The culture names Office gives Chinese (zh-Hans and zh-Hant are not among them).
OFFICE_LANGUAGES = {"zh-Hans": "zh-CN", "zh-Hant": "zh-TW", "zh-TW": "zh-TW", "zh-HK": "zh-HK"}
# The opening of a generated run with text (``office._MARK`` on its <w:t>) and its properties;
# a <w:rPr> may hold a <w:rPrChange> with a <w:rPr> of its own, so it ends before that <w:t>.
_TEXT_RUN = re.compile(
    r"<(\w+):r>(<\1:rPr\b[^>]*/>|<\1:rPr\b[^>]*(?<!/)>(?:(?!<\1:r>).)*?</\1:rPr>)?"
    r"(?=<\1:t\x01>)",
    re.S,
)
# What follows <w:lang> in a <w:rPr> by the schema (CT_RPr): a new one goes before these.
_AFTER_LANG = r"<{p}:(?:eastAsianLayout|specVanish|oMath|rPrChange)\b|</{p}:rPr>"
_WORD_LANG = r"<{p}:lang\b([^>]*?)\s*(?:/>|>\s*</{p}:lang>)"  # its attributes


def with_lang(document: Document, target: str) -> Document:
    """``document`` (a part read by ``office.parse_part``) whose translated runs say they are
    in ``target`` (a ``chinese_script`` target, written as ``OFFICE_LANGUAGES`` names it)."""
    tag = OFFICE_LANGUAGES.get(target, target)

    def retag(text: str) -> str:
        return _TEXT_RUN.sub(lambda found: _run_with_lang(found, tag), text)

    def retag_markup(markups: list[Markup]) -> list[Markup]:
        return [
            replace(m, open=retag(m.open), close=retag(m.close), children=retag_markup(m.children))
            for m in markups
        ]

    return [
        retag(part) if isinstance(part, str) else replace(part, markup=retag_markup(part.markup))
        for part in document
    ]


def _run_with_lang(found: re.Match, tag: str) -> str:
    """A generated run's opening, its properties in language ``tag``."""
    prefix, properties = found.group(1), found.group(2) or ""
    if prefix == "a":  # DrawingML (PowerPoint)
        return "<a:r>" + _drawing_properties(properties or "<a:rPr/>", tag)
    return f"<{prefix}:r>" + _word_properties(properties, tag, prefix)


def _word_properties(properties: str, tag: str, p: str) -> str:
    """A ``<w:rPr>`` (namespace prefix ``p``) whose ``<w:lang>`` says ``tag`` for Latin and
    East Asian text alike (its ``w:bidi`` kept), added where the schema puts it when there
    was none."""
    values = f'{p}:val="{tag}" {p}:eastAsia="{tag}"'
    if not properties or re.fullmatch(rf"<{p}:rPr\s*/>", properties):
        return f"<{p}:rPr><{p}:lang {values}/></{p}:rPr>"
    own = properties.split(f"<{p}:rPrChange", 1)[0]  # not the tracked change's old properties
    lang = re.search(_WORD_LANG.format(p=p), own)
    if lang is not None:
        others = re.sub(rf'\s{p}:(?:val|eastAsia)="[^"]*"', "", lang.group(1))
        retagged = f"<{p}:lang{others} {values}/>"
        return properties[: lang.start()] + retagged + properties[lang.end() :]
    where = re.search(_AFTER_LANG.format(p=p), properties).start()
    return f"{properties[:where]}<{p}:lang {values}/>{properties[where:]}"


def _drawing_properties(properties: str, tag: str) -> str:
    """An ``<a:rPr>`` whose ``lang`` attribute says ``tag``."""
    head = re.match(r"<\w+:rPr\b[^>]*?(?=/?>)", properties).group()
    lang = re.search(r'\slang="[^"]*"', head)
    retagged = head.replace(lang.group(), f' lang="{tag}"') if lang else f'{head} lang="{tag}"'
    return retagged + properties[len(head) :]
