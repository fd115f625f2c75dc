"""Case at inference: SHOUTED and Title Cased English read as the sentence case it was trained on.

A model trained on clean sentences has seen almost no all-caps or title-case English, and reads
``WHERE IS THE TRAIN STATION?`` as a string of rare pieces. :class:`Truecaser` rewrites such a
line in sentence case before it is encoded: every word in its usual form, the first letter of
each sentence capitalised. A word's usual form is learnt from the training corpus's English
side as Moses' truecaser learns it: the form it is most often written in where case is free
(not first in a sentence), so ``Tom``, ``I`` and ``English`` keep their capitals and ``Station``
does not. Lines are read after NFKC (``ＷＨＥＲＥ ＩＳ ＴＯＭ？`` is ``WHERE IS TOM?``).

Only lines that are entirely upper case, or title cased, are touched; anything with mixed case
(``Do NOT touch``, ``NASA launched it``) is left as written, for the model to read (the case
modifiers of :mod:`seq2seq.data.modifiers` train it on such text). What the rules keep:

* Acronyms in a title: a word with a capital after its first letter (``USB``, ``REST API``,
  ``McDonald's``) keeps its case, whatever the learnt forms say: title case capitalises only
  first letters, so the others were written so on purpose (``IT Support`` is not "it support").
* A one-word SHOUTED line is most likely an acronym or a label: a word the learnt forms know
  takes its usual form (``TOM`` -> ``Tom``), an unknown one of up to three letters
  (:data:`ACRONYM_LETTERS`) stays as written (``FAQ``, ``PDF``, ``OK``) and a longer one is
  sentence-cased (``HELLO`` -> ``Hello``, ``HELP!`` -> ``Help!``). In longer SHOUTED lines
  every word takes its usual form.
* Names: a title may leave its small words lower (``Gone with the Wind``), but a line that does
  and ends a sentence with . ! or ? is a sentence whose capitals are names (``Welcome to New
  York!``): it is left as written.
* A Truecaser without learnt forms (a checkpoint trained before them, an imported OPUS-MT model,
  which handles case itself) leaves every line exactly as written.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable

_WORD = re.compile(r"[^\W\d_]+")  # letters ("Tom's": Tom, s): what forms are kept for
# A word as a title writes it: "Don't" is one capitalised word, not "Don" and a lower-case "t".
_TITLE_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
_SENTENCE_END = re.compile(r"[.!?]['\"”’)]*\s*$")
# A sentence ends inside a line: . ! ? (closing quotes) then white space, before the next
# sentence's opening quotes; the match's end is where the next sentence's first word starts.
_SENTENCE_BREAK = re.compile(r"[.!?]['\"”’)\]]*\s+['\"“‘(\[¿¡]*")
_ENDS_SENTENCE = re.compile(r"[.!?]['\"”’)\]]*(?:\s|$)")
MIN_COUNT = 2  # a form seen once is no evidence
# A one-word SHOUTED line this short, unknown to the forms, is an acronym (FAQ, PDF, OK); a
# longer one a shouted label (HELP, SAVE, SETTINGS), more often than an acronym unknown to them.
ACRONYM_LETTERS = 3
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
    case), with some lower case in them (not shouted); a line that leaves a small word lower
    and ends a sentence (``Welcome to New York!``) is a sentence, not a title."""
    found = _TITLE_WORD.findall(text)
    capitalised = [w for w in found if w[0].isupper()]
    others = [w for w in found if not w[0].isupper()]
    return (
        len(capitalised) >= 2
        and all(w in _TITLE_SMALL for w in others)
        and any(not w.isupper() for w in capitalised)
        and not (others and _ENDS_SENTENCE.search(text))
    )


def has_inner_capital(word: str) -> bool:
    """A capital after the first letter (``USB``, ``McDonald's``): not title case's doing."""
    return any(c.isupper() for c in word[1:])


class Truecaser:
    """Each word's usual form, learnt from text; see the module docstring.

    Args:
        forms: lower-cased word -> its usual form, for words whose usual form is not all
            lower case (``{"tom": "Tom", "i": "I"}``). None or empty: nothing was learnt, and
            :meth:`normalize` leaves every line as written.
    """

    def __init__(self, forms: dict[str, str] | None = None) -> None:
        self.forms = dict(forms or {})
        if self.forms:
            self.forms.setdefault("i", "I")

    @property
    def learnt(self) -> bool:
        """Whether there are forms to write: without them every line is left as written."""
        return bool(self.forms)

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
        # English writes "I" in capitals whatever the corpus shows: a corpus learnt from always
        # has this form, so a checkpoint trained on any corpus truecases (an empty table means
        # nothing was learnt: a checkpoint from before, or an imported model).
        forms.setdefault("i", "I")
        return cls(forms)

    def normalize(self, text: str) -> str:
        """``text`` in sentence case if it is shouted or title cased (read after NFKC, and
        then returned in NFKC); else, and always without learnt forms, exactly as written."""
        if not self.forms:
            return text
        folded = unicodedata.normalize("NFKC", text)
        if is_shouted(folded):
            cased = self._recase(folded, self._kept_shouting(folded))
        elif is_title_cased(folded):
            cased = self._recase(folded, has_inner_capital)
        else:
            return text
        return text if cased == folded else cased

    def _kept_shouting(self, text: str) -> Callable[[str], bool]:
        """Which words of a SHOUTED line stay as written: in a one-word line, an unknown
        word short enough to be an acronym (FAQ, PDF, OK); in a longer line, none."""
        if len(text.split()) > 1:
            return lambda word: False

        def acronym(word: str) -> bool:
            found = words(word)
            unknown = not any(w.lower() in self.forms for w in found)
            return unknown and sum(map(len, found)) <= ACRONYM_LETTERS

        return acronym

    def _recase(self, text: str, kept: Callable[[str], bool]) -> str:
        """Each word of ``text`` but the ``kept`` in its usual form, the first word of each
        sentence capitalised (unless its usual form has capitals of its own: ``iPhone``)."""
        starts = {m.end() for m in _SENTENCE_BREAK.finditer(text)}
        first = True

        def usual(match: re.Match) -> str:
            nonlocal first
            word, starts_sentence = match.group(), first or match.start() in starts
            first = False
            if kept(word):
                return word
            cased = _WORD.sub(lambda m: self.forms.get(m.group().lower(), m.group().lower()), word)
            if starts_sentence and cased.islower():
                cased = cased[:1].upper() + cased[1:]
            return cased

        return _TITLE_WORD.sub(usual, text)

    def to_dict(self) -> dict[str, str]:
        """The learnt forms (what a checkpoint stores)."""
        return dict(self.forms)
