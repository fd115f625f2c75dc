"""Term pairs learnt from the corpus itself: which Chinese word translates an English word.

The ``terms`` modifier annotates a source word with the Chinese its reference uses for it, and
CC-CEDICT knows only the common HSK words. A corpus of another domain (medicine, software) has
its own vocabulary, and so ``aligned_terms`` learns more pairs from the training split, by
word association over sentence pairs, the statistic word aligners start from (Dice's
coefficient, as in Smadja et al. 1996 and Melamed's competitive linking): an English word
``w`` and a Chinese string ``c`` that occur in the same pairs far more often than apart::

    dice(w, c) = 2 * pairs(w and c) / (pairs(w) + pairs(c))

Chinese has no spaces, so every string of 2 to 4 Chinese characters of a sentence is a
candidate, but not a fragment: a string that mostly occurs inside one longer string (器人 inside
机器人, 期六 inside 星期六) stands for that one. For each frequent English word the best candidate
is kept when its Dice is high; on the bundled corpus the table reads tom → 汤姆, time → 时间,
tomorrow → 明天, robot → 机器人. Only the best: the second best is a neighbour's fragment as
often as a synonym (want → 我想, 不想), and a term swapped for it would teach nonsense.

Not eflomal (PyPI): it ships as source only, needing Cython and a C compiler at install, and
gives links per sentence, which a term table would have to count again; the association
here needs numpy alone and reads at most :data:`SAMPLE_PAIRS` pairs (a random sample of a larger
corpus), counted :data:`CHUNK` pairs at a time, so that time and memory stay bounded on a
corpus of millions: the memory is that of the distinct (word, string) pairs counted, not of
their occurrences.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence

import numpy as np

from seq2seq.data.terms import word_spans

SAMPLE_PAIRS = 100_000  # pairs read at most (a random sample of a larger training split)
CHUNK = 5_000  # pairs whose co-occurrences are counted together
_HAN_RUN = re.compile(r"[\u4e00-\u9fff]+")
# Function words: their Dice with 的, 了, 是 is high in any corpus, and no glossary holds them.
_STOP_WORDS = frozenset(
    """a about above after again all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from had has
    have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves don didn doesn isn
    aren wasn weren haven hasn wouldn couldn shouldn won let
    """.split()
)


def english_words(text: str) -> set[str]:
    """The content words of an English sentence, casefolded, split as glossaries split words
    (:func:`seq2seq.data.terms.word_spans`): letters only, 3 or more, no function word."""
    words = (w for w, _, _ in word_spans(text))
    return {w for w in words if len(w) >= 3 and w.isalpha() and w not in _STOP_WORDS}


def chinese_strings(text: str, shortest: int = 2, longest: int = 4) -> set[str]:
    """Every string of ``shortest`` to ``longest`` Chinese characters inside one run of them."""
    found = set()
    for run in _HAN_RUN.findall(text):
        for n in range(shortest, longest + 1):
            found.update(run[i : i + n] for i in range(len(run) - n + 1))
    return found


def aligned_term_pairs(
    pairs: Sequence[tuple[str, str]],
    limit: int,
    min_count: int = 5,
    min_dice: float = 0.3,
    fragment: float = 0.8,
) -> list[tuple[str, str]]:
    """(English word, Chinese) term pairs of the ``limit`` most frequent English words that
    have a translation in ``pairs``: the Chinese string with the best Dice (at least
    ``min_dice``, in at least ``min_count`` pairs), leaving out fragments (strings of which a
    share ``fragment`` of the pairs holding them hold one string a character longer). Most
    frequent word first."""
    word_count, string_count = Counter(), Counter()
    for en, zh in pairs:
        word_count.update(english_words(en))
        string_count.update(chinese_strings(zh))
    words = sorted(w for w, n in word_count.items() if n >= min_count)
    strings = sorted(
        c for c in _whole_strings(string_count, fragment) if string_count[c] >= min_count
    )
    if not words or not strings:
        return []
    best: dict[str, tuple[float, int, str]] = {}  # word -> (-Dice, length, string), least best
    for w, c, together in _co_occurrences(pairs, words, strings):
        dice = 2 * together / (word_count[w] + string_count[c])
        # The best Dice; on a tie the shorter string (老师 before 的老师, which holds it).
        candidate = (-dice, len(c), c)
        if together >= min_count and dice >= min_dice and candidate < best.get(w, (1.0, 0, "")):
            best[w] = candidate
    ranked = sorted(best, key=lambda w: (-word_count[w], w))[:limit]
    return [(w, best[w][2]) for w in ranked]


def _whole_strings(counts: Counter, fragment: float) -> list[str]:
    """The strings of ``counts`` that are no fragment: fewer than a share ``fragment`` of the
    pairs holding one hold the commonest string a character longer that contains it."""
    longer: Counter = Counter()
    for c, n in counts.items():
        for inside in (c[1:], c[:-1]) if len(c) > 2 else ():
            longer[inside] = max(longer[inside], n)
    return [c for c, n in counts.items() if longer[c] < fragment * n]


def _co_occurrences(
    pairs: Sequence[tuple[str, str]], words: list[str], strings: list[str]
) -> Iterator[tuple[str, str, int]]:
    """(word, string, pairs holding both) for every such couple of ``words`` and ``strings``.
    Each pair's couples are integer codes, counted by ``np.unique`` :data:`CHUNK` pairs at a
    time and merged: the memory is that of the distinct couples."""
    word_ids = {w: i for i, w in enumerate(words)}
    string_ids = {c: i for i, c in enumerate(strings)}
    keys, counts = np.zeros(0, np.int64), np.zeros(0, np.int64)
    for start in range(0, len(pairs), CHUNK):
        codes = [
            np.add.outer(
                np.array([word_ids[w] for w in english_words(en) if w in word_ids], np.int64)
                * len(strings),
                np.array([string_ids[c] for c in chinese_strings(zh) if c in string_ids], np.int64),
            ).ravel()
            for en, zh in pairs[start : start + CHUNK]
        ]
        merged, inverse = np.unique(np.concatenate([*codes, keys]), return_inverse=True)
        weights = np.concatenate([np.ones(sum(map(len, codes)), np.int64), counts])
        keys, counts = merged, np.bincount(inverse, weights=weights).astype(np.int64)
    for key, n in zip(keys.tolist(), counts.tolist(), strict=True):
        yield words[key // len(strings)], strings[key % len(strings)], n
