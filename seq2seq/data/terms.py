"""Terms in the source: the inline annotation a model is trained to copy (Dinu et al. 2019).

A source word or phrase is followed by the Chinese it must become, between three tags::

    my <term> teacher <trans> 导师 </term> is kind

The tags are SentencePiece *control symbols* (:data:`TERM_TAGS`): pieces that encoding text
never produces, so a user's text that happens to hold ``<term>`` is spelled as ordinary pieces
and never read as a tag; they are placed by id (:func:`annotated_source_ids`), and no search
generates them (``SpecialTokens.never_generated``). A vocabulary has them only when its data
was prepared with the ``terms`` modifier (:mod:`seq2seq.data.modifiers`): a model trained
without keeps today's behaviour exactly.

Training pairs (:func:`find_term`): a source word or phrase of up to three words, not all
function words (:data:`STOP_WORDS`), whose CC-CEDICT translation (:func:`term_table`, every plain
sense of the common HSK words) occurs in the reference as a word of its own, not inside a longer
dictionary word (:func:`word_at`: 汽车 is no word of 公共汽车). Most of the time
(:data:`SWAP_SHARE`) the reference's word is replaced by another headword of the same sense
(:func:`synonyms`: teacher, 老师 → 教师), and that one annotated: the model cannot get it from
the source words alone, so only copying the annotation pays (OpusTrainer's tags modifier
replaces terms for the same reason).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from seq2seq.data.tokenizer import TokenizerLike
from seq2seq.errors import DataError
from seq2seq.textio import numbered_lines

TERM_TAGS = ("<term>", "<trans>", "</term>")  # before the term, before its translation, after
MAX_TERM_WORDS = 3
# In the cache's key: a cache of another annotation is prepared again (3: synonyms of one sense,
# terms as words of the reference, no function words, found after the case and stop modifiers).
TERM_FORMAT = 3
# Of the annotated terms, the share whose reference word is swapped for a synonym. At 0.5 (terms
# 0.2, the demo recipe) the model met 7.7% of glossary terms from the annotation alone: too few
# annotations asked for copying.
SWAP_SHARE = 0.8
# A synonym shares at least this share of its senses with the reference's word (Jaccard): 健康
# (health, healthy) and 卫生 (health, hygiene, sanitation) share 1 of 4, 公司 and 企业 3 of 5.
MIN_SHARED_SENSES = 1 / 3
MAX_WORD_CHARS = 8  # the longest dictionary words that a term may be found inside (673 are longer)
# Function words are no terms: their Chinese depends on the sentence more than on the word (or:
# 还是 or 或者; still: 还是 or 仍然), and no glossary holds them.
STOP_WORDS = frozenset(
    """a about above after again against all already also although am an and another any are aren
    as at be because been before being below between both but by can cannot could couldn d did
    didn do does doesn doing don down during each either even ever every few for from had has
    hasn have haven having he her here hers herself him himself his how i if in into is isn it
    its itself just let ll m may me might more most must my myself neither no nor not now of off
    on once only onto or other others ought our ours ourselves out over own re s same shall she
    should shouldn so some still such t than that the their theirs them themselves then there
    these they this those though through till to too under unless until up upon us ve very was
    wasn we were weren what whatever when where whether which while who whom whose why will with
    within without won would wouldn yet you your yours yourself yourselves
    """.split()
)
_WORD = re.compile(r"\w+|[^\w\s]")  # as the glossary matches words (inference.glossary)
_HEADWORD = re.compile(r"^\S+ (\S+) \[", re.MULTILINE)  # a CC-CEDICT line's simplified word


@dataclass(frozen=True)
class TermSpan:
    """An annotation: characters ``[start, end)`` of the source become ``target``."""

    start: int
    end: int
    target: str


def term_tag_ids(tokenizer: TokenizerLike) -> tuple[int, int, int] | None:
    """The ids of :data:`TERM_TAGS` in ``tokenizer``'s vocabulary; None when it has none (a
    model trained without term annotation)."""
    ids = tuple(tokenizer.piece_to_id(tag) for tag in TERM_TAGS)
    # An unknown piece maps to the tokenizer's own unk (a Marian import's is not ours).
    return None if tokenizer.unk_id in ids else ids  # type: ignore[return-value]


def annotated_source_ids(tokenizer, text: str, spans: list[TermSpan]) -> list[int]:  # noqa: ANN001
    """What the encoder reads for ``text`` with ``spans`` annotated (see the module docstring),
    then eos as ``tokenizer.encode_source`` ends it. Each stretch of text is encoded on its
    own and the tags go between by id: nothing in the text can become a tag."""
    tags = term_tag_ids(tokenizer)
    if tags is None:
        raise ValueError("the tokenizer has no term tags (a model trained without terms)")
    start_id, trans_id, end_id = tags
    ids: list[int] = []
    at = 0
    for span in sorted(spans, key=lambda s: s.start):
        ids += tokenizer.encode(text[at : span.start])
        ids += [start_id, *tokenizer.encode(text[span.start : span.end]), trans_id]
        ids += [*term_pieces(tokenizer, span.target), end_id]
        at = span.end
    ids += tokenizer.encode(text[at:])
    return ids + tokenizer.encode_source("")  # the eos, if sources end with one


def term_pieces(tokenizer, target: str) -> list[int]:  # noqa: ANN001
    """The pieces of a target term as the encoder reads them between ``<trans>`` and
    ``</term>``: without the bare word-start piece "▁" that encoding it alone puts first (导师
    alone is "▁" "导" "师"; inside 我的导师很好, "导" "师"). A term whose first piece merges the
    "▁" (汤姆 alone is "▁汤姆") keeps it: a sentence spells such a word in several ways.
    Copying the term is then copying its pieces: without the "▁", 43.0% of the bench's
    glossary terms were met from the annotation alone, against 38.9% with it (one demo-length
    run each, docs/real-text.md)."""
    ids = tokenizer.encode(target)
    return ids[1:] if ids and tokenizer.id_to_piece(ids[0]) == "\u2581" else ids


def word_spans(text: str) -> list[tuple[str, int, int]]:
    """(casefolded word, start, end) of each word of ``text``, as the glossary reads words."""
    return [(m.group().casefold(), m.start(), m.end()) for m in _WORD.finditer(text)]


def find_span(text: str, english: str) -> tuple[int, int] | None:
    """Characters of the first whole-word, case-insensitive occurrence of ``english``."""
    words, key = word_spans(text), [w for w, _, _ in word_spans(english)]
    for i in range(len(words) - len(key) + 1):
        if [w for w, _, _ in words[i : i + len(key)]] == key:
            return words[i][1], words[i + len(key) - 1][2]
    return None


@lru_cache(maxsize=4)
def term_table(
    termbase: str | None = None, proper_nouns: bool = False
) -> dict[tuple[str, ...], tuple[str, ...]]:
    """English sense (casefolded words) -> the common words that translate it, from CC-CEDICT
    (every plain sense of each HSK 3.0 word, :mod:`seq2seq.data.dictionary`; ``proper_nouns``:
    those of its proper-noun entries too, as ``all_glosses``); a ``termbase`` file's entries
    first (:func:`read_termbase`)."""
    from seq2seq.data.dictionary import all_glosses

    table: dict[tuple[str, ...], list[str]] = {}
    for english, chinese in read_termbase(termbase) if termbase else []:
        key = tuple(w for w, _, _ in word_spans(english))
        if chinese not in table.setdefault(key, []):
            table[key].append(chinese)
    for chinese, glosses in all_glosses(proper_nouns).items():
        for gloss in glosses:
            key = tuple(w for w, _, _ in word_spans(gloss))
            if 0 < len(key) <= MAX_TERM_WORDS and chinese not in table.setdefault(key, []):
                table[key].append(chinese)
    return {key: tuple(words) for key, words in table.items()}


def read_termbase(path: str) -> list[tuple[str, str]]:
    """``english<TAB>chinese`` lines (``#`` comments and blank lines skipped), normalised as
    the corpus is; a one-line error naming the file and line for anything else.

    Raises:
        DataError: the file is missing, or a line is not two non-empty fields, or its English
            has more than :data:`MAX_TERM_WORDS` words.
    """
    from seq2seq.data.clean import normalize_en, normalize_zh

    entries = []
    for number, line in numbered_lines(path):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 2 or not all(field.strip() for field in fields):
            raise DataError.at(path, number, "expected english<TAB>chinese")
        english, chinese = normalize_en(fields[0]), normalize_zh(fields[1])
        if len(word_spans(english)) > MAX_TERM_WORDS:
            raise DataError.at(path, number, f"a term has at most {MAX_TERM_WORDS} words")
        entries.append((english, chinese))
    return entries


def find_term(
    en: str, zh: str, pick: float, swap: float, termbase: str | None = None
) -> tuple[str, TermSpan] | None:
    """One term of the pair: :func:`find_terms` with one draw."""
    found = find_terms(en, zh, [pick], [swap], termbase)
    return None if found is None else (found[0], found[1][0])


def find_terms(
    en: str,
    zh: str,
    picks: list[float],
    swaps: list[float],
    termbase: str | None = None,
    unrelated: float = 0.0,
) -> tuple[str, list[TermSpan]] | None:
    """Terms of the pair ``(en, zh)`` to annotate, and the target to train on: the source's
    words with a dictionary translation found in ``zh``. Each ``picks[k]`` in [0, 1) chooses
    one more among those that overlap no term already chosen in the source (a choice whose
    translation has no occurrence left in the reference is dropped, its draw spent). For a
    dictionary word, ``swaps[k]`` below ``SWAP_SHARE * unrelated`` puts a dictionary word
    unrelated to the term in place of its first free occurrence in the target
    (:func:`unrelated_word`: copying the annotation is all the model can do), and below
    :data:`SWAP_SHARE` another headword of the same sense, where it has one. No two terms
    get the same word. None when the pair holds no such term; at most ``len(picks)`` spans,
    in source order."""
    table, words = term_table(termbase), word_spans(en)
    found = _candidates(words, zh, table)
    chosen: list[tuple[int, int, str, TermSpan]] = []  # reference [start, end), target, span
    for pick, swap in zip(picks, swaps, strict=True):
        free = [(i, n, key) for i, n, key in found if not _overlaps_source(i, n, chosen, words)]
        if not free:
            break
        i, n, key = free[int(pick * len(free))]
        found.remove((i, n, key))
        place = _free_occurrence(zh, [c for c in table[key] if len(c) > 1], chosen)
        if place is None:
            continue
        at, used = place
        # Synonyms are the dictionary's senses, and only for a word that is one of them: a
        # termbase or learnt string (的车 for car, 住在 for live) swapped for a sense of the
        # English word would make the reference wrong (这是我的车 -> 这是我汽车).
        senses = [c for c in term_table(None).get(key, ()) if len(c) > 1]
        taken = zh + "".join(target for _, _, target, _ in chosen)  # no word for two terms
        others = [c for c in synonyms(key, used) if c not in taken] if used in senses else []
        target = used
        if used in senses and swap < SWAP_SHARE * unrelated:
            target = unrelated_word(swap / (SWAP_SHARE * unrelated), taken, avoid=senses)
        elif others and swap < SWAP_SHARE:
            share = SWAP_SHARE * unrelated  # the synonyms take the rest of SWAP_SHARE, evenly
            target = others[int((swap - share) / (SWAP_SHARE - share) * len(others))]
        span = TermSpan(words[i][1], words[i + n - 1][2], target)
        chosen.append((at, at + len(used), target, span))
    if not chosen:
        return None
    for start, end, target, _ in sorted(chosen, reverse=True):  # right to left: offsets hold
        zh = zh[:start] + target + zh[end:]
    return zh, sorted((span for *_, span in chosen), key=lambda span: span.start)


def _candidates(
    words: list[tuple[str, int, int]], zh: str, table: dict[tuple[str, ...], tuple[str, ...]]
) -> list[tuple[int, int, tuple[str, ...]]]:
    """(first word, word count, English key) of each run of ``words`` whose translation, of two
    characters or more, is a word of ``zh``: the longest run from each word, no run of function
    words alone."""
    found = []
    for i in range(len(words)):
        for n in range(MAX_TERM_WORDS, 0, -1):
            key = tuple(w for w, _, _ in words[i : i + n])
            translations = table.get(key) if len(key) == n else None
            if not translations or all(w in STOP_WORDS for w in key):
                continue
            if any(
                len(c) > 1 and c in zh and next(word_occurrences(zh, c), None) is not None
                for c in translations
            ):
                found.append((i, n, key))
                break
    return found


def _overlaps_source(i: int, n: int, chosen: list, words: list[tuple[str, int, int]]) -> bool:
    start, end = words[i][1], words[i + n - 1][2]
    return any(start < span.end and span.start < end for *_, span in chosen)


def _free_occurrence(zh: str, candidates: list[str], chosen: list) -> tuple[int, str] | None:
    """(position, word): the first candidate with an occurrence in ``zh`` as a word
    (:func:`word_occurrences`) that no chosen term's reference word overlaps (its first such
    occurrence)."""
    for word in candidates:
        for at in word_occurrences(zh, word):
            if not any(at < end and start < at + len(word) for start, end, *_ in chosen):
                return at, word
    return None


def word_occurrences(zh: str, word: str) -> Iterator[int]:
    """Where ``word`` occurs in ``zh`` as a word of its own (:func:`word_at`), left to right."""
    at = zh.find(word)
    while at >= 0:
        if word_at(zh, at, word):
            yield at
        at = zh.find(word, at + 1)


def word_at(zh: str, at: int, word: str) -> bool:
    """Whether ``word``, at ``at`` in ``zh``, is a word there rather than part of a longer one:
    no CC-CEDICT headword of up to :data:`MAX_WORD_CHARS` characters in ``zh`` holds it and more
    (汽车 is part of 公共汽车, the bus, and 朋友 of 好朋友). Swapped there, the reference would
    lose the longer word (公共客车)."""
    headwords, end = _headwords(), at + len(word)
    for start in range(max(0, end - MAX_WORD_CHARS), at + 1):
        for stop in range(
            max(end, start + len(word) + 1), min(len(zh), start + MAX_WORD_CHARS) + 1
        ):
            if zh[start:stop] in headwords:
                return False
    return True


@lru_cache(maxsize=1)
def _headwords() -> frozenset[str]:
    """Every CC-CEDICT headword (simplified) of two to :data:`MAX_WORD_CHARS` characters."""
    from seq2seq.data.dictionary import _dictionary_text

    return frozenset(
        w for w in _HEADWORD.findall(_dictionary_text()) if 1 < len(w) <= MAX_WORD_CHARS
    )


def synonyms(key: tuple[str, ...], used: str) -> list[str]:
    """The common words of two characters or more that may stand for ``used``, the reference's
    translation of the English ``key``: those of the same sense. CC-CEDICT tags no part of
    speech, so a sense is its gloss as written: "to like" (喜欢, a verb) is not "like" (一样),
    "important (contribution etc)" (伟大) not "important". ``key`` must be ``used``'s first
    sense (its main one, so likely the one the sentence means: know is 认得's third sense,
    after "to recognize") and a synonym's first sense must be the same gloss; the two also share
    :data:`MIN_SHARED_SENSES` of their senses. [] where none does: the term is not swapped."""
    senses = _word_senses()
    own = senses.get(used, ())
    if not own or _sense_key(own[0]) != key:
        return []
    return [
        other
        for other in term_table(None).get(key, ())
        if other != used
        and len(other) > 1
        and senses.get(other, ("",))[0] == own[0]
        and set(senses[other][1:2]) <= set(own)  # 博士's "court academician" is no 医生
        and _shared(own, senses[other]) >= MIN_SHARED_SENSES
    ]


def _shared(a: tuple[str, ...], b: tuple[str, ...]) -> float:
    return len(set(a) & set(b)) / len(set(a) | set(b))


def _sense_key(sense: str) -> tuple[str, ...]:
    """A sense as :func:`term_table` keys it: its plain gloss's words ("to like" -> like)."""
    from seq2seq.data.dictionary import plain_gloss

    gloss = plain_gloss(sense)
    return tuple(w for w, _, _ in word_spans(gloss)) if gloss else ()


@lru_cache(maxsize=1)
def _word_senses() -> dict[str, tuple[str, ...]]:
    """Each common (HSK 3.0) word -> its plain CC-CEDICT senses as written, casefolded, in the
    dictionary's order (its proper-noun entries left out, as :func:`term_table` leaves them)."""
    from seq2seq.data.clean import normalize_en, normalize_zh
    from seq2seq.data.dictionary import _dictionary_text, _entries_of, hsk_words, plain_gloss

    words, senses = set(hsk_words()), {}
    for simplified, glosses in _entries_of(_dictionary_text().splitlines(), proper_nouns=False):
        if simplified in words:
            own = senses.setdefault(normalize_zh(simplified), [])
            for gloss in glosses:
                sense = normalize_en(gloss.strip(" ;,")).casefold()
                if plain_gloss(gloss) and sense not in own:
                    own.append(sense)
    return {word: tuple(own) for word, own in senses.items()}


@lru_cache(maxsize=1)
def _word_pool() -> tuple[str, ...]:
    """Every dictionary word of two characters or more, sorted: the unrelated targets."""
    return tuple(sorted({c for words in term_table(None).values() for c in words if len(c) > 1}))


def unrelated_word(draw: float, zh: str, avoid: list[str] | tuple[str, ...] = ()) -> str:
    """The dictionary word ``draw`` in [0, 1) picks (:func:`_word_pool`), or the next one where
    it occurs in ``zh`` already or is one of ``avoid`` (the term's own senses): a target the
    English cannot predict (OpusTrainer's tags modifier replaces terms by random text for the
    same reason)."""
    pool = _word_pool()
    start = int(draw * len(pool))
    for at in range(start, start + len(pool)):
        word = pool[at % len(pool)]
        if word not in zh and word not in avoid:
            return word
    raise ValueError("every dictionary word occurs in the sentence")  # a pool of thousands
