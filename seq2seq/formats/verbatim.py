"""Verbatim spans: what a translation must carry through exactly as written. Pure text: no model.

URLs, e-mail addresses, file paths, numbers, versions, dates and times, identifiers, ``--flags``,
format placeholders and acronyms mean the same in Chinese as in English: a translation that
changes one (``Install version 3.2.7`` -> 在77点) is worse than none. ``Verbatim.spans`` finds
them in a text; ``protect`` marks each with literal markup (``inline.Markup.literal``), the
mechanism that keeps a ``<code>`` element as written: the characters of the translation aligned
into the span's source characters are replaced by the span, and a span no character was aligned
to is written where its neighbours went, so every span comes through once, exactly. The model
still reads the span (it gives the sentence its sense and its place).

The kinds, in the order they win a tie (the longest match wins first, so a URL holding a number
is one URL; spans never overlap):

    url          https://x.org/a?b=1, www.x.org, github.com/x/y (a known top-level domain)
    email        info@shop.example
    path         /usr/bin/env, ~/.config, ./run.sh, C:\\Users\\me, docs/guide.md
    date         2024-05-01 (with a time: 2024-05-01T10:30:00Z), 01/05/2024, 1.5.2024
    address      2001:db8::1 (IPv6), 00:1A:2B:3C:4D:5E (MAC); an IPv4 address reads as a version
    time         10:30, 10:30:15 (am/pm are translated)
    version      3.2.7, v1.0, 1.0.0-beta.1
    number       4,380.25, -5, +3.5, $4.99, 45%, 3/4, 5-10, 200km, 5GB, -5°C, 20m², 1½ (an
                 ordinal's digits: 21st)
    placeholder  %s, %5.2f, %(name)s, {0}, {name}, {{ name }}, ${VAR}, $HOME, %count% (Symfony,
                 and Windows' %PATH%)
    flag         --max-tokens, --beam-size=5, -v
    shortcut     Ctrl+C, Ctrl+Shift+T, Cmd-S, Alt+F4
    identifier   camelCase, PascalCase with inner capitals, snake_case, dotted.names, calls(),
                 names with digits (utf8, x86_64, HTTP2), UTF-8, COVID-19, codes (ABC-123-XYZ),
                 UUIDs and hexadecimal hashes (3f2a9c1e), C++, C#, .NET, HTTP/2, TCP/IP,
                 mentions and tags (@alice, @types/node, #release), issue numbers (#42), H.264
    acronym      API, HTTP, TLS, APIs: two capitals or more, not in a SHOUTED sentence (there
                 the truecaser decides, ``seq2seq.data.truecase``), not a Roman numeral, and
                 not one Chinese writes as a word (``TRANSLATED_ACRONYMS``: TV, UK, USA, ...)

``Verbatim(terms, patterns)`` adds a user's own: terms matched as written (case-sensitive, whole
words), ``re`` patterns; ``Verbatim.read`` reads them from a file (one term or ``re:PATTERN`` a
line, ``#`` comments), naming the file and line of a bad one.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from seq2seq.data.truecase import ACRONYM_LETTERS, Truecaser, is_shouted
from seq2seq.errors import DataError
from seq2seq.formats.inline import Document, Markup, Segment
from seq2seq.textio import read_text, split_lines

_TLD = "com|org|net|io|dev|edu|gov|info|app|ai|co|us|uk|de|fr|cn|jp|me|sh|rs|ly|so|tv|py"
# 200km, 5GB, -5°C, 90°, 37℃; not 21st, not 1990s
_UNIT = r"(?:°(?:[CFK](?![A-Za-z]))?|[℃℉]|(?!(?:st|nd|rd|th|s)\b)[A-Za-z]{1,4}(?:[²³](?!\w)|\b))"
_MODIFIER = r"(?i:ctrl|control|alt|shift|cmd|command|option|opt|win|super|meta|fn)"
_NUMBER = (
    r"(?<![\w$€£¥₹])[-+−±]?[$€£¥₹]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[-/–]\d+(?:\.\d+)?)*"
    r"(?:%|" + _UNIT + r"|(?=(?:st|nd|rd|th)\b)|(?!\w))"
    r"|(?<![\w$€£¥₹])\d*[½⅓⅔¼¾⅕⅖⅗⅘⅙⅚⅛⅜⅝⅞](?!\w)"  # 1½, ¾
)
# (kind, pattern): what each kind matches; ``spans`` takes the longest, then the earliest kind.
_PATTERNS: list[tuple[str, str]] = [
    (
        "url",
        r"\b(?:(?:https?|ftp|file|ssh|git|s3)://|mailto:|www\.)[^\s<>\"'`]*[^\s<>\"'`.,;:!?)\]}]"
        rf"|\b(?:[a-z0-9-]+\.)+(?:{_TLD})(?:/[^\s<>\"'`]*[^\s<>\"'`.,;:!?)\]}}])?(?![\w.-])",
    ),
    ("email", r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"),
    (
        "date",
        r"\b\d{4}-\d{1,2}-\d{1,2}(?:T\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"
        r"|\b\d{1,2}([/.])\d{1,2}\1\d{2,4}\b",
    ),
    (
        "path",
        r"(?<![\w/.~])(?:~|\.{1,2})?/(?:[\w.@%+-]+/)*[\w.@%+-]*\w/?"
        r"|\b[A-Za-z]:\\(?:[\w .-]+\\)*[\w.-]*\w"
        r"|\b[\w.-]+(?:/[\w.-]+)+\.[A-Za-z]\w{0,4}\b"
        r"|\b(?=[\w./-]*[A-Za-z])[\w.-]+(?:/[\w.-]*\w){2,}/?",
    ),
    (
        "address",  # IPv6 (2001:db8::1, with "::" or all eight groups) and MAC addresses
        r"(?<![\w:])(?=[:]*[0-9A-Fa-f])(?=[0-9A-Fa-f:]*::|(?:[0-9A-Fa-f]{1,4}:){7})[0-9A-Fa-f]{0,4}"
        r"(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:])"
        r"|\b[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(?:\1[0-9A-Fa-f]{2}){4}\b",
    ),
    ("time", r"\b\d{1,2}:\d{2}(?::\d{2})?\b"),
    ("version", r"(?<![\w.])v?\d+(?:\.\d+){2,3}(?:-[0-9A-Za-z]+(?:\.\d+)?)?\b|\bv\d+(?:\.\d+)*\b"),
    ("number", _NUMBER),
    (
        "placeholder",
        r"(?<![\w%])%(?:\d+\$)?(?:\([\w.]+\))?[-+#0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?[hlLqjzt]*"
        r"[diouxXeEfFgGcrsaAp](?![A-Za-z])|%%"
        r"|\{\{\s*[\w.|: ]+?\s*\}\}|\{[\w.\[\]]*(?:![rsa])?(?::[^{}\s]*)?\}"
        r"|\$\{[^{}\s]+\}|\$[A-Za-z_]\w*|(?<![\w%])%[A-Za-z_][\w.-]*%(?![\w%])",
    ),
    (
        "flag",
        r"(?<![\w-])--[A-Za-z0-9][\w-]*(?:=[^\s,;)]+)?|(?<![\w-])-[A-Za-z]{1,2}(?=[\s,;:)]|$)",
    ),
    (
        "shortcut",  # Ctrl+C, Ctrl+Shift+T, Cmd-S, Alt+F4: modifiers, then one key
        # (a named key only after "+": "alt-right" is a word)
        rf"\b{_MODIFIER}(?:[+-]{_MODIFIER}){{0,3}}(?:[+-](?:F\d{{1,2}}|[A-Za-z0-9])|\+(?i:enter|return"
        r"|tab|esc|escape|space|delete|del|backspace|home|end|pgup|pgdn|insert|up|down|left|right"
        r"))\b",
    ),
    (
        "identifier",
        r"\b_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*\b|\b__[A-Za-z]\w*__\b"  # snake, __init__
        r"|\b[A-Za-z_]\w+(?:\.[A-Za-z_]\w+)+(?:\(\))?|\b[A-Za-z_]\w*\(\)"  # dotted, calls()
        r"|\b[A-Za-z]+\d[A-Za-z0-9]*(?:-\w*\d\w*)*\b"  # utf8, x86-64, HTTP2
        r"|\b(?:[A-Z]{2,}|[A-Za-z]+\d\w*)(?:-\d\w*)+(?:-[A-Z0-9]+)*\b",  # UTF-8, ABC-123-XYZ
    ),
    (
        "identifier",
        r"\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b"  # a UUID
        r"|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b"  # a hash: 3f2a9c1e, git's
        r"|(?<![\w+#.])(?:C\+\+|[CF]#|\.NET)(?![\w+#])"  # names with symbols: C++, C#, .NET
        r"|\b[A-Z]{2,}\d*/(?:\d+(?:\.\d+)?|[A-Z]{2,}\d*)\b"  # HTTP/2, HTTP/1.1, TCP/IP
        r"|(?<![\w@#&])[@#][A-Za-z_][\w.-]*\w(?:/[\w.-]*\w)?"  # @alice, @types/node, #release
        r"|(?<![\w@#&])#\d+\b"  # an issue's number: #42
        r"|\b[A-Z]\.\d+(?:\.\d+)*\b",  # H.264, A.1
    ),
    ("identifier", r"\b[A-Za-z][A-Za-z0-9]*\b"),  # _WORD: camelCase, JavaScript, HTTPServer
    ("acronym", r"\b[A-Z][A-Z0-9&]*[A-Z][A-Z0-9]*s?\b"),
]
KINDS = tuple(dict.fromkeys(kind for kind, _ in _PATTERNS)) + ("term",)
_COMPILED = [(kind, re.compile(pattern)) for kind, pattern in _PATTERNS]
_WORD = _COMPILED[-2][1]  # every word: an identifier where its case is mixed (_mixed_case)
_SLASHED_ACRONYMS = re.compile(r"[A-Z]+/[A-Z]+")  # TCP/IP: kept where both are (``_kept``)
# Acronyms Chinese writes as a word (电视, 上午, 英国, 人民币): translated, not kept.
TRANSLATED_ACRONYMS = frozenset("TV AM PM UK US USA UN EU RMB".split())
_ROMAN = re.compile(r"(?=[IVX]{2,}\Z)X{0,3}(?:IX|IV|V?I{0,3})\Z")
# Sentences as a SHOUTED test reads them: a line cut after . ! or ? and white space (not
# inside "LSB 1.3").
_CHUNK = re.compile(r"[^\n]+?(?:[.!?]+(?=\s|\Z)|(?=\n)|\Z)")


def _mixed_case(word: str) -> bool:
    """A word whose capitals are not a sentence's or a title's: a capital after a small letter
    (camelCase, JavaScript, iPhone) or two before one (HTTPServer, OAuth, IPv6); not a plural
    acronym (APIs)."""
    if re.fullmatch(r"[A-Z0-9]+s", word):
        return False
    return bool(re.search(r"[a-z][A-Z]|[A-Z]{2}[a-z]", word))


@dataclass(frozen=True)
class Span:
    """Characters ``[start, end)`` of a text that stay as written, and what they are."""

    start: int
    end: int
    kind: str


class Verbatim:
    """What a translation keeps as written: the built-in kinds and a user's terms and patterns.

    Args:
        terms: strings kept wherever they occur as written (whole words where they start or end
            with a letter or digit).
        patterns: regular expressions (strings or compiled) whose matches are kept.
        builtin: also find the built-in kinds (``KINDS``); False: only ``terms`` and
            ``patterns``.

    Raises:
        ValueError: a pattern that does not compile or matches the empty string (named).

    Examples:
        >>> text = "Install 3.2.7 from https://x.org for the API."
        >>> [(text[s.start : s.end], s.kind) for s in Verbatim().spans(text)]
        [('3.2.7', 'version'), ('https://x.org', 'url'), ('API', 'acronym')]
    """

    def __init__(
        self,
        terms: Iterable[str] = (),
        patterns: Iterable[str | re.Pattern] = (),
        builtin: bool = True,
    ) -> None:
        self.terms = [term for term in terms if term.strip()]
        self.patterns = [check_pattern(p) for p in patterns]
        self.builtin = builtin
        self._terms = [re.compile(_term_pattern(term)) for term in self.terms]

    def __bool__(self) -> bool:
        """Whether anything is kept at all."""
        return self.builtin or bool(self.terms or self.patterns)

    def __repr__(self) -> str:
        return (
            f"Verbatim(terms={len(self.terms)}, patterns={len(self.patterns)}, "
            f"builtin={self.builtin})"
        )

    @classmethod
    def read(cls, path: str | Path, builtin: bool = True) -> Verbatim:
        """A do-not-translate file: one term a line, ``re:PATTERN`` for a pattern, ``#`` for a
        comment; blank lines skipped, a term's surrounding white space dropped.

        Raises:
            DataError: an unreadable file, or ``FILE:LINE: problem`` for the first bad line.
        """
        path = Path(path)
        return cls.parse(read_text(path, "do-not-translate file"), str(path), builtin)

    @classmethod
    def parse(cls, text: str, source: str = "<verbatim>", builtin: bool = True) -> Verbatim:
        """The terms and patterns of a do-not-translate file's text (``read``)."""
        terms, patterns = [], []
        # split_lines cuts at "\n" only: str.splitlines also cut at form feeds and U+2028,
        # so a term holding one came back as two and later lines' numbers were off.
        for number, line in enumerate(split_lines(text), start=1):
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            if re.search(r"[\x00-\x08\x0b-\x1f\x7f]", line):
                raise DataError.at(source, number, "a control character in the line")
            if not stripped.startswith("re:"):
                terms.append(stripped)
                continue
            try:
                patterns.append(check_pattern(line.lstrip()[3:].rstrip("\r\n")))
            except ValueError as error:
                raise DataError.at(source, number, str(error)) from None
        return cls(terms, patterns, builtin)

    def spans(self, text: str, truecaser: Truecaser | None = None) -> list[Span]:
        """The verbatim spans of ``text``, in order, none overlapping: of all matches the
        longest wins, then a user's term or pattern, then the earlier kind in ``KINDS``.
        ``truecaser``: whose learnt forms decide which words of a SHOUTED sentence are
        acronyms (without it, only a one-word sentence of up to three letters: FAQ, PDF)."""
        found: list[tuple[int, int, int, str]] = []  # (-length, rank, start, kind)
        user = [*self._terms, *self.patterns]
        for rank, pattern in enumerate(user):
            found += [
                (m.start() - m.end(), rank, m.start(), "term") for m in _matches(pattern, text)
            ]
        if self.builtin:
            acronym = _acronym_test(text, truecaser)
            for rank, (kind, pattern) in enumerate(_COMPILED, start=len(user)):
                for match in _matches(pattern, text):
                    if _kept(kind, pattern, match, acronym):
                        found.append((match.start() - match.end(), rank, match.start(), kind))
        taken = [False] * len(text)
        chosen = []
        for negative, _, start, kind in sorted(found):
            end = start - negative
            if not any(taken[start:end]):
                taken[start:end] = [True] * (end - start)
                chosen.append(Span(start, end, kind))
        return sorted(chosen, key=lambda span: span.start)

    def protect(self, document: Document, truecaser: Truecaser | None = None) -> Document:
        """``document`` with each segment's verbatim spans marked literal (``protect``)."""
        return [
            part if isinstance(part, str) else protect(part, self.segment_spans(part, truecaser))
            for part in document
        ]

    def segment_spans(self, segment: Segment, truecaser: Truecaser | None = None) -> list[Span]:
        """The spans of a segment's text; one across an element's edge (``<span>blinker.base.
        </span><span>ANY</span>``) is cut there, each part kept in its own element."""
        edges = sorted(
            {edge for markup in _walk(segment.markup) for edge in (markup.start, markup.end)}
        )
        found = []
        for span in self.spans(segment.text, truecaser):
            cuts = [span.start, *(e for e in edges if span.start < e < span.end), span.end]
            if len(cuts) == 2:
                found.append(span)
                continue
            found += [Span(low, high, span.kind) for low, high in zip(cuts, cuts[1:], strict=False)]
        return found


def check_pattern(pattern: str | re.Pattern) -> re.Pattern:
    """``pattern`` compiled, or a ``ValueError`` naming it: it does not compile, or it matches
    the empty string (it would keep nothing, everywhere)."""
    try:
        compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
    except re.error as error:
        raise ValueError(f"verbatim pattern {pattern!r} does not compile ({error})") from None
    if compiled.fullmatch("") is not None or any(
        m.start() == m.end() for m in compiled.finditer(_PROBE)
    ):
        raise ValueError(f"verbatim pattern {compiled.pattern!r} matches the empty string")
    return compiled


_PROBE = "Aa 1.5, x_y-z: @/\n"  # where a pattern such as \\b or x* finds an empty match


def _kept(kind: str, pattern: re.Pattern, match: re.Match, acronym) -> bool:  # noqa: ANN001
    """Whether a built-in match counts: the catch-all word pattern only for a mixed-case
    word, an acronym (alone, or two joined by a slash) only where ``acronym``
    (``_acronym_test``) says so."""
    if kind == "acronym":
        return acronym(match.start(), match.end())
    if kind == "identifier" and _SLASHED_ACRONYMS.fullmatch(match.group()):
        # TCP/IP where both are acronyms kept; not AM/PM or US/UK, which Chinese translates
        cut = match.start() + match.group().index("/")
        return acronym(match.start(), cut) and acronym(cut + 1, match.end())
    if pattern is _WORD:
        return _mixed_case(match.group())
    return True


def _term_pattern(term: str) -> str:
    """A term matched as written, as a whole word where it starts or ends with one."""
    head = r"(?<!\w)" if term[0].isalnum() or term[0] == "_" else ""
    tail = r"(?!\w)" if term[-1].isalnum() or term[-1] == "_" else ""
    return head + re.escape(term) + tail


def _matches(pattern: re.Pattern, text: str) -> Iterable[re.Match]:
    return (m for m in pattern.finditer(text) if m.end() > m.start())


def _acronym_test(text: str, truecaser: Truecaser | None):  # noqa: ANN202 (a predicate)
    """Whether capitals at [start, end) of ``text`` are an acronym: not a Roman numeral nor a
    word Chinese translates, and in a SHOUTED sentence, a word the truecaser keeps."""
    kept_in_shouting: list[tuple[int, int]] = []
    shouted: list[tuple[int, int]] = []
    for chunk in _CHUNK.finditer(text):
        if chunk.group().strip() and is_shouted(chunk.group()):
            shouted.append(chunk.span())
            kept_in_shouting += _kept_capitals(chunk.group(), chunk.start(), truecaser)

    def acronym(start: int, end: int) -> bool:
        word = text[start:end].removesuffix("s")
        if word in TRANSLATED_ACRONYMS or _ROMAN.match(word):
            return False
        if any(low <= start < high for low, high in shouted):
            return any(low <= start and end <= high for low, high in kept_in_shouting)
        return True

    return acronym


def _kept_capitals(sentence: str, offset: int, truecaser: Truecaser | None) -> list[tuple]:
    """The spans of a SHOUTED sentence that stay in capitals when the truecaser reads it (its
    rules, ``seq2seq.data.truecase``): a word whose learnt usual form is in capitals (NASA),
    and in a one-word sentence an unknown word of up to ``ACRONYM_LETTERS`` letters (FAQ,
    PDF). Without learnt forms the line is read as written: only that one-word rule holds."""
    forms = truecaser.forms if truecaser is not None else {}
    found = list(re.finditer(r"[A-Z][A-Z0-9&]*", sentence))
    alone = len(found) == 1 and len(sentence.split()) == 1
    kept = []
    for word in found:
        usual = forms.get(word.group().lower())
        if usual == word.group() or (
            usual is None and alone and len(word.group()) <= ACRONYM_LETTERS
        ):
            kept.append((offset + word.start(), offset + word.end()))
    return kept


def protect(segment: Segment, spans: Iterable[Span]) -> Segment:
    """A copy of ``segment`` with each span marked literal, nested in the element that holds
    it; a span inside literal markup already (code), or across an element's edge or a point
    (an image, a line break), is left alone."""
    markup = copy.deepcopy(segment.markup)
    for span in spans:
        siblings = _parent_of(markup, span)
        if siblings is None:
            continue
        literal = segment.escape(segment.text[span.start : span.end])
        index = sum(1 for m in siblings if m.end <= span.start)
        siblings.insert(index, Markup(span.start, span.end, "", "", literal, verbatim=True))
    if markup == segment.markup:
        return segment
    return replace(segment, markup=markup)


def _parent_of(markups: list[Markup], span: Span) -> list[Markup] | None:
    """The list of elements the span goes into as a sibling, or None where it cannot."""
    for markup in markups:
        if markup.end <= span.start or span.end <= markup.start:
            continue  # apart (a point at either edge too)
        if markup.literal is not None or not (
            markup.start <= span.start and span.end <= markup.end
        ):
            return None
        return _parent_of(markup.children, span)
    return markups


def _walk(markups: list[Markup]) -> Iterable[Markup]:
    for markup in markups:
        yield markup
        yield from _walk(markup.children)


def verbatim_markups(markups: list[Markup]) -> Iterable[Markup]:
    """The verbatim spans among ``markups`` and their children."""
    return (markup for markup in _walk(markups) if markup.verbatim)
