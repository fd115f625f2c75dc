"""English text into sentences, and translated sentences back into text. Pure text, no model.

The model was trained on single sentences (~7 words); a line of four sentences fed to it whole
usually comes back as the first sentence's translation. Every serious translation front end
therefore splits first (LibreTranslate/Argos with a sentencizer, the OPUS-MT server with Moses'
splitter, DeepL with ``split_sentences``); this module is ours.

The splitter is pysbd (Golden Rules segmenter, pure Python, offline): on our tricky cases it
missed 1 of 20 (a URL with ``?``), sentencex 1 (it cuts "1." off a numbered list) and nupunkt
2. URLs and e-mail addresses are masked before pysbd sees them, which fixes its one miss.
pysbd is the slow part (about 270k characters/s here, called as below), so a text with no
sentence-ending punctuation followed by more text skips it: most single-sentence lines never
reach it.

Chinese output is joined with no space between sentences; a newline that stood between two
sentences in the source stands between their translations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# A place where a sentence could end: . ! ? or … (with closing quotes or brackets) and then
# white space and more text. A text without one is a single sentence.
_POSSIBLE_END = re.compile(r"[.!?…][\"'”’)\]]*\s+\S")
# URLs and e-mail addresses hold dots and question marks that end no sentence. The last
# character is not punctuation, so "Visit https://x.org." still ends its sentence.
_URL_OR_EMAIL = re.compile(
    r"(?:\b(?:https?|ftp)://|\bwww\.)[^\s<>\"']*[^\s<>\"'.,;:!?)\]]"
    r"|\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"
)
# Clause boundaries of a sentence too long for the model: after , ; : or before a spaced dash.
_CLAUSE_END = re.compile(r"(?<=[,;:])\s+|\s+(?=(?:\u2014|\u2013|--?)\s)")


@dataclass(frozen=True)
class Sentence:
    """One sentence of a text: ``text == source[start:end]``, no white space at either end."""

    text: str
    start: int
    end: int


def split_sentences(text: str) -> list[Sentence]:
    """The sentences of ``text`` in order, with their spans; [] for a text of white space.

    Lines are split apart first: a newline always ends a sentence (a sentence never spans
    lines), and ``join_translations`` puts it back.

    Examples:
        >>> [s.text for s in split_sentences("Mr. Lee is here. Is it 3.5 m? Yes.")]
        ['Mr. Lee is here.', 'Is it 3.5 m?', 'Yes.']
    """
    sentences: list[Sentence] = []
    offset = 0
    for line in text.split("\n"):
        sentences += _split_line(line, offset)
        offset += len(line) + 1
    return sentences


def _split_line(line: str, offset: int) -> list[Sentence]:
    stripped = line.strip()
    if not stripped:
        return []
    if not _POSSIBLE_END.search(stripped):
        start = offset + line.index(stripped[0])
        return [Sentence(stripped, start, start + len(stripped))]
    masked = _URL_OR_EMAIL.sub(lambda m: re.sub(r"[.?!]", "_", m.group()), line)
    segmenter = _segmenter()
    try:  # pysbd's sentences as found, without its own span search (a third of its time)
        return _located(segmenter.processor(masked).process(), line, masked, offset)
    except ValueError:  # a sentence not found as written: pysbd's own, slower path
        return _located(segmenter.segment(masked), line, masked, offset)


def _located(pieces: list[str], line: str, masked: str, offset: int) -> list[Sentence]:
    """Each piece found in ``masked`` after the previous one (pysbd drops white space)."""
    found, cursor = [], 0
    for piece in (p.strip() for p in pieces):
        if piece:
            start = masked.index(piece, cursor)
            cursor = start + len(piece)
            found.append(Sentence(line[start:cursor], offset + start, offset + cursor))
    return found


@lru_cache(maxsize=1)
def _segmenter():
    import pysbd

    return pysbd.Segmenter(language="en", clean=False)


def join_translations(translations: list[str], sentences: list[Sentence], source: str) -> str:
    """The translations of ``sentences`` (of ``source``) as one text: nothing between them
    but the newlines that stood between the sentences in ``source``.

    Examples:
        >>> text = "Hi. Bye.\\nOk."
        >>> join_translations(["嗨。", "再见。", "好。"], split_sentences(text), text)
        '嗨。再见。\\n好。'
    """
    if len(translations) != len(sentences):
        raise ValueError(f"{len(translations)} translations for {len(sentences)} sentences")
    parts = []
    for index, (translation, sentence) in enumerate(zip(translations, sentences, strict=True)):
        if index:
            gap = source[sentences[index - 1].end : sentence.start]
            parts.append("\n" * gap.count("\n"))
        parts.append(translation)
    return "".join(parts)


def clauses(sentence: str) -> list[str]:
    """``sentence`` cut after each comma, semicolon or colon and before a dash between
    spaces: the pieces an over-long sentence is translated in.
    ``" ".join(clauses(s)) == " ".join(s.split())``."""
    return [piece for piece in _CLAUSE_END.split(" ".join(sentence.split())) if piece]
