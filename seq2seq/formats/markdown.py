"""Markdown as a ``Document``: markdown-it-py (CommonMark with GitHub's tables, strikethrough
and footnotes) finds the blocks; the text of each paragraph, heading, list item, table cell and
footnote is a segment, with its emphasis, links, code spans and inline HTML as markup.
Everything the model should not read stays as written:

- structure: heading marks, list markers, quote marks, indentation, code fences and indented
  code, link reference definitions (``[ref]: url``), and the tags and attributes of HTML
  blocks, whose text is translated as HTML (``<p align="center">``, ``<details>``);
- front matter: a YAML block between ``---`` lines (closed by ``---`` or ``...``) or a TOML
  block between ``+++`` lines at the very top, byte for byte (not translated);
- a heading's attribute list at its end (``## Install {#install}``, ``{: #id .class}``);
- a task list item's ``[ ]``/``[x]``, a GitHub alert's ``> [!NOTE]`` line, and a footnote
  definition's ``[^1]:`` label (its note is translated); a footnote reference ``[^1]`` is
  kept where its words went;
- link targets and images as written: ``[text](target "title")`` and ``[text][ref]`` come back
  with the same target, a collapsed or shortcut reference (``[text][]``, ``[text]``) as
  ``[translated][text]`` (its label was its text, which is now translated);
- code spans, autolinks, and the code-like inline HTML elements ``<code>``, ``<kbd>``,
  ``<samp>``, ``<tt>``, ``<var>``: kept with their content. Other inline HTML is paired like
  emphasis (``Press <b>Save</b> now``: the tags go around the translated word); a void or
  unpaired tag (``<br>``, ``<img>``) is a point.

Translated text is escaped where it would read as markup (``*``, ``_``, ``~``, brackets, ``<``,
and ``|`` in a table cell).

Emphasis is written with ``*``, ``**`` and ``~~`` (``_`` neither opens nor closes beside a
Chinese letter: ``这个_很_重要`` shows its underscores), settled where it would not render,
else as HTML tags (:mod:`seq2seq.formats.markdown_emphasis`).

Front matter and task-list markers are read here rather than with mdit-py-plugins' plugins:
``front_matter_plugin`` reads only YAML, and ``tasklists_plugin`` replaces the marker with a
checkbox tag, where all that is needed is to leave the marker out of the segment as written.

A paragraph written over several lines is translated as one text and written on its first
line (Chinese has no spaces to wrap at); its markers stay in place.

This module writes the blocks; the parser and the reading of inline tokens
into text and markup are :mod:`seq2seq.formats.markdown_inline`'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

from seq2seq.errors import DataError
from seq2seq.formats.html import parse_html
from seq2seq.formats.inline import Document, Markup, has_text, segments
from seq2seq.formats.markdown_emphasis import MarkdownSegment
from seq2seq.formats.markdown_inline import parser, read_inline

_SPECIAL = re.compile(r"([\\`*_~\[\]<])")
_LEADING_MARKERS = {
    "list_item_open": re.compile(r"\[[ xX]\](?:[ \t]+|(?=\n)|\Z)"),  # a task: [ ], [x]
    "blockquote_open": re.compile(
        r"\[!(?:NOTE|TIP|IMPORTANT|WARNING|CAUTION)\][ \t]*(?:\n|\Z)", re.IGNORECASE
    ),  # a GitHub alert, alone on its line
}
_FRONT_MATTER_ENDS = {"---": ("---", "..."), "+++": ("+++",)}
# What may stand before a block on its first line: indentation, quote and list markers.
_CONTAINER_MARKS = re.compile(r"(?:[ \t>]|[-+*][ \t]|\d{1,9}[.)][ \t])*")
# A heading's attribute list at its end: {#id}, {.class}, {#id .class key=value} (Pandoc,
# markdown-it-attrs), kramdown's {: #id} and MkDocs' { #id }; an anchor, never words.
_ATTRIBUTE = r"""(?:[#.][^\s{}"'=]+|[\w:-]+=(?:"[^"]*"|'[^']*'|[^\s{}"']+))"""
_HEADING_ATTRIBUTES = re.compile(
    rf"[ \t]*\{{:?[ \t]*{_ATTRIBUTE}(?:[ \t]+{_ATTRIBUTE})*[ \t]*\}}\Z"
)


def parse_markdown(document: str) -> Document:
    """``document`` as raw parts and segments, one per block of inline text."""
    front = _front_matter(document)
    # The front matter's lines are parsed as blank ones, so token lines stay document lines.
    source = "\n" * document.count("\n", 0, front) + document[front:]
    line_starts = [0] + [m.end() for m in re.finditer("\n", document)]
    tokens = parser().parse(source)
    parts: Document = []
    cursor = 0  # everything before it is in parts
    for index, token in enumerate(tokens):
        if token.map is None:
            continue
        line_start = max(cursor, front, line_starts[token.map[0]])
        if token.type == "footnote_reference_open":  # [^label]: as written, the note after it
            label = f"[^{token.meta['label']}]:"
            found = document.find(label, line_start)
            if found >= 0:
                parts.append(document[cursor : found + len(label)])
                cursor = found + len(label)
        elif token.type == "html_block":
            located = _html_block(document, token, line_start)
            if located is not None:
                start, end, html_parts = located
                parts += [document[cursor:start], *html_parts]
                cursor = end
        elif token.type == "inline" and token.children:
            located = _inline_segment(document, tokens, index, line_start)
            if located is None:
                continue  # not found as written (cannot happen for CommonMark sources): kept
            segment, start, end = located
            if has_text(segment):
                parts += [document[cursor:start], segment]
            else:  # nothing to translate (code, an image): kept as written
                parts.append(document[cursor:end])
            cursor = end
    parts.append(document[cursor:])
    return parts


def _inline_segment(
    document: str, tokens, index: int, start: int
) -> tuple[MarkdownSegment, int, int] | None:
    """Inline token ``index`` as a segment, and the span of the document it replaces (found
    from ``start``), or None where its text is not found as written."""
    token = tokens[index]
    in_cell = tokens[index - 1].type in ("th_open", "td_open")
    # markdown-it reads a cell's \| as |: every | in a cell was written \| and must be again
    content = token.content.replace("|", "\\|") if in_cell else token.content
    located = _locate(document, content, start)
    if located is None:
        return None
    start, end = located
    segment = _segment(token.children, token.content, token.map[0] + 1)
    if in_cell:
        segment.escape = _escape_cell
        _escape_pipes(segment.markup)
    segment, cut = _without_marker(segment, token.content, _leading_marker(tokens, index))
    if cut:  # the segment starts after the marker (a GitHub alert's text on the next line)
        start = (_locate(document, token.content[cut:], start + cut) or located)[0]
    if tokens[index - 1].type == "heading_open":
        segment, kept = _without_attributes(segment, token.content)
        end -= kept  # written after the translation as it stood
    return segment, start, end


def _html_block(document: str, token, start: int) -> tuple[int, int, Document] | None:
    """An HTML block (``<p align="center">``, ``<details><summary>``) read as HTML
    (:func:`parse_html`: its text translated, its tags and attributes kept), with the span of
    the document it stands for; None where it is kept as written: not found in one piece (in a
    quote, whose ``>`` marks cut its lines) or not HTML that parses."""
    found = document.find(token.content, start)
    if found < 0 or not _CONTAINER_MARKS.fullmatch(document[start:found]):
        return None
    try:
        html_parts = parse_html(token.content)
    except DataError:
        return None  # markup left open at the block's end: kept as written
    for part in segments(html_parts):
        part.line += token.map[0]
    return found, found + len(token.content), html_parts


def _front_matter(document: str) -> int:
    """How many characters of front matter open the document: YAML between ``---`` lines or
    TOML between ``+++`` lines (0 if none; an opening line never closed is not one)."""
    lines = document.split("\n")
    ends = _FRONT_MATTER_ENDS.get(lines[0].removeprefix("\ufeff").rstrip())
    if ends is None:
        return 0
    length = len(lines[0]) + 1
    for line in lines[1:]:
        length += len(line) + 1
        if line.rstrip() in ends:
            return min(length, len(document))
    return 0


def _locate(document: str, content: str, start: int) -> tuple[int, int] | None:
    """Where the lines of an inline block's content stand in the document, from ``start``:
    the first line's start to the last line's end."""
    first = last = None
    position = start
    for line in content.split("\n"):
        found = document.find(line, position)
        if found < 0:
            return None
        first = found if first is None else first
        position = last = found + len(line)
    return (first, last) if first is not None and last is not None else None


def _leading_marker(tokens, index: int) -> re.Pattern | None:
    """The marker the first paragraph of a block may open with, kept as written: a task list
    item's ``[ ]``/``[x]``, a GitHub alert's ``[!NOTE]`` (inline token ``index``)."""
    if index < 2 or tokens[index - 1].type != "paragraph_open":
        return None
    return _LEADING_MARKERS.get(tokens[index - 2].type)


def _without_marker(
    segment: MarkdownSegment, content: str, marker: re.Pattern | None
) -> tuple[MarkdownSegment, int]:
    """The segment without the ``marker`` its ``content`` opens with, and the marker's length
    (0: none, the segment as it was)."""
    match = marker.match(content) if marker else None
    if match is None or any(m.start < match.end() for m in segment.markup):
        return segment, 0
    cut = match.end()
    _shift(segment.markup, -cut)
    return replace(segment, text=segment.text[cut:]), cut


def _without_attributes(segment: MarkdownSegment, content: str) -> tuple[MarkdownSegment, int]:
    """The heading's segment without the attribute list its ``content`` ends with
    (``## Install {#install}``: the anchor links point at is not translated), and the list's
    length with the white space before it (0: none, the segment as it was)."""
    match = _HEADING_ATTRIBUTES.search(content)
    if match is None or not segment.text.endswith(match.group()):
        return segment, 0  # not plain text as written (inside a code span, escaped)
    cut = len(segment.text) - len(match.group())
    if any(m.end > cut for m in _flattened(segment.markup)):
        return segment, 0  # its markup reaches into the list
    return replace(segment, text=segment.text[:cut]), len(match.group())


def _flattened(markups: list[Markup]) -> Iterator[Markup]:
    for markup in markups:
        yield markup
        yield from _flattened(markup.children)


def _escape_pipes(markups: list[Markup]) -> None:
    """Each | in the markup written as \\| again (in a table cell, where | ends the cell)."""
    for markup in markups:
        markup.open = markup.open.replace("|", "\\|")
        markup.close = markup.close.replace("|", "\\|")
        if markup.literal is not None:
            markup.literal = markup.literal.replace("|", "\\|")
        _escape_pipes(markup.children)


def _shift(markups: list[Markup], by: int) -> None:
    for markup in markups:
        markup.start += by
        markup.end += by
        _shift(markup.children, by)


def _segment(children, source: str, line: int) -> MarkdownSegment:
    """Inline tokens as a segment (:func:`read_inline`); ``source`` is the inline text the
    tokens were read from."""
    text, markup = read_inline(children, source)
    return MarkdownSegment(text, markup, escape=_escape, line=line)


def _escape(text: str) -> str:
    return _SPECIAL.sub(r"\\\1", text)


def _escape_cell(text: str) -> str:
    return _escape(text).replace("|", "\\|")
