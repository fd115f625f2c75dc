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
here needs numpy alone and reads at most :data:`SAMPLE_PAIRS` pairs (the first ones by row),
so time and memory stay bounded on a corpus of millions (5 s and about 100 MB for 58k pairs).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

SAMPLE_PAIRS = 100_000  # pairs read at most: the counts of a larger corpus's first ones suffice
_ENGLISH_WORD = re.compile(r"[a-z][a-z'-]*[a-z]")
_HAN_RUN = re.compile(r"[\u4e00-\u9fff]+")
# Function words: their Dice with 的, 了, 是 is high in any corpus, and no glossary holds them.
_STOP_WORDS = frozenset(
    """a about above after again all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from had has
    have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves don't it's i'm i'll
    let's that's there's he's she's can't won't didn't doesn't isn't aren't wasn't weren't
    haven't hasn't wouldn't couldn't shouldn't you're we're they're i've you've we've they've
    i'd you'd he'd she'd we'd they'd""".split()
)


def english_words(text: str) -> set[str]:
    """The content words of an English sentence, casefolded (3 letters or more)."""
    words = _ENGLISH_WORD.findall(text.casefold())
    return {w for w in words if len(w) >= 3 and w not in _STOP_WORDS}


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
    have a translation in ``pairs``: the Chinese string with the best
    Dice (at least ``min_dice``, in at least ``min_count`` pairs), leaving out fragments
    (strings of which a share ``fragment`` of the pairs holding them hold one string a character
    longer). Most frequent word first."""
    word_count, string_count = Counter(), Counter()
    for en, zh in pairs:
        word_count.update(english_words(en))
        string_count.update(chinese_strings(zh))
    longer = Counter()  # string -> pairs of the commonest string one character longer holding it
    for c, n in string_count.items():
        for inside in (c[1:], c[:-1]) if len(c) > 2 else ():
            longer[inside] = max(longer[inside], n)
    word_ids = {w: i for i, w in enumerate(w for w, n in word_count.items() if n >= min_count)}
    wanted = (c for c, n in string_count.items() if n >= min_count and longer[c] < fragment * n)
    string_ids = {c: i for i, c in enumerate(wanted)}
    if not word_ids or not string_ids:
        return []
    # Each pair's (word, string) co-occurrences as one integer code, counted by np.unique.
    codes = [
        np.add.outer(
            np.array([word_ids[w] for w in english_words(en) if w in word_ids], dtype=np.int64)
            * len(string_ids),
            np.array([string_ids[c] for c in chinese_strings(zh) if c in string_ids], np.int64),
        ).ravel()
        for en, zh in pairs
    ]
    joint, together = np.unique(np.concatenate(codes), return_counts=True)
    names_w, names_c = list(word_ids), list(string_ids)
    by_word: dict[str, list[tuple[float, str]]] = {}
    for code, n in zip(joint.tolist(), together.tolist(), strict=True):
        if n < min_count:
            continue
        w, c = names_w[code // len(string_ids)], names_c[code % len(string_ids)]
        dice = 2 * n / (word_count[w] + string_count[c])
        if dice >= min_dice:
            by_word.setdefault(w, []).append((dice, c))
    # Best Dice; on a tie the shorter string (老师 before 的老师, which holds it).
    best = {
        w: min(found, key=lambda item: (-item[0], len(item[1]), item[1]))[1]
        for w, found in by_word.items()
    }
    return [(w, best[w]) for w in sorted(best, key=lambda w: (-word_count[w], w))[:limit]]
