"""Markdown's inline tokens read into a segment's text and markup (:mod:`seq2seq.formats.markdown`
writes the blocks around them): markdown-it configured to record where links, images and
inline HTML stood in the source (:func:`parser`), and :func:`read_inline`, which turns an
inline block's tokens into plain text and the markup over it. Emphasis, links and paired
inline HTML tags nest as markup; code spans, autolinks and code-like HTML elements are kept
with their content; images, footnote references and lone tags are points kept as written.
"""

from __future__ import annotations

import re
from functools import lru_cache

from seq2seq.formats.inline import Markup

_CLOSERS = {
    "em_open": "em_close",
    "strong_open": "strong_close",
    "s_open": "s_close",
    "link_open": "link_close",
}
_MARKERS = {"em_open": "*", "strong_open": "**", "s_open": "~~"}
_VOID = frozenset(
    "area base br col embed hr img input keygen link meta param source track wbr".split()
)
_CODE_TAGS = frozenset({"code", "kbd", "samp", "tt", "var"})
_OPEN_TAG = re.compile(r"<([A-Za-z][A-Za-z0-9-]*)(?:\s[^>]*)?>\Z")
_CLOSE_TAG = re.compile(r"</([A-Za-z][A-Za-z0-9-]*)\s*>\Z")


class _Inline:
    """A segment being read from inline tokens: its plain text so far and the markup over
    it; elements not yet closed are on a stack with what closes each (a token type, or the
    index of an inline HTML closing tag)."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.length = 0
        self.top: list[Markup] = []
        self.stack: list[tuple[Markup, str | int]] = []

    def add(self, text: str) -> None:
        self.text.append(text)
        self.length += len(text)

    def attach(self, markup: Markup) -> None:
        (self.stack[-1][0].children if self.stack else self.top).append(markup)

    def open(self, opening: str, closing: str, closer: str | int) -> None:
        markup = Markup(self.length, self.length, opening, closing)
        self.attach(markup)
        self.stack.append((markup, closer))

    def closes(self, kind: str, index: int) -> bool:
        return bool(self.stack) and self.stack[-1][1] in (kind, index)

    def close(self) -> Markup:
        markup, _ = self.stack.pop()
        markup.end = self.length
        return markup


def read_inline(children, source: str) -> tuple[str, list[Markup]]:
    """Inline tokens as plain text and markup; markup nests as the tokens do. ``source`` is
    the inline text the tokens were read from (their recorded spans index it)."""
    pairs = _pair_tags(children)
    inline = _Inline()
    index = 0
    while index < len(children):
        index = _read(children, index, pairs, source, inline)
    while inline.stack:
        inline.close()
    return "".join(inline.text), inline.top


def _read(children, index: int, pairs: dict[int, int], source: str, inline: _Inline) -> int:
    """Reads token ``index`` into ``inline``; returns the index of the next token to read."""
    token = children[index]
    kind = token.type
    if kind == "text":
        inline.add(token.content)
    elif kind in ("softbreak", "hardbreak"):
        if kind == "hardbreak":  # written on one line, the break becomes an HTML <br>
            inline.attach(Markup(inline.length, inline.length, "<br>"))
        inline.add(" ")  # the words do not run together
    elif kind == "code_inline":
        fence = token.markup
        pad = " " if token.content.startswith("`") or token.content.endswith("`") else ""
        literal = f"{fence}{pad}{token.content}{pad}{fence}"
        inline.attach(Markup(inline.length, inline.length + len(token.content), "", "", literal))
        inline.add(token.content)
    elif index in pairs and _tag_name(token.content) in _CODE_TAGS:
        return _read_code_tag(children, index, pairs[index], source, inline)
    elif index in pairs:
        inline.open(token.content, children[pairs[index]].content, pairs[index])
    elif kind in _CLOSERS:
        inline.open(*_delimiters(token), _CLOSERS[kind])
    elif inline.closes(kind, index):
        markup = inline.close()
        if markup.open == "<":  # an autolink: its text is its target, kept as written
            markup.literal = "".join(inline.text)[markup.start :]
    else:  # an image, a footnote reference, a lone HTML tag: kept as written where it stood
        inline.attach(Markup(inline.length, inline.length, _point(token, source)))
    return index + 1


def _read_code_tag(children, index: int, close: int, source: str, inline: _Inline) -> int:
    """A code-like HTML element (``<kbd>Ctrl</kbd>``) kept as written, its text read."""
    text = "".join(_plain(token) for token in children[index + 1 : close])
    start, end = children[index].meta["span"][0], children[close].meta["span"][1]
    inline.attach(Markup(inline.length, inline.length + len(text), "", "", source[start:end]))
    inline.add(text)
    return close + 1


def _plain(token) -> str:
    if token.type in ("text", "code_inline"):
        return token.content
    return " " if token.type in ("softbreak", "hardbreak") else ""


def _pair_tags(children) -> dict[int, int]:
    """Which inline HTML opening tag is closed by which closing tag (token indices): the
    nearest open one of the same name, inside the same emphasis or link. A void tag, one
    never closed and a closing tag that closes nothing are left out (points)."""
    pairs: dict[int, int] = {}
    stack: list[tuple[int, str | None]] = []  # open HTML tags by name; None: emphasis or link
    for index, token in enumerate(children):
        if token.type in _CLOSERS:
            stack.append((index, None))
        elif token.type in _CLOSERS.values():
            while stack and stack.pop()[1] is not None:
                pass  # HTML tags opened inside and never closed
        elif token.type == "html_inline":
            opening, closing = _OPEN_TAG.match(token.content), _CLOSE_TAG.match(token.content)
            if opening and not token.content.endswith("/>"):
                name = opening.group(1).lower()
                if name not in _VOID:
                    stack.append((index, name))
            elif closing:
                _pair_closing(stack, closing.group(1).lower(), index, pairs)
    return pairs


def _pair_closing(stack: list[tuple[int, str | None]], name: str, index: int, pairs) -> None:
    for depth in range(len(stack) - 1, -1, -1):
        opened, opened_name = stack[depth]
        if opened_name is None:
            return  # not across an emphasis or link boundary
        if opened_name == name:
            pairs[opened] = index
            del stack[depth:]
            return


def _tag_name(tag: str) -> str:
    match = _OPEN_TAG.match(tag)
    return match.group(1).lower() if match else ""


def _delimiters(token) -> tuple[str, str]:
    """What opens and closes an emphasis or a link (whose target is kept as written)."""
    if token.type != "link_open":
        marker = _MARKERS[token.type]
        return marker, marker
    if token.markup == "autolink":
        return "<", ">"
    return "[", token.meta.get("close") or f"]({_target(token)})"


def _point(token, source: str) -> str:
    if token.type == "footnote_ref":
        return f"[^{token.meta['label']}]"
    if token.type == "image" and "span" in token.meta:
        start, end = token.meta["span"]
        return source[start:end]
    if token.type == "image":
        return f"![{token.content}]({_target(token, 'src')})"
    return token.content  # inline HTML


def _target(token, name: str = "href") -> str:
    """A link or image target as markdown-it read it: the destination (in <> when it holds a
    space) and its title."""
    destination = str(token.attrs.get(name, ""))
    if " " in destination or not destination:
        destination = f"<{destination}>"
    title = token.attrs.get("title")
    if title:
        escaped = str(title).replace("\\", "\\\\").replace('"', '\\"')
        destination += f' "{escaped}"'
    return destination


@lru_cache(maxsize=1)
def parser():
    """CommonMark with GitHub's tables, strikethrough and footnotes (definitions left where
    they stand, no inline ``^[notes]``), recording where links, images and inline HTML stood
    in the source so they can be written back as written."""
    from markdown_it import MarkdownIt
    from markdown_it.rules_inline import html_inline, image
    from mdit_py_plugins.footnote import footnote_plugin

    md = MarkdownIt("commonmark").enable(["table", "strikethrough"]).use(footnote_plugin)
    md.disable(["footnote_tail", "footnote_inline"])
    md.inline.ruler.at("link", _link)
    md.inline.ruler.at("image", _spanned(image, "image"))
    md.inline.ruler.at("html_inline", _spanned(html_inline, "html_inline"))
    return md


def _spanned(rule, kind: str):
    """markdown-it's inline ``rule``, recording on the token it makes the span of the source
    it read (``meta["span"]``)."""

    def spanned(state, silent: bool) -> bool:
        start, count = state.pos, len(state.tokens)
        if not rule(state, silent):
            return False
        if not silent:
            made = next((t for t in state.tokens[count:] if t.type == kind), None)
            if made is not None:
                made.meta["span"] = (start, state.pos)
        return True

    return spanned


def _link(state, silent: bool) -> bool:
    """markdown-it's link rule, recording on ``link_open`` how the link closes as written:
    ``](target "title")`` or ``][ref]``; a collapsed or shortcut reference (whose label is its
    text, to be translated) closes as ``][text]``."""
    from markdown_it.rules_inline import link

    start, count = state.pos, len(state.tokens)
    if not link(state, silent):
        return False
    if not silent:
        text_end = state.md.helpers.parseLinkLabel(state, start, True)
        after = state.src[text_end + 1 : state.pos]
        if after in ("", "[]"):
            after = f"[{state.src[start + 1 : text_end]}]"
        after = after.replace("\n", " ")  # the paragraph is written on one line
        opening = next((t for t in state.tokens[count:] if t.type == "link_open"), None)
        if opening is not None and text_end >= 0:
            opening.meta["close"] = "]" + after
    return True
