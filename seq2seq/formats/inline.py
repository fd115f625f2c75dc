"""A document as text to translate and markup to keep, and the markup put back into the
translation where its words went. Pure text: no model, no HTTP.

Every format (plain text, HTML, Markdown, SRT) is parsed into a ``Document``: raw strings that
are kept byte for byte (tags between blocks, cue timings, code fences) and ``Segment``\\ s, the
units translated. A segment is the plain text the model reads plus its inline ``Markup``: a
``<b>`` or ``**`` around some of its words, a ``<code>``/`` `x` `` whose text is kept
literally, a ``<br>`` between two words.

Putting markup back (``render``) follows an alignment from each character of the translation to
the source characters it came from (the model's cross-attention, ``seq2seq.inference.documents``):
an element wraps the translated characters aligned into its source span. LibreTranslate
instead translates each text node alone, so "I like <b>green</b> tea." becomes three fragments
the model never saw as one sentence; here the sentence is translated whole and the tags
follow. Elements stay balanced, nested as they were and in their source order: each is placed
inside its parent's range and after its previous sibling, so the output is always well formed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

Span = tuple[int, int]  # [start, end) characters of a segment's text
Alignment = list["Span | None"]  # per character of a translation: the source span it came from


@dataclass
class Markup:
    """An inline element over characters ``[start, end)`` of its segment's text.

    ``open``/``close`` are written around the element's translated characters. With
    ``literal`` set, those characters are replaced by ``literal`` (code is kept as written);
    an element with ``start == end`` is a point (an image, a comment). An HTML ``<br>`` is a
    newline of the text with ``literal`` empty: the tag is written in place of the newline.
    """

    start: int
    end: int
    open: str
    close: str = ""
    literal: str | None = None
    children: list[Markup] = field(default_factory=list)
    verbatim: bool = False  # a verbatim span (seq2seq.formats.verbatim), not the format's own


def _no_escape(text: str) -> str:
    return text


@dataclass
class Segment:
    """One unit of a document to translate: ``text`` (what the model reads, sentence-split
    before decoding) and the markup over it; ``escape`` writes translated text in the format
    (``&`` as ``&amp;`` in HTML)."""

    text: str
    markup: list[Markup] = field(default_factory=list)
    escape: Callable[[str], str] = _no_escape
    keep_empty: bool = True  # write an element none of the translation was aligned to
    line: int = 1  # the 1-based line of the document the segment starts on (for warnings)

    def render(self, translation: str, alignment: Alignment) -> str:
        """``translation`` with this segment's markup put back; a format whose markers may
        not render where they land (Markdown emphasis beside Chinese) overrides it."""
        return render(self, translation, alignment)


Document = list["str | Segment"]


def rebuild(document: Document, rendered: list[str]) -> str:
    """The document with its segments, in order, replaced by ``rendered``."""
    outputs = iter(rendered)
    text = "".join(part if isinstance(part, str) else next(outputs) for part in document)
    if next(outputs, None) is not None:
        raise ValueError("more rendered segments than the document has")
    return text


def segments(document: Document) -> list[Segment]:
    return [part for part in document if isinstance(part, Segment)]


def render(segment: Segment, translation: str, alignment: Alignment) -> str:
    """``translation`` of ``segment`` with its markup put back (escaped for the format).

    Args:
        alignment: one source span (or None: aligned to nothing) per character of
            ``translation``.
    """
    if len(alignment) != len(translation):
        raise ValueError(f"{len(alignment)} aligned characters for {len(translation)}")
    placed = _place(segment.markup, alignment, 0, len(translation))
    return _write(placed, translation, 0, len(translation), segment)


@dataclass
class _Placed:
    markup: Markup
    start: int
    end: int
    children: list[_Placed]
    from_source: bool = False  # no character left for it: written with its source text


def _needs_text(markup: Markup) -> bool:
    """An element around words that are translated (not a point, not kept literally, not an
    element whose words are all verbatim spans: ``<a>ACCEPT_ALL_COOKIES</a>`` takes no
    translated character, it goes where its spans go)."""
    return markup.end > markup.start and markup.literal is None and not _all_verbatim(markup)


def _all_verbatim(markup: Markup) -> bool:
    """Whether verbatim spans (or elements of them) cover the element's characters end to end
    (``<span><span>ANY</span></span>``)."""
    position = markup.start
    for child in markup.children:
        if child.start != position or not (child.verbatim or _all_verbatim(child)):
            return False
        position = child.end
    return bool(markup.children) and position == markup.end


def _as_written(markup: Markup, tags: bool = True) -> str:
    """The inside of an element of verbatim spans (``_all_verbatim``): its spans, in their
    elements (``tags``) or alone (what a reader sees)."""
    parts = []
    for child in markup.children:
        if child.verbatim:
            parts.append(child.literal or "")
        else:
            inner = _as_written(child, tags)
            parts.append(child.open + inner + child.close if tags else inner)
    return "".join(parts)


def _place(markups: list[Markup], alignment: Alignment, low: int, high: int) -> list[_Placed]:
    """Target ranges for sibling elements within [low, high): each wraps the characters
    aligned into its source span, starts after its previous sibling and stays inside.

    No element around words comes back empty (a link with no text cannot be followed). The
    rule, in order: the characters aligned into its words, after its previous sibling; else
    those of the source word nearest to its words (``_nearest``); else one character where
    its words would go. Each element leaves one character for every later sibling that needs
    one. When nothing is left at all (a translation shorter than its elements), the element
    is written with its source text, untranslated, its own markup inside it.
    """
    placed, cursor = [], low
    needs = [_needs_text(markup) for markup in markups]
    for index, markup in enumerate(markups):
        limit = max(cursor, high - sum(needs[index + 1 :]))  # room kept for later siblings
        if needs[index]:
            found = _text_range(markup, alignment, cursor, limit)
            if found is None:
                placed.append(_Placed(markup, cursor, cursor, [], from_source=True))
                continue
            start, end = found
        else:
            hits = [j for j in range(low, high) if _inside(alignment[j], markup)]
            moved = _moved(markup, hits, placed, cursor)
            if moved is not None:
                placed.append(_Placed(markup, *moved, []))
                continue
            if hits and markup.end > markup.start:  # literal: in place of the words it was
                start = min(max(hits[0], cursor), limit)
                end = min(max(hits[-1] + 1, start), limit)
            else:  # a point (<br>, an image)
                point = _insertion_point(markup, alignment, low, high)
                start = end = min(max(point, cursor), limit)
        children = _place(markup.children, alignment, start, end)
        placed.append(_Placed(markup, start, end, children))
        cursor = end
    return sorted(placed, key=lambda item: item.start)  # in order but for _moved spans


def _moved(
    markup: Markup, hits: list[int], placed: list[_Placed], cursor: int
) -> tuple[int, int] | None:
    """Where a verbatim span goes that the translation put before a sibling it followed in
    the source (Chinese orders words its own way: ``the CEO of NASA`` -> ``NASA的CEO``): its
    aligned characters, where no placed sibling holds any of them (it has no children to
    keep in order). None: placed by the rule every literal follows."""
    if not markup.verbatim or not hits or hits[0] >= cursor:
        return None
    start, end = hits[0], hits[-1] + 1
    if any(item.start < end and start < item.end for item in placed):
        return None
    return start, end


def _text_range(
    markup: Markup, alignment: Alignment, cursor: int, limit: int
) -> tuple[int, int] | None:
    """The non-empty range [start, end) within [cursor, limit) an element around words wraps
    (``_place``'s rule), or None when that range holds no character."""
    if cursor >= limit:
        return None
    hits = [j for j in range(cursor, limit) if _inside(alignment[j], markup)]
    if not hits:
        hits = _nearest(markup, alignment, cursor, limit)
    if hits:
        return hits[0], hits[-1] + 1
    start = min(max(_insertion_point(markup, alignment, cursor, limit), cursor), limit - 1)
    return start, start + 1


def _inside(span: Span | None, markup: Markup) -> bool:
    return span is not None and span[0] < markup.end and markup.start < span[1]


def _nearest(markup: Markup, alignment: Alignment, low: int, high: int) -> list[int]:
    """When attention put no character into the element's words (a short word the model
    translated into its neighbour, or not at all), the characters from the source word
    nearest to them."""
    best, distance = None, None
    for j in range(low, high):
        span = alignment[j]
        if span is None:
            continue
        gap = max(markup.start - span[1] + 1, span[0] - markup.end + 1, 0)
        if distance is None or gap < distance:
            best, distance = span, gap
    return [j for j in range(low, high) if best is not None and alignment[j] == best]


def _insertion_point(markup: Markup, alignment: Alignment, low: int, high: int) -> int:
    """Where an element with no aligned characters goes: after the last character that came
    from before it in the source."""
    point = low
    for j in range(low, high):
        span = alignment[j]
        if span is not None and span[1] <= markup.start:
            point = j + 1
    return point


def _write(placed: list[_Placed], text: str, low: int, high: int, segment: Segment) -> str:
    parts, cursor, previous, before = [], low, None, None
    starts = [item.start for item in placed[1:]] + [high] * bool(placed)  # each next one's
    for item, next_start in zip(placed, starts, strict=True):
        between = text[cursor : item.start]
        if not between and _glued(previous, item.markup):
            between = segment.text[previous.end : item.markup.start]  # as written in the source
            if previous.verbatim or item.markup.verbatim:  # "REST API", "NASA CEO"; no English
                between = " "
        elif not between and before is not None and _words_meet(before, item, text, segment):
            between = " "
        parts.append(segment.escape(between))
        markup = item.markup
        kept = markup.verbatim or _all_verbatim(markup)  # written as in the source
        pre = post = ""
        if kept:  # apart from the text around it (from elements: _words_meet)
            after = text[item.end] if item.end < next_start else ""
            pre, post = _apart(item, text, segment, between[-1:], after)
        if markup.literal == "":  # a line break in place of its newline; other text stays
            inner = segment.escape(text[item.start : item.end].replace("\n", ""))
        elif markup.verbatim:
            inner = markup.literal or ""
        elif kept:  # its words are its spans: in place of its characters
            inner = _as_written(markup)
        elif markup.literal is not None:
            inner = markup.literal
        elif item.from_source:
            inner = _from_source(markup, segment)
        else:
            inner = _write(item.children, text, item.start, item.end, segment)
        emptied = item.start == item.end and markup.start < markup.end and not inner
        if not emptied or segment.keep_empty:  # Markdown: an empty ** would show as text
            parts.append(pre + markup.open + inner + markup.close + post)
        cursor, previous, before = item.end, markup, item
    parts.append(segment.escape(text[cursor:high]))
    return "".join(parts)


def _words_meet(before: _Placed, item: _Placed, text: str, segment: Segment) -> bool:
    """Two elements side by side that something separated in the source, one of them showing
    a verbatim span at the edge where they meet, both showing a letter or digit there
    (``<a>ACCEPT_ALL_COOKIES</a> <a>ALERTSECS</a>``, ``libxml2 ... <a>RexxXML</a>``): run
    together, they would read as one word."""
    if before.markup.end == item.markup.start:  # written together in the source
        return False
    last, last_verbatim = _edge(before, text, segment, first=False)
    first, first_verbatim = _edge(item, text, segment, first=True)
    latin = all(is_latin(c) for c in (last, first))
    return latin and (last_verbatim or first_verbatim)


def _edge(item: _Placed, text: str, segment: Segment, first: bool) -> tuple[str, bool]:
    """The first (or last) character a reader sees of a placed element, and whether it is a
    verbatim span's ("" when it shows nothing)."""
    markup = item.markup
    if markup.literal:
        return (markup.literal[0] if first else markup.literal[-1]), markup.verbatim
    if _all_verbatim(markup):
        shown = _as_written(markup, tags=False)
        return (shown[:1] if first else shown[-1:]), True
    if item.from_source:  # written as in the source, its verbatim spans with it
        source = segment.text[markup.start : markup.end]
        return (source[:1] if first else source[-1:]), _holds_verbatim(markup)
    if item.start == item.end:  # a point, or an element that shows nothing
        return "", False
    child = item.children[0 if first else -1] if item.children else None
    if child is not None and (child.start == item.start if first else child.end == item.end):
        return _edge(child, text, segment, first)
    return (text[item.start : item.start + 1] if first else text[item.end - 1 : item.end]), False


def _apart(item: _Placed, text: str, segment: Segment, before: str, after: str) -> tuple[str, str]:
    """The spaces that set a verbatim span (or an element of them) off from letters or digits
    written against it, ``before`` and ``after`` it (``请2231/12/2024225日``): a span glued
    to them would read as another number or word. None where the source has the very same
    character against it, in either case (``100th`` left in English stays ``100th``)."""
    first, _ = _edge(item, text, segment, first=True)
    last, _ = _edge(item, text, segment, first=False)
    start, end = item.markup.start, item.markup.end
    glued_before = start > 0 and segment.text[start - 1].lower() == before.lower()
    glued_after = segment.text[end : end + 1].lower() == after.lower()
    return (
        " " if is_latin(first) and is_latin(before) and not glued_before else "",
        " " if is_latin(last) and is_latin(after) and not glued_after else "",
    )


def is_latin(char: str) -> bool:
    """Whether ``char`` is an ASCII letter or digit (what a span must not be glued to)."""
    return char.isascii() and char.isalnum()


def _holds_verbatim(markup: Markup) -> bool:
    return markup.verbatim or any(_holds_verbatim(child) for child in markup.children)


def _glued(previous: Markup | None, markup: Markup) -> bool:
    """Two literal elements (code spans) that something separated in the source and nothing
    separates in the translation: `` `async` / `await` `` must not become one span."""
    return (
        previous is not None
        and bool(previous.literal)  # not a <br>, whose literal is nothing
        and bool(markup.literal)
        and previous.end < markup.start
    )


def _from_source(markup: Markup, segment: Segment) -> str:
    """The inside of an element no translated character was left for: its source words as
    written, its child elements around their own words."""
    identity: Alignment = [(j, j + 1) for j in range(len(segment.text))]
    children = _place(markup.children, identity, markup.start, markup.end)
    return _write(children, segment.text, markup.start, markup.end, segment)


def monotonic_alignment(source_length: int, target_length: int) -> Alignment:
    """Target character j from source character ``j * source / target``: the alignment used
    where the engine gives no attention (CTranslate2), right for monotone sentences."""
    if not source_length:
        return [None] * target_length
    spans: Alignment = []
    for j in range(target_length):
        position = min(source_length - 1, (j * source_length) // max(1, target_length))
        spans.append((position, position + 1))
    return spans


def has_text(segment: Segment) -> bool:
    """Whether the segment has anything to translate: text outside its literal markup."""
    kept = [False] * len(segment.text)
    stack = list(segment.markup)
    while stack:
        markup = stack.pop()
        if markup.literal is not None:
            kept[markup.start : markup.end] = [True] * (markup.end - markup.start)
        stack += markup.children
    return any(not k and not c.isspace() for k, c in zip(kept, segment.text, strict=True))


def shift(markups: list[Markup], by: int, length: int) -> None:
    """Markup offsets moved by ``by`` (the white space cut from a text's start, by the formats
    that strip it), kept inside [0, length]."""
    for markup in markups:
        markup.start = min(max(0, markup.start + by), length)
        markup.end = min(max(0, markup.end + by), length)
        shift(markup.children, by, length)
