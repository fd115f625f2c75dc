"""The ``verbatim`` bench's counts: the spans of a document's running text that must come through a
translation exactly (URLs, e-mail addresses, numbers, versions, identifiers, placeholders,
acronyms), and how many of them its translation holds.

Pure functions of the two texts, with definitions of their own: no ``seq2seq`` import, so the
translator's detector (``seq2seq.formats.verbatim``) is measured against an independent one,
written from the issue's list rather than from the code under test.

Running text: what a reader reads as prose. HTML: text outside ``script``, ``style``, ``pre``,
``code``, ``kbd``, ``samp``, ``tt``, ``var``, ``textarea`` (attributes, link targets included,
are not text); Markdown: markdown-it's text tokens, outside code spans, autolinks, images and
inline HTML; SubRip: the cues' text without tags.

Kinds (the first that matches a stretch of text takes it; later kinds skip what it covers):

    url          scheme:// or www. addresses
    email        name@domain.tld
    version      1.2.3, v2.0 (two dots, or a v)
    number       digits with separators, decimals, sign, %, currency, attached units; dates
                 and times (2024-05-01, 10:30) count here
    placeholder  %s, %(name)s, {0}, {name}, ${VAR}
    identifier   camelCase, snake_case, dotted.names (two letters a part), names with digits,
                 --flags
    acronym      two capitals or more (digits allowed), in a line not written in capitals

A span is kept when the output's running text holds it, whole (not inside a longer run of
letters and digits), as often as the input's does.
"""

from __future__ import annotations

import re
from collections import Counter
from html.parser import HTMLParser

KINDS = ("url", "email", "version", "number", "placeholder", "identifier", "acronym")
_RULES = [
    ("url", r"\b(?:https?|ftp)://[^\s<>\"')\]]*[^\s<>\"'.,;:!?)\]]|\bwww\.[\w.-]+\.[a-z]{2,}\S*\w"),
    ("email", r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}\b"),
    ("version", r"\bv?\d+\.\d+\.\d+(?:[-+.]\w+)*\b|\bv\d+(?:\.\d+)+\b"),
    ("number", r"(?<![\w.])[-+]?[$€£]?\d+(?:[,.:/-]\d+)*(?:%|[A-Za-z]{1,3}\b)?"),
    ("placeholder", r"%\(\w+\)[sdrf]|(?<!\w)%[-+0-9.]*[sdifxr]\b|\$\{\w+\}|\{\w*\}"),
    (
        "identifier",
        r"\b[a-z]+(?:[A-Z][a-z0-9]*)+\b|\b[A-Z][a-z]+(?:[A-Z][a-z0-9]*)+\b"  # camelCase
        r"|\b\w*[A-Za-z]\w*_\w+\b"  # snake_case
        r"|\b[A-Za-z_]{2,}\w*(?:\.[A-Za-z_]{2,}\w*)+\b"  # dotted.names
        r"|\b[A-Za-z]+\d+\w*\b"  # names with digits
        r"|(?<![\w-])--\w[\w-]*",  # --flags
    ),
    ("acronym", r"\b[A-Z]{2,}\d*s?\b"),
]
_COMPILED = [(kind, re.compile(pattern)) for kind, pattern in _RULES]
# Tags a browser starts a new line at: their text is not run into the text before them.
_BLOCKS = frozenset(
    "address article aside blockquote body br caption dd div dl dt fieldset figcaption figure "
    "footer form h1 h2 h3 h4 h5 h6 head header hr html li main nav ol p section table tbody "
    "td tfoot th thead title tr ul".split()
)
_SKIPPED = frozenset("script style pre code kbd samp tt var textarea svg math template".split())


def spans(text: str) -> list[tuple[str, str]]:
    """(kind, span) of each verbatim span of ``text``, in order of kind then position."""
    found = []
    for line in text.split("\n"):
        letters = re.findall(r"[A-Za-z]", line)
        shouted = len(letters) > 3 and all(c.isupper() for c in letters)
        taken = [False] * len(line)
        for kind, pattern in _COMPILED:
            if kind == "acronym" and shouted:
                continue
            for match in pattern.finditer(line):
                start, end = match.span()
                if end > start and not any(taken[start:end]):
                    taken[start:end] = [True] * (end - start)
                    found.append((kind, match.group()))
    return found


# The test of seq2seq.formats.verbatim_placement._whole_copies, written again on purpose: the
# counts import nothing of the translator they measure.
def occurrences(span: str, text: str) -> int:
    """How often ``text`` holds ``span`` whole: not inside a longer run of ASCII letters and
    digits."""
    count = 0
    for match in re.finditer(re.escape(span), text):
        start, end = match.span()
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        inside = (span[0].isalnum() and before.isascii() and before.isalnum()) or (
            span[-1].isalnum() and after.isascii() and after.isalnum()
        )
        count += not inside
    return count


def kept(source: str, output: str) -> dict[str, list[int]]:
    """Per kind: [spans in ``source``, spans ``output`` holds as often as ``source`` does]."""
    counts = {kind: [0, 0] for kind in KINDS}
    for (kind, span), times in Counter(spans(source)).items():
        counts[kind][0] += times
        counts[kind][1] += min(times, occurrences(span, output))
    return counts


def lost_spans(source: str, output: str) -> list[tuple[str, str]]:
    """The (kind, span) pairs of ``source`` that ``output`` lacks (once per missing copy)."""
    missing = []
    for (kind, span), times in Counter(spans(source)).items():
        missing += [(kind, span)] * max(0, times - occurrences(span, output))
    return missing


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipped = 0

    def handle_starttag(self, tag, attrs):
        if tag in _SKIPPED:
            self.skipped += 1
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in _SKIPPED and self.skipped:
            self.skipped -= 1
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data):
        if not self.skipped:
            self.parts.append(data)


def html_text(text: str) -> str:
    reader = _Text()
    reader.feed(text)
    reader.close()
    return "".join(reader.parts)


def markdown_text(text: str) -> str:
    from markdown_it import MarkdownIt

    parts = []
    for token in MarkdownIt("commonmark").enable("table").parse(text):
        if token.type == "html_block":
            parts.append(html_text(token.content))
        if token.type != "inline":
            continue
        autolink = False
        for child in token.children or []:
            if child.type == "link_open":
                autolink = child.markup == "autolink"
            elif child.type == "link_close":
                autolink = False
            elif child.type == "text" and not autolink:
                parts.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                parts.append(" ")
        parts.append("\n")
    return "".join(parts)


_TIMING = re.compile(r"^\s*\d{1,2}:\d{2}:\d{2}[,.]\d{1,3}\s*-->.*$", re.M)


def srt_text(text: str) -> str:
    lines = [
        line
        for line in _TIMING.sub("", text).splitlines()
        if line.strip() and not line.strip().isdigit()
    ]
    return re.sub(r"<[^>]+>|\{\\[^}]*\}", "", "\n".join(lines))


def running_text(text: str, format: str) -> str:
    """The running text of a document in ``format`` (html, markdown, srt)."""
    reader = {"html": html_text, "markdown": markdown_text, "srt": srt_text}[format]
    return reader(text)
