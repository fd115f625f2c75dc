"""Texts and documents through a sentence translator: split into sentences, de-duplicate,
translate together, and put back together with their markup.

``TextBatch`` takes the documents of one request or file (``seq2seq.formats``), splits every
segment into sentences (``seq2seq.data.sentences``) and keeps each distinct sentence once, so a
file of paragraphs is decoded in the same token-batched pass as a file of sentences. Given the
sentences' translations it rebuilds each document: translations joined with no space (a
newline kept where one stood), markup placed by alignment (``seq2seq.formats.inline``).
``Translator`` (``seq2seq.inference.translator``) produces the ``SentenceTranslation``\\ s.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from seq2seq.data.sentences import Sentence, join_translations, split_sentences
from seq2seq.data.truecase import Truecaser
from seq2seq.decoding.search import Hypothesis
from seq2seq.formats.chinese_script import SIMPLIFIED, convert, convert_aligned
from seq2seq.formats.inline import (
    Alignment,
    Document,
    Markup,
    Segment,
    monotonic_alignment,
    rebuild,
    segments,
)
from seq2seq.formats.verbatim import Verbatim, verbatim_markups
from seq2seq.formats.verbatim_placement import STOPS, settle
from seq2seq.inference.confidence import line_confidence


@dataclass
class SentenceTranslation:
    """One sentence's translation.

    ``hypotheses`` and ``texts`` are the n-best list, best first (a sentence translated in
    pieces has the pieces' k-th hypotheses joined). ``alignment`` (when asked for) gives, per
    character of ``texts[0]``, the span of sentence characters it was translated from.
    ``pieces`` > 1: the sentence was longer than the model takes and was translated in pieces
    (cut at clause punctuation); ``windowed``: some piece had no such punctuation and was cut
    into windows of tokens, so the sentence was not translated as a whole (reported).
    ``missing``: the glossary terms that applied to the sentence and that its best text does
    not hold (the search could not place them within the length limit; reported);
    ``terms``: all the glossary terms that applied to it (a verbatim span is never put in
    place of a term's characters). ``signals``: its best translation's confidence signals
    (``confidence.signals``; None when nothing was translated).
    """

    hypotheses: list[Hypothesis]
    texts: list[str]
    alignment: Alignment | None = None
    pieces: int = 1
    windowed: bool = False
    missing: list = field(default_factory=list)  # glossary Terms its best text lacks
    terms: list = field(default_factory=list)  # glossary Terms that applied to it
    signals: list[float] | None = None  # of its best hypothesis (seq2seq.inference.confidence)


@dataclass
class TextBatch:
    """The documents of one request or file as distinct sentences, and back.

    Args:
        documents: parsed documents (``seq2seq.formats.parse``).
        split: split each segment into sentences (True) or take each of its lines whole.
        verbatim: what each translation keeps as written (``seq2seq.formats.verbatim``): its
            spans are marked literal in the documents, placed by alignment like code. None:
            nothing is (the documents are used as given).
        truecaser: the one the sentences are read with, which decides the acronyms of a
            SHOUTED sentence (``Verbatim.spans``).
        target: the script the documents are rebuilt in (``seq2seq.formats.chinese_script``):
            each sentence's best translation converted before its markup is placed, verbatim
            spans kept as written (``_in_script``).
        written: how a glossary term (as searched, in Simplified) is written in the output
            where the conversion writes it otherwise (``TranslateOptions.searched_terms``).
    """

    documents: list[Document]
    split: bool = True
    verbatim: Verbatim | None = None
    truecaser: Truecaser | None = None
    target: str = SIMPLIFIED
    written: dict = field(default_factory=dict)  # glossary Term -> its text in the output
    sentences: list[str] = field(init=False, default_factory=list)
    # Per distinct sentence: align its translation to its words (to place markup), or, a
    # tuple of verbatim spans, only if its translation does not hold each of them whole
    # (``word_alignment.needed_alignments``: where it does they stay where the model put them).
    aligned: list[bool | tuple[str, ...]] = field(init=False, default_factory=list)
    _layout: list[list[tuple[Segment, list[Sentence], list[int]]]] = field(
        init=False, default_factory=list
    )

    def __post_init__(self) -> None:
        if self.verbatim:
            self.documents = [self.verbatim.protect(d, self.truecaser) for d in self.documents]
        index: dict[str, int] = {}
        for document in self.documents:
            placed = []
            for segment in segments(document):
                found = split_sentences(segment.text) if self.split else _lines(segment.text)
                ids = [index.setdefault(s.text, len(index)) for s in found]
                placed.append((segment, found, ids))
            self._layout.append(placed)
        self.sentences = list(index)
        self.aligned = [False] * len(self.sentences)
        for placed in self._layout:
            for segment, found, ids in placed:
                for sentence, i in zip(found, ids, strict=True):
                    self.aligned[i] = _needs_alignment(segment, sentence, self.aligned[i])

    def segment_sentences(self, document: int) -> list[list[int]]:
        """For each segment of document ``document``: the indices of its sentences."""
        return [ids for _, _, ids in self._layout[document]]

    def lines_with(self, flagged: Callable[[int], bool], first_line: int = 1) -> list[int]:
        """The input lines of the segments holding a sentence ``i`` with ``flagged(i)``, for
        warnings: document ``d`` of a batch of lines is line ``first_line + d``, and a
        document read whole from a file names the line its segment starts on
        (``Segment.line``)."""
        lines = set()
        for number, placed in enumerate(self._layout):
            for segment, _, ids in placed:
                if any(flagged(i) for i in ids):
                    lines.add(first_line + number + segment.line - 1)
        return sorted(lines)

    def rebuild(self, translations: list[SentenceTranslation]) -> list[str]:
        """Each document with its segments translated (``translations`` of ``sentences``)."""
        return [self.rebuild_one(i, translations) for i in range(len(self.documents))]

    def confidences(
        self, translations: list[SentenceTranslation], calibration: Callable
    ) -> list[float | None]:
        """Each document's confidence: its sentences' (``calibration`` of their signals),
        weighted by their source tokens (``confidence.line_confidence``)."""
        out = []
        for document in range(len(self.documents)):
            ids = [i for group in self.segment_sentences(document) for i in group]
            scored = [translations[i].signals for i in ids if translations[i].signals]
            weights = [round(math.exp(values[1])) for values in scored]
            out.append(line_confidence([calibration(v) for v in scored], weights))
        return out

    def n_best(
        self, document: int, translations: list[SentenceTranslation], n: int
    ) -> list[Hypothesis]:
        """The ``n`` best translations of document ``document``, best first, each with its
        text (the document rebuilt with those sentence translations): the combinations of its
        sentences' hypotheses with the highest summed score (tokens joined, scores and
        log-probabilities added; a sentence that occurs twice takes the same hypothesis both
        times and counts twice). The first is ``rebuild``'s. A document with no sentence, or
        one whose sentence has no hypothesis, has one hypothesis, empty, of score 0."""
        occurrences = [i for ids in self.segment_sentences(document) for i in ids]
        distinct = list(dict.fromkeys(occurrences))
        lists = [translations[i].hypotheses for i in distinct]
        if not lists or not all(lists):
            return [Hypothesis([], 0.0, 0.0, self.rebuild_one(document, translations))]
        times = [occurrences.count(i) for i in distinct]
        scores = [[h.score * k for h in hyps] for hyps, k in zip(lists, times, strict=True)]
        found = []
        for choice in best_combinations(scores, n):
            rank = dict(zip(distinct, choice, strict=True))
            picked = list(translations)
            for i, k in rank.items():
                if k:  # rank 0 keeps its text and its alignment (markup placed by attention)
                    picked[i] = replace(
                        translations[i], texts=[translations[i].texts[k]], alignment=None
                    )
            parts = [translations[i].hypotheses[rank[i]] for i in occurrences]
            found.append(
                Hypothesis(
                    [t for h in parts for t in h.tokens],
                    sum(h.score for h in parts),
                    sum(h.log_prob for h in parts),
                    self.rebuild_one(document, picked),
                )
            )
        return found

    def rebuild_one(self, document: int, translations: list[SentenceTranslation]) -> str:
        """Document ``document`` with its segments translated."""
        rendered = [
            _render(segment, found, [self._in_script(translations[i], segment) for i in ids])
            for segment, found, ids in self._layout[document]
        ]
        return rebuild(self.documents[document], rendered)

    def _in_script(self, translation: SentenceTranslation, segment: Segment) -> SentenceTranslation:
        """A sentence's best translation written in ``target``'s script, its alignment carried
        over (``convert_aligned``); the segment's verbatim spans stay as written and its
        glossary terms are spelled as ``written`` says (its ``terms`` so spelled, for
        placing spans beside them)."""
        if self.target == SIMPLIFIED or not translation.texts:
            return translation
        terms = [
            replace(t, target=self.written.get(t) or convert(t.target, self.target))
            for t in translation.terms
        ]
        kept = {t.target: new.target for t, new in zip(translation.terms, terms, strict=True)}
        for markup in verbatim_markups(segment.markup):
            kept[segment.text[markup.start : markup.end]] = segment.text[markup.start : markup.end]
        kept = {k: v for k, v in kept.items() if convert(k, self.target) != v}
        best = translation.texts[0]
        text, origin = convert_aligned(best, self.target, kept)
        alignment = translation.alignment
        if alignment is not None and len(alignment) == len(best):
            alignment = [alignment[i] for i in origin]
        return replace(translation, texts=[text], alignment=alignment, terms=terms)


def _needs_alignment(
    segment: Segment, sentence: Sentence, before: bool | tuple[str, ...]
) -> bool | tuple[str, ...]:
    """``TextBatch.aligned`` of one occurrence of a sentence, with what an earlier one asked
    (``before``): True where an element of its format begins, ends or stands inside the
    sentence (its words must be found in the translation); else the verbatim spans inside it
    (aligned only if the translation does not hold them whole); else nothing. A sentence an
    element wraps whole, or that has no markup, needs no attention: all of its translation
    goes where all of its words were (``_render``'s monotonic alignment)."""
    if before is True or not segment.markup:
        return before
    if _cut(segment.markup, sentence):
        return True
    spans = verbatim_markups(segment.markup)
    inside = [m for m in spans if sentence.start <= m.start < sentence.end]
    kept = {segment.text[m.start : m.end] for m in inside} | set(before or ())
    return tuple(sorted(kept))


def _cut(markups: list[Markup], sentence: Sentence) -> bool:
    """Whether an element that is not a verbatim span begins or ends strictly inside the
    sentence (a point, a ``<br>`` or an image, inside it)."""
    for markup in markups:
        if markup.verbatim:
            continue
        if (
            sentence.start < markup.start < sentence.end
            or sentence.start < markup.end < sentence.end
        ):
            return True
        if _cut(markup.children, sentence):
            return True
    return False


def _lines(text: str) -> list[Sentence]:
    """Each non-empty line of ``text`` as one sentence (no sentence splitting)."""
    found, offset = [], 0
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped:
            start = offset + line.index(stripped[0])
            found.append(Sentence(stripped, start, start + len(stripped)))
        offset += len(line) + 1
    return found


def _render(
    segment: Segment, found: list[Sentence], translations: list[SentenceTranslation]
) -> str:
    """A segment's translation: its sentences' best translations joined, markup placed."""
    texts = [t.texts[0] if t.texts else "" for t in translations]
    joined = join_translations(texts, found, segment.text)
    if not segment.markup:
        return segment.escape(joined)
    alignment: Alignment = []
    terms = [term.target for translation in translations for term in translation.terms]
    for index, (sentence, translation) in enumerate(zip(found, translations, strict=True)):
        if index:  # the newlines join_translations put between two sentences, each from its own
            start = found[index - 1].end
            gap = segment.text[start : sentence.start]
            alignment += [(start + i, start + i + 1) for i, c in enumerate(gap) if c == "\n"]
        own = translation.alignment
        if own is None or len(own) != len(texts[index]):  # no attention read (or an alternative)
            own = _evenly(sentence.text, texts[index])
        alignment += [
            None if span is None else (span[0] + sentence.start, span[1] + sentence.start)
            for span in own
        ]
    return segment.render(joined, settle(segment, joined, alignment, terms))


def _evenly(source: str, translation: str) -> Alignment:
    """A sentence's translation aligned without attention: its characters spread evenly over
    the sentence (``monotonic_alignment``), but its closing punctuation taken from the
    sentence's, so that a point after the sentence (a page break) stays after its stop."""
    spans = monotonic_alignment(len(source), len(translation))
    closing = len(translation) - len(translation.rstrip(STOPS))
    source_closing = len(source) - len(source.rstrip(STOPS))
    if closing and source_closing:
        spans[len(translation) - closing :] = [
            (len(source) - source_closing, len(source))
        ] * closing
    return spans


def windowed_lines(
    batch: TextBatch, translations: list[SentenceTranslation], first_line: int = 1
) -> list[int]:
    """The input lines holding a sentence that could not be translated whole
    (``TextBatch.lines_with``)."""
    return batch.lines_with(lambda i: translations[i].windowed, first_line)


def best_combinations(scores: list[list[float]], n: int) -> list[tuple[int, ...]]:
    """The ``n`` choices of one index per list with the highest summed score, best first
    (each list sorted best first): a lazy walk from (0, ..., 0) that raises one index at a
    time, as in k-best extraction from a lattice."""
    start = (0,) * len(scores)
    heap = [(-sum(s[0] for s in scores), start)]
    seen, best = {start}, []
    while heap and len(best) < n:
        negative, choice = heapq.heappop(heap)
        best.append(choice)
        for position, index in enumerate(choice):
            if index + 1 < len(scores[position]):
                after = choice[:position] + (index + 1,) + choice[position + 1 :]
                if after not in seen:
                    seen.add(after)
                    total = negative + scores[position][index] - scores[position][index + 1]
                    heapq.heappush(heap, (total, after))
    return best


def combine_hypotheses(pieces: list[list[Hypothesis]], n_best: int) -> list[Hypothesis]:
    """The n-best list of a sentence translated in pieces: the k-th hypothesis joins each
    piece's k-th (or its last, where a piece has fewer); scores and log-probabilities add."""
    if len(pieces) == 1:
        return pieces[0]
    if any(not found for found in pieces):
        return []
    combined = []
    for k in range(min(n_best, max(len(found) for found in pieces))):
        chosen = [found[min(k, len(found) - 1)] for found in pieces]
        combined.append(
            Hypothesis(
                [t for h in chosen for t in h.tokens],
                sum(h.score for h in chosen),
                sum(h.log_prob for h in chosen),
            )
        )
    return combined
