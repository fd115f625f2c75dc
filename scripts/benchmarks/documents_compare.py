"""``documents-wild``'s comparisons: what a reader loses between a document (HTML, Markdown,
SubRip) and its translation, counted on the bytes of both files. Each count is defined in
``benchmarks/documents_wild.py``'s docstring. Pure functions of the two files:
no model and no ``seq2seq`` import, so any version of the translator is measured the same way
(the standard library's ``html.parser`` and markdown-it-py parse both sides).
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from html.parser import HTMLParser

from benchmarks.documents_encodings import (
    decode_input,
    decode_output,
    encoding_mistakes,
    input_codec,
)

# The formats compared, by extension: as seq2seq.formats.EXTENSIONS names them, written again
# here because this module imports nothing of the translator it measures.
_EXTENSIONS = {"html": ".html .htm .xhtml", "markdown": ".md .markdown", "srt": ".srt"}
FORMATS = {ext: name for name, exts in _EXTENSIONS.items() for ext in exts.split()}
# Inline elements whose text a reader sees (void ones, br/img/wbr, hold none).
INLINE = frozenset(
    "a abbr b bdi bdo big cite code data del dfn em font i ins kbd label mark q s samp small "
    "span strike strong sub sup time tt u var".split()
)
VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
CODE = frozenset("code tt kbd var".split())
# Text the translator leaves as written: not counted as words to translate.
UNTRANSLATED = frozenset("script style pre code textarea svg math template kbd samp".split())
_TIMING = re.compile(
    r"\s*(\d{1,2}:\d{2}:\d{2}[,.]\d{1,3}\s*-->\s*\d{1,2}:\d{2}:\d{2}[,.]\d{1,3}.*)"
)
_FRONT = re.compile(r"\A(---|\+\+\+)[ \t]*\r?\n.*?\r?\n(?:\1|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
_FOOTNOTE_REF = re.compile(r"\[\^[^\]\s]+\](?!:)")
_FOOTNOTE_DEF = re.compile(r"(?m)^ {0,3}\[\^[^\]\s]+\]:")
_TASK = re.compile(r"\A\[[ xX]\](?=\s|\Z)")


# --- HTML ------------------------------------------------------------------------------------


@dataclass
class Element:
    """An inline element (Markdown: link, em, strong, s) and the text inside it."""

    tag: str
    text: str = ""


class _Reader(HTMLParser):
    """One pass over an HTML text: its inline elements with the text inside them, its tag
    events, its link targets and its words outside untranslated elements."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []  # inline elements, in the order they open
        self.open: list[Element] = []
        self.events: list[tuple] = []
        self.targets: list[str] = []
        self.words = 0
        self.untranslated = 0  # depth inside untranslated elements

    def handle_starttag(self, tag, attrs):
        self._tag(tag, attrs, closed=False)

    def handle_startendtag(self, tag, attrs):
        self._tag(tag, attrs, closed=True)

    def _tag(self, tag: str, attrs, closed: bool) -> None:
        values = dict(attrs)
        self.events.append(("<" + tag, _without_charset(tag, attrs), closed))
        if tag == "a" and values.get("href") is not None:
            self.targets.append(values["href"] or "")
        if tag == "img" and values.get("src") is not None:
            self.targets.append(values["src"] or "")
        if tag in INLINE:
            element = Element(tag)
            self.elements.append(element)
            if not closed:
                self.open.append(element)
        elif tag not in VOID and not closed:
            self.open.clear()  # a block starts: inline elements left open end here
        if tag in UNTRANSLATED and not closed:
            self.untranslated += 1

    def handle_endtag(self, tag):
        self.events.append(("</" + tag,))
        if tag in UNTRANSLATED and self.untranslated:
            self.untranslated -= 1
        tags = [element.tag for element in self.open]
        if tag in tags:
            index = len(tags) - 1 - tags[::-1].index(tag)
            del self.open[index:]
        elif tag not in INLINE and tag not in VOID:
            self.open.clear()

    def handle_data(self, data):
        for element in self.open:
            element.text += data
        if not self.untranslated:
            self.words += len(data.split())


def _without_charset(tag: str, attrs) -> tuple:
    """A tag's attributes with a ``<meta>``'s charset label left out: a translation written
    in UTF-8 says so there (``encoding_mistakes`` checks what it says)."""
    if tag != "meta":
        return tuple(attrs)
    return tuple(
        (name, _CHARSET_LABEL.sub("charset=*", value) if value else value)
        if name in ("charset", "content")
        else (name, value)
        for name, value in attrs
        if name != "charset"
    ) + (("charset", "*"),) * any(name == "charset" for name, _ in attrs)


_CHARSET_LABEL = re.compile(r"charset\s*=\s*[A-Za-z0-9_.:-]+", re.I)
_HTML_EMPHASIS = re.compile(r"<(/?)(em|strong|del|s)>", re.I)


def read_html(text: str) -> _Reader:
    reader = _Reader()
    reader.feed(text)
    reader.close()
    return reader


# --- Markdown --------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def markdown_parser():
    """CommonMark with tables, strikethrough and footnotes, as GitHub-flavoured readers render
    (without footnotes, a definition ``[^1]: 注释`` with no space in it reads as a link
    reference definition: its text would vanish)."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.footnote import footnote_plugin

    return MarkdownIt("commonmark").enable("table").enable("strikethrough").use(footnote_plugin)


@dataclass
class MarkdownFacts:
    """What ``read_markdown`` finds in a Markdown text."""

    targets: list[str] = field(default_factory=list)
    elements: list[Element] = field(default_factory=list)
    code: list[str] = field(default_factory=list)
    emphasis: Counter = field(default_factory=Counter)
    notes: Counter = field(default_factory=Counter)
    words: int = 0


_PAIRS = {"link_open": "link", "em_open": "em", "strong_open": "strong", "s_open": "s"}


def read_markdown(text: str) -> MarkdownFacts:
    """Links, inline elements, code spans, emphasis, footnotes and task markers of a Markdown
    text, as markdown-it reads it (``markdown_parser``)."""
    facts = MarkdownFacts()
    env: dict = {}
    tokens = markdown_parser().parse(text, env)
    item_starts = False
    for token in tokens:
        if token.type == "html_block":
            facts.targets += read_html(token.content).targets
        if token.type == "list_item_open":
            item_starts = True
            continue
        if token.type != "inline":
            if token.type != "paragraph_open":
                item_starts = False
            continue
        content = _CODE_SPAN.sub("", token.content)
        facts.notes["footnote refs"] += len(_FOOTNOTE_REF.findall(content))
        facts.notes["footnote defs"] += len(_FOOTNOTE_DEF.findall(content))
        facts.notes["task markers"] += bool(item_starts and _TASK.match(content))
        item_starts = False
        _read_inline(token.children or [], facts)
    # Definitions [^x]: as the footnote plugin reads them (referenced or not).
    facts.notes["footnote defs"] += len(env.get("footnotes", {}).get("refs", {}))
    return facts


def _read_inline(children, facts: MarkdownFacts) -> None:
    open_: list[Element] = []
    for child in children:
        kind = child.type
        if kind in _PAIRS:
            element = Element(_PAIRS[kind])
            facts.elements.append(element)
            open_.append(element)
            if kind == "link_open":
                facts.targets.append(str(child.attrs.get("href", "")))
            else:
                facts.emphasis[_PAIRS[kind]] += 1
        elif kind.endswith("_close") and open_:
            open_.pop()
        elif kind in ("text", "code_inline", "image"):
            for element in open_:
                element.text += child.content
            if kind == "image":
                facts.targets.append(str(child.attrs.get("src", "")))
            elif kind == "code_inline":
                facts.code.append(child.content)
            else:
                facts.words += len(child.content.split())
        elif kind == "html_inline" and (tag := _HTML_EMPHASIS.fullmatch(child.content)):
            _html_emphasis(tag, open_, facts)  # <em> renders as *...* does
        elif kind == "html_inline":
            facts.targets += read_html(child.content).targets


def _html_emphasis(tag: re.Match, open_: list[Element], facts: MarkdownFacts) -> None:
    name = {"del": "s"}.get(tag.group(2).lower(), tag.group(2).lower())
    if tag.group(1):  # a closing tag
        if open_ and open_[-1].tag == name:
            open_.pop()
        return
    element = Element(name)
    facts.elements.append(element)
    open_.append(element)
    facts.emphasis[name] += 1


def front_matter(text: str) -> str | None:
    """A YAML (``---``) or TOML (``+++``) block at the very top, as written."""
    match = _FRONT.match(text)
    return match.group(0) if match else None


# --- SubRip ----------------------------------------------------------------------------------


@dataclass
class Cue:
    number: str | None
    timing: str
    text: str


def read_srt(text: str) -> list[Cue]:
    """The cues of an SRT text: each timing line, the number line just above it (if any) and
    the lines below it up to a blank line or the next cue."""
    lines = text.splitlines()
    cues: list[Cue] = []
    body: list[str] = []
    for line in lines:
        match = _TIMING.fullmatch(line)
        if not match:
            body.append(line)
            continue
        number = None
        if body and body[-1].strip().isdigit():
            number = body.pop().strip()
        if cues:
            cues[-1].text = _cue_text(body)
        body = []
        cues.append(Cue(number, " ".join(match.group(1).split()), ""))
    if cues:
        cues[-1].text = _cue_text(body)
    return cues


def _cue_text(lines: list[str]) -> str:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    text = []
    for line in lines:
        if not line.strip():
            break
        text.append(line.strip())
    return "\n".join(text)


# --- The comparison --------------------------------------------------------------------------


@dataclass
class Facts:
    """What one document holds, for the counts (what its format has not stays empty)."""

    fffd: int
    words: int
    targets: Counter
    elements: list[Element]
    code: Counter = field(default_factory=Counter)
    emphasis: Counter = field(default_factory=Counter)
    notes: Counter = field(default_factory=Counter)
    front_matter: str | None = None
    structure: list = field(default_factory=list)  # HTML tag events, SRT (number, timing)


def facts(text: str, format: str) -> Facts:
    """``text`` (decoded) read as ``format``."""
    fffd = text.count("\ufffd")
    if format == "markdown":
        md = read_markdown(text)
        targets, code = Counter(md.targets), Counter(md.code)
        return Facts(
            fffd, md.words, targets, md.elements, code, md.emphasis, md.notes, front_matter(text)
        )
    if format == "srt":
        cues = read_srt(text)
        readers = [read_html(cue.text) for cue in cues]
        elements = [element for reader in readers for element in reader.elements]
        structure = [(cue.number, cue.timing) for cue in cues]
        words = sum(reader.words for reader in readers)
        return Facts(fffd, words, Counter(), elements, structure=structure)
    reader = read_html(text)
    code = Counter(" ".join(e.text.split()) for e in reader.elements if e.tag in CODE)
    return Facts(
        fffd, reader.words, Counter(reader.targets), reader.elements, code, structure=reader.events
    )


def lost(before: Counter, after: Counter) -> int:
    """Items of ``before`` (a multiset) missing from ``after``."""
    return sum((before - after).values())


def emptied(before: list[Element], after: list[Element]) -> tuple[int, int]:
    """(inline elements with non-white-space text in ``before`` whose partner in ``after`` has
    none or is missing, elements with text in ``before``): the k-th element of a tag in
    ``before`` is paired with the k-th element of that tag in ``after``."""
    by_tag: dict[str, list[Element]] = {}
    for element in after:
        by_tag.setdefault(element.tag, []).append(element)
    seen: Counter = Counter()
    count = with_text = 0
    for element in before:
        k = seen[element.tag]
        seen[element.tag] += 1
        if not element.text.strip():
            continue
        with_text += 1
        partners = by_tag.get(element.tag, [])
        if k >= len(partners) or not partners[k].text.strip():
            count += 1
    return count, with_text


def changed(before: list, after: list) -> int:
    """Items inserted, deleted or replaced between two sequences (``difflib`` opcodes, a
    replacement of m items by n counting max(m, n))."""
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    return sum(
        max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"
    )


@dataclass
class Comparison:
    """The counts of one (input, output) pair; None where the format has no such thing."""

    links: int
    links_lost: int
    inline_with_text: int
    inline_emptied: int
    code: int | None
    code_out: int | None
    code_lost: int | None
    emphasis: int | None
    emphasis_out: int | None
    emphasis_lost: int | None
    front_matter_changed: bool | None  # None: the input has none
    notes: int | None  # footnote references and definitions, task-list markers
    notes_lost: int | None
    fffd_added: int
    encoding: list[str]
    structure: int | None  # HTML tag events, SRT cues
    structure_changed: int | None


def compare(raw_in: bytes, raw_out: bytes, format: str, encoding: str | None = None) -> Comparison:
    """Counts what the output ``raw_out`` lost of the input ``raw_in`` (``format``: html,
    markdown or srt; ``encoding``: the input's, when known)."""
    codec = input_codec(raw_in, format, encoding)
    a = facts(decode_input(raw_in, format, encoding), format)
    b = facts(decode_output(raw_out, format, codec), format)
    emptied_count, with_text = emptied(a.elements, b.elements)
    markdown, srt = format == "markdown", format == "srt"
    fm_changed = None if a.front_matter is None else a.front_matter != b.front_matter
    return Comparison(
        links=sum(a.targets.values()),
        links_lost=lost(a.targets, b.targets),
        inline_with_text=with_text,
        inline_emptied=emptied_count,
        code=None if srt else sum(a.code.values()),
        code_out=None if srt else sum(b.code.values()),
        code_lost=None if srt else lost(a.code, b.code),
        emphasis=sum(a.emphasis.values()) if markdown else None,
        emphasis_out=sum(b.emphasis.values()) if markdown else None,
        emphasis_lost=lost(a.emphasis, b.emphasis) if markdown else None,
        front_matter_changed=fm_changed if markdown else None,
        notes=sum(a.notes.values()) if markdown else None,
        notes_lost=lost(a.notes, b.notes) if markdown else None,
        fffd_added=b.fffd - a.fffd,
        encoding=encoding_mistakes(raw_in, raw_out, format, codec),
        structure=None if markdown else len(a.structure),
        structure_changed=None if markdown else changed(a.structure, b.structure),
    )


def words(raw: bytes, format: str, encoding: str | None = None) -> int:
    """English words to translate: white-space separated words of the text outside
    untranslated elements (HTML), of markdown-it's text tokens (Markdown), of the cues' text
    without tags (SRT)."""
    return facts(decode_input(raw, format, encoding), format).words
