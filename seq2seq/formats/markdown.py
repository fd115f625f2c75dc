"""Markdown as a ``Document``: markdown-it-py (CommonMark, with tables) finds the blocks; the
text of each paragraph, heading, list item and table cell is a segment, with its emphasis,
links and code spans as markup. Everything else stays as written: heading marks, list markers,
quote marks, indentation, code fences and indented code, HTML blocks, images. Link targets are
written back as markdown-it reads them (normalised: a non-ASCII URL comes back
percent-encoded, a reference link as an inline one).

A paragraph written over several lines is translated as one text and written on its first
line (Chinese has no spaces to wrap at); its markers stay in place.
"""

from __future__ import annotations

import re
from functools import lru_cache

from seq2seq.formats.inline import Document, Markup, Segment, has_text

_SPECIAL = re.compile(r"([\\`*_\[\]<])")
_PAIRED = {
    "em_open": "em_close",
    "strong_open": "strong_close",
    "s_open": "s_close",
    "link_open": "link_close",
}


@lru_cache(maxsize=1)
def _parser():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table")


def parse_markdown(document: str) -> Document:
    """``document`` as raw parts and segments, one per block of inline text."""
    line_starts = [0] + [m.end() for m in re.finditer("\n", document)]
    parts: Document = []
    cursor = 0  # everything before it is in parts
    for token in _parser().parse(document):
        if token.type != "inline" or token.map is None or not token.children:
            continue
        located = _locate(document, token.content, max(cursor, line_starts[token.map[0]]))
        if located is None:
            continue  # not found as written (cannot happen for CommonMark sources): kept
        segment = _segment(token.children)
        start, end = located
        if not has_text(segment):  # nothing to translate (code, an image): kept as written
            parts.append(document[cursor:end])
            cursor = end
            continue
        parts += [document[cursor:start], segment]
        cursor = end
    parts.append(document[cursor:])
    return parts


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


def _segment(children) -> Segment:
    """Inline tokens as plain text and markup; markup nests as the tokens do."""
    text: list[str] = []
    length = 0
    top: list[Markup] = []
    stack: list[tuple[Markup, str]] = []

    def attach(markup: Markup) -> None:
        (stack[-1][0].children if stack else top).append(markup)

    for token in children:
        kind = token.type
        if kind == "text":
            text.append(token.content)
            length += len(token.content)
        elif kind in ("softbreak", "hardbreak"):
            if kind == "hardbreak":  # written on one line, the break becomes an HTML <br>
                attach(Markup(length, length, "<br>"))
            text.append(" ")
            length += 1
        elif kind == "code_inline":
            fence = token.markup
            pad = " " if token.content.startswith("`") or token.content.endswith("`") else ""
            literal = f"{fence}{pad}{token.content}{pad}{fence}"
            attach(Markup(length, length + len(token.content), "", "", literal=literal))
            text.append(token.content)
            length += len(token.content)
        elif kind in _PAIRED:
            markup = Markup(length, length, *_delimiters(token))
            attach(markup)
            stack.append((markup, _PAIRED[kind]))
        elif stack and kind == stack[-1][1]:
            markup, _ = stack.pop()
            markup.end = length
            if markup.open == "<":  # an autolink: its text is its target, kept as written
                markup.literal = "".join(text)[markup.start :]
        else:  # image, hardbreak, inline HTML: kept as written where it stood
            attach(Markup(length, length, _point(token)))
    for markup, _ in stack:
        markup.end = length
    return Segment("".join(text), top, escape=_escape, keep_empty=False)


def _delimiters(token) -> tuple[str, str]:
    """What opens and closes an emphasis or a link (whose target is kept as written)."""
    if token.type != "link_open":
        return token.markup, token.markup
    if token.markup == "autolink":
        return "<", ">"
    return "[", f"]({_target(token)})"


def _point(token) -> str:
    if token.type == "image":
        return f"![{token.content}]({_target(token, 'src')})"
    return token.content  # inline HTML


def _target(token, name: str = "href") -> str:
    """A link or image target: the destination (in <> when it holds a space) and its title."""
    destination = str(token.attrs.get(name, ""))
    if " " in destination or not destination:
        destination = f"<{destination}>"
    title = token.attrs.get("title")
    if title:
        escaped = str(title).replace("\\", "\\\\").replace('"', '\\"')
        destination += f' "{escaped}"'
    return destination


def _escape(text: str) -> str:
    return _SPECIAL.sub(r"\\\1", text)
