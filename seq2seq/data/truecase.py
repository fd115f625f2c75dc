"""Case at inference: SHOUTED and Title Cased English read as the sentence case it was trained on.

A model trained on clean sentences has seen almost no all-caps or title-case English, and reads
``WHERE IS THE TRAIN STATION?`` as a string of rare pieces. :class:`Truecaser` rewrites such a
line in sentence case before it is encoded: every word in its usual form, the first letter
capitalised. A word's usual form is learnt from the training corpus's English side as Moses'
truecaser learns it: the form it is most often written in where case is free (not first in a
sentence), so ``Tom``, ``I`` and ``English`` keep their capitals and ``Station`` does not.

Only lines that are entirely upper case, or title cased (every word capitalised), are touched;
anything with mixed case (``Do NOT touch``, ``NASA launched it``) is left as written, for the
model to read (the case modifiers of :mod:`seq2seq.data.modifiers` train it on such text).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable

_WORD = re.compile(r"[^\W\d_]+")  # letters ("Tom's": Tom, s): what forms are kept for
# A word as a title writes it: "Don't" is one capitalised word, not "Don" and a lower-case "t".
_TITLE_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
_SENTENCE_END = re.compile(r"[.!?]['\"”’)]*\s*$")
MIN_COUNT = 2  # a form seen once is no evidence
# Short words a title leaves lower case ("Gone with the Wind"): they do not break a title.
_TITLE_SMALL = frozenset(
    "a an and as at but by for from in into nor of on or over per the to up via with".split()
)


def words(text: str) -> list[str]:
    """The words of ``text`` (letters, with inner apostrophes)."""
    return _WORD.findall(text)


def is_shouted(text: str) -> bool:
    """Upper case throughout, two letters or more (an acronym the corpus writes in capitals,
    such as ``NASA``, keeps them: :meth:`Truecaser.normalize` writes each word's usual form)."""
    found = words(text)
    return bool(found) and all(w.isupper() for w in found) and sum(map(len, found)) >= 2


def is_title_cased(text: str) -> bool:
    """Two or more words, every one capitalised (small words such as "of" may stay lower
    case), with some lower case in them (not shouted)."""
    found = _TITLE_WORD.findall(text)
    capitalised = [w for w in found if w[0].isupper()]
    others = [w for w in found if not w[0].isupper()]
    return (
        len(capitalised) >= 2
        and all(w in _TITLE_SMALL for w in others)
        and any(not w.isupper() for w in capitalised)
    )


class Truecaser:
    """Each word's usual form, learnt from text; see the module docstring.

    Args:
        forms: lower-cased word -> its usual form, for words whose usual form is not all
            lower case (``{"tom": "Tom", "i": "I"}``). Empty: every word lower case but "I".
    """

    def __init__(self, forms: dict[str, str] | None = None) -> None:
        self.forms = dict(forms or {})
        self.forms.setdefault("i", "I")

    @classmethod
    def learn(cls, sentences: Iterable[str], min_count: int = MIN_COUNT) -> Truecaser:
        """Counts each word's forms where case is free: not the first word of a sentence."""
        counts: dict[str, Counter] = defaultdict(Counter)
        for sentence in sentences:
            for index, match in enumerate(_WORD.finditer(sentence)):
                before = sentence[: match.start()]
                if index == 0 or _SENTENCE_END.search(before):
                    continue
                word = match.group()
                counts[word.lower()][word] += 1
        forms = {}
        for lower, seen in counts.items():
            form, count = seen.most_common(1)[0]
            if form != lower and count >= min_count:
                forms[lower] = form
        return cls(forms)

    def normalize(self, text: str) -> str:
        """``text`` in sentence case if it is shouted or title cased; else unchanged."""
        if not (is_shouted(text) or is_title_cased(text)):
            return text
        first = True

        def usual(match: re.Match) -> str:
            nonlocal first
            word = match.group()
            form = self.forms.get(word.lower(), word.lower())
            if first:
                form = form[:1].upper() + form[1:]
            first = False
            return form

        return _WORD.sub(usual, text)

    def to_dict(self) -> dict[str, str]:
        """The learnt forms (what a checkpoint stores)."""
        return dict(self.forms)
