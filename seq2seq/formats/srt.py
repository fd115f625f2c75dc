"""SubRip (.srt) subtitles as a ``Document``: cue numbers, timings and blank lines stay byte
for byte; each cue's text, over however many lines, is one segment (a sentence broken over two
subtitle lines is translated whole) and is written back on one line, except a dialogue cue
(every line starting with a dash: ``- Hi.`` / ``- Hello.``), whose lines stay apart. Inline
tags (``<i>``, ``<b>``, ``<font ...>``) are markup, as in HTML.
"""

from __future__ import annotations

import re

from seq2seq.errors import DataError
from seq2seq.formats.html import parse_html
from seq2seq.formats.inline import Document, Segment

_INDEX = re.compile(r"\s*\d+\s*")
_SPEAKER = re.compile(r"\s*[-\u2013\u2014]\s*(?=\S)")  # "- Hi.": a dialogue line's dash
_TIMING = re.compile(
    r"\s*\d{1,2}:\d{2}:\d{2}[,.]\d{1,3}\s*-->\s*\d{1,2}:\d{2}:\d{2}[,.]\d{1,3}(?:\s.*)?"
)


def parse_srt(document: str, source: str = "<srt>") -> Document:
    """``document`` as raw parts (numbers, timings, blank lines) and one segment per cue.

    Raises:
        DataError: a cue without a well-formed timing line, naming ``source`` and the line.
    """
    lines = _lines(document)
    parts: Document = []
    index = 0
    while index < len(lines):
        if not lines[index].strip():
            parts.append(lines[index])
            index += 1
            continue
        index = _cue(lines, index, parts, source)
    return parts


def _lines(document: str) -> list[str]:
    """The document's lines with their endings, cut at ``\\n`` only: ``str.splitlines`` also
    cuts at U+2028, form feeds and other characters a cue's text can hold, and a cue cut there
    lost its words after the cut (or failed as a malformed timing)."""
    lines = [line + "\n" for line in document.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def _cue(lines: list[str], index: int, parts: Document, source: str) -> int:
    """Reads the cue starting at ``lines[index]`` into ``parts``; the next line's index."""
    start = index
    if _INDEX.fullmatch(lines[index].rstrip("\r\n").lstrip("\ufeff")):
        index += 1
    if index >= len(lines) or not _TIMING.fullmatch(lines[index].rstrip("\r\n")):
        shown = lines[index].rstrip("\r\n")[:40] if index < len(lines) else "end of file"
        raise DataError.at(
            source,
            index + 1,
            f"malformed SRT timing {shown!r} (expected 'HH:MM:SS,mmm --> HH:MM:SS,mmm')",
        )
    index += 1
    parts.append("".join(lines[start:index]))
    text_lines = []
    while index < len(lines) and lines[index].strip() and not _next_cue(lines, index):
        text_lines.append(lines[index])
        index += 1
    if len(text_lines) > 1 and all(_SPEAKER.match(line) for line in text_lines):
        # A dialogue cue ("- Hi." / "- Hello."): each speaker's line its own text, its dash
        # and line break kept; joined, two people's lines became one.
        for offset, line in enumerate(text_lines):
            dash = _SPEAKER.match(line).group()
            body = line.rstrip("\r\n")
            parts.append(dash)
            parts += _segments(body[len(dash) :], source, index - len(text_lines) + 1 + offset)
            parts.append(line[len(body) :])
    elif text_lines:
        ending = text_lines[-1][len(text_lines[-1].rstrip("\r\n")) :]
        text = " ".join(line.strip() for line in text_lines)
        parts += _segments(text, source, index - len(text_lines) + 1)  # the cue's first line
        parts.append(ending)
    return index


def _segments(text: str, source: str, line: int) -> Document:
    """A cue's text as raw parts and segments: every tag of a cue is inline (``parse_html``),
    and SRT has no entities (``&`` stays ``&``)."""
    cue = parse_html(text, source)
    for part in cue:
        if isinstance(part, Segment):
            part.escape = _plain
            part.line = line
    return cue


def _next_cue(lines: list[str], index: int) -> bool:
    """Whether a cue starts at ``lines[index]`` (written without a blank line before it)."""
    line = lines[index].rstrip("\r\n")
    if _TIMING.fullmatch(line):
        return True
    following = lines[index + 1].rstrip("\r\n") if index + 1 < len(lines) else ""
    return bool(_INDEX.fullmatch(line) and _TIMING.fullmatch(following))


def _plain(text: str) -> str:
    return text
