"""Glossaries: English term -> Chinese term, found in sentences and forced into translations.

A glossary is read from TSV (DeepL's entry format: ``source<TAB>target``, one entry a line;
CSV too, as DeepL takes). A term applies to a sentence when its English side occurs in it as
whole words, case-insensitively; multi-word terms are matched word by word, and where two
terms overlap the longer one wins. The Chinese sides of a sentence's terms become the
constraints of its beam search (``seq2seq.decoding.constrained``), spelled in the model's pieces by
``term_constraints``, with the term's other words banned beside it
(``seq2seq.inference.glossary_bans``); whether a term was honoured is read on the detokenized
output (``missing_terms``), so a term the model wrote in pieces of its own still counts.

No model here, and no tokenizer class: ``term_constraints`` takes any
:class:`~seq2seq.data.tokenizer.TokenizerLike` (ours and Marian's).
``Translator`` finds each piece's terms (``piece_terms``), searches a sentence with terms at
``constrained_beam``'s beam, and names the inputs whose terms could not be placed
(``warn_missing_terms``).
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from seq2seq.decoding.constrained import Constraints
from seq2seq.decoding.term_constraints import TermConstraints
from seq2seq.errors import DataError
from seq2seq.inference.glossary_bans import beside_texts
from seq2seq.textio import read_text, split_lines, warn_lines

if TYPE_CHECKING:
    from seq2seq.data.tokenizer import TokenizerLike
    from seq2seq.data.truecase import Truecaser
    from seq2seq.inference.documents import SentenceTranslation, TextBatch
    from seq2seq.inference.pieces import Piece

WORD_START = "\u2581"  # SentencePiece's mark of a piece that starts a word
# Sentences with glossary terms are searched with a beam of at least this: dynamic beam
# allocation shares the beam among constraint counts, and a beam of 1 can only paste a term.
MIN_CONSTRAINED_BEAM = 5
MAX_CONSTRAINED_BEAM = 12  # ... and of one slot per bank, up to this
# Words as the matcher sees them: runs of letters/digits, and each other visible character
# alone ("e-mail" is e, -, mail; "teacher's" holds the word "teacher").
_WORD = re.compile(r"\w+|[^\w\s]")
_BREAK = re.compile(r"[\t\n\r\u2028\u2029]")  # a quoted CSV field may hold one; TSV cannot
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
FORMATS = ("tsv", "csv")


@dataclass(frozen=True)
class Term:
    """One glossary entry: the English term and the Chinese text it must become."""

    source: str
    target: str


def _words(text: str) -> list[tuple[str, int, int]]:
    """(casefolded word, start, end) of each word of ``text`` (NFKC first)."""
    text = unicodedata.normalize("NFKC", text)
    return [(m.group().casefold(), m.start(), m.end()) for m in _WORD.finditer(text)]


class Glossary:
    """Terms, looked up by the words of a sentence.

    Examples:
        >>> glossary = Glossary([Term("teacher", "导师"), Term("machine learning", "机器学习")])
        >>> [t.target for t in glossary.terms_in("My teacher studies Machine Learning.")]
        ['导师', '机器学习']
    """

    def __init__(self, terms: Iterable[Term]) -> None:
        self.terms: list[Term] = []
        # First word -> (words, term), longest first: a sentence is scanned word by word.
        self._by_first_word: dict[str, list[tuple[tuple[str, ...], Term]]] = {}
        for term in terms:
            words = tuple(word for word, _, _ in _words(term.source))
            if not words:
                raise ValueError(f"glossary term {term.source!r} has no word to match")
            self.terms.append(term)
            self._by_first_word.setdefault(words[0], []).append((words, term))
        for candidates in self._by_first_word.values():
            candidates.sort(key=lambda item: -len(item[0]))

    def __len__(self) -> int:
        return len(self.terms)

    def __iter__(self) -> Iterator[Term]:
        return iter(self.terms)

    def __bool__(self) -> bool:
        return bool(self.terms)

    @classmethod
    def read(cls, path: str | Path, format: str | None = None) -> Glossary:
        """A glossary file (TSV, or CSV when ``format`` says so or the name ends in .csv).

        Raises:
            DataError: unreadable file or a bad entry, naming the file and line.
        """
        path = Path(path)
        text = read_text(path, "glossary file")
        return cls.parse(text, str(path), format or ("csv" if path.suffix == ".csv" else "tsv"))

    @classmethod
    def parse(cls, text: str, source: str = "<glossary>", format: str = "tsv") -> Glossary:
        """Entries as DeepL takes them: TSV ``source<TAB>target`` or CSV ``source,target``
        (a CSV row may add the two language codes, as DeepL's does). Blank lines are skipped.

        Raises:
            DataError: ``SOURCE:LINE: problem`` for the first bad entry (a wrong number of
                fields, an empty or padded term, a control character, a duplicate source).
        """
        if format not in FORMATS:
            raise DataError.at(source, None, f"unknown glossary format {format!r} (tsv or csv)")
        if text.startswith("\ufeff"):
            text = text[1:]
        rows = _csv_rows(text, source) if format == "csv" else _tsv_rows(text)
        return cls(
            _unique(
                [(number, _entry(fields, format, source, number)) for number, fields in rows],
                source,
            )
        )

    @classmethod
    def from_dict(cls, entries: dict, source: str = "<glossary>") -> Glossary:
        """``{English: Chinese}``, checked as ``parse`` checks a file (entry i as line i)."""
        terms = []
        for number, (english, chinese) in enumerate(entries.items(), start=1):
            if not isinstance(chinese, str):
                raise DataError.at(source, number, f"the target of {english!r} is not a string")
            terms.append((number, _entry([english, chinese], "tsv", source, number)))
        return cls(_unique(terms, source))

    def to_tsv(self) -> str:
        """The entries as DeepL returns them: ``source<TAB>target`` lines."""
        return "\n".join(f"{term.source}\t{term.target}" for term in self.terms)

    def terms_in(self, sentence: str) -> list[Term]:
        """The terms that apply to ``sentence``, in the order they occur, each once.

        Every occurrence of every term is found; where occurrences overlap, the one with more
        words wins (then the earlier one), so "machine learning" takes its words from
        "learning" and "machine".
        """
        words = [word for word, _, _ in _words(sentence)]
        found: list[tuple[int, int, Term]] = []  # (start word, word count, term)
        for start, word in enumerate(words):
            for key, term in self._by_first_word.get(word, ()):
                if tuple(words[start : start + len(key)]) == key:
                    found.append((start, len(key), term))
        taken = [False] * len(words)
        chosen: list[tuple[int, Term]] = []
        for start, count, term in sorted(found, key=lambda m: (-m[1], m[0])):
            if not any(taken[start : start + count]):
                taken[start : start + count] = [True] * count
                chosen.append((start, term))
        return list(dict.fromkeys(term for _, term in sorted(chosen, key=lambda m: m[0])))


def _unique(numbered: list[tuple[int, Term]], source: str) -> list[Term]:
    """The terms, or a ``DataError`` at the first whose English side (as matched: words,
    case-insensitively) repeats an earlier one."""
    first_line: dict[tuple[str, ...], int] = {}
    for number, term in numbered:
        key = tuple(word for word, _, _ in _words(term.source))
        if not key:
            raise DataError.at(source, number, f"source term {term.source!r} has no word")
        if key in first_line:
            problem = f"duplicate source term {term.source!r} (first on line {first_line[key]})"
            raise DataError.at(source, number, problem)
        first_line[key] = number
    return [term for _, term in numbered]


def _tsv_rows(text: str) -> Iterator[tuple[int, list[str]]]:
    for number, line in enumerate(split_lines(text), start=1):
        if line.strip():
            yield number, line.split("\t")


def _csv_rows(text: str, source: str) -> Iterator[tuple[int, list[str]]]:
    reader = csv.reader(io.StringIO(text))
    try:
        for fields in reader:
            if any(field.strip() for field in fields):
                yield reader.line_num, fields
    except csv.Error as error:
        raise DataError.at(source, reader.line_num, f"malformed CSV ({error})") from None


def _entry(fields: list[str], format: str, source: str, number: int) -> Term:
    """The term of one row, or a ``DataError`` naming the row's problem."""
    allowed = (2, 4) if format == "csv" else (2,)
    if len(fields) not in allowed:
        separator = "tab" if format == "tsv" else "comma"
        raise DataError.at(
            source,
            number,
            f"expected 2 {separator}-separated fields (source, target), found {len(fields)}",
        )
    for side, value in zip(("source", "target"), fields[:2], strict=True):
        if not value.strip():
            raise DataError.at(source, number, f"empty {side} term")
        if value != value.strip():
            raise DataError.at(
                source, number, f"{side} term {value!r} has leading or trailing white space"
            )
        if _BREAK.search(value):
            raise DataError.at(source, number, f"{side} term {value!r} holds a tab or a line break")
        if _CONTROL.search(value):
            raise DataError.at(source, number, f"{side} term {value!r} holds a control character")
    return Term(unicodedata.normalize("NFC", fields[0]), unicodedata.normalize("NFC", fields[1]))


# -- terms into constraints, and back out of translations -----------------------------------


def missing_terms(terms: Sequence[Term], translation: str) -> list[Term]:
    """The terms whose Chinese side is not in ``translation`` (read on its text, whatever
    pieces spelled it)."""
    text = unicodedata.normalize("NFKC", translation)
    return [term for term in terms if unicodedata.normalize("NFKC", term.target) not in text]


def term_constraints(
    tokenizer: TokenizerLike, terms: Sequence[Term], source: str | None = None
) -> TermConstraints:
    """The beam-search constraints of one sentence: its terms' Chinese sides, each spelled
    in ``tokenizer``'s pieces from any point of the term on, and no other word for a term's
    English written besides (``TermConstraints``' ``avoid``, ``beside_texts``; ``source``: the
    English the terms were found in)."""
    return _term_constraints(tokenizer, [t.target for t in terms], beside_texts(terms, source))


def sentence_constraints(
    tokenizer: TokenizerLike, terms: Sequence[Sequence[Term]], sources: Sequence[str | None]
) -> list[TermConstraints | None]:
    """``term_constraints`` of each sentence (None where it has no term). Sentences with the
    same terms and bans share one ``TermConstraints``: a state is a number that means the same
    text in each, so the moves one sentence's search works out serve the others' (on the
    terminology bench's 202 term sentences, 54 distinct, and a tenth less decoding time)."""
    shared: dict[tuple[tuple[str, ...], tuple[str, ...]], TermConstraints] = {}
    out: list[TermConstraints | None] = []
    for found, source in zip(terms, sources, strict=True):
        if not found:
            out.append(None)
            continue
        key = (tuple(t.target for t in found), tuple(beside_texts(found, source)))
        if key not in shared:
            shared[key] = _term_constraints(tokenizer, list(key[0]), list(key[1]))
        out.append(shared[key])
    return out


def _term_constraints(
    tokenizer: TokenizerLike, targets: list[str], avoid: list[str]
) -> TermConstraints:
    return TermConstraints(
        targets, _surfaces(tokenizer), lambda text, first: _spell(tokenizer, text, first), avoid
    )


def piece_terms(
    glossary: Glossary | None, sentences: Sequence[str], plans: list[list[Piece]]
) -> list[list[Term]]:
    """The glossary terms of each piece, in plan order: those whose English side occurs
    in the piece's words (a sentence cut into pieces has each term forced in its own
    piece). [] for every piece without a glossary."""
    pieces = [piece for plan in plans for piece in plan]
    if not glossary:
        return [[] for _ in pieces]
    texts = piece_texts(sentences, plans)
    return [
        glossary.terms_in(text) if piece.ids else []
        for text, piece in zip(texts, pieces, strict=True)
    ]


def piece_texts(sentences: Sequence[str], plans: list[list[Piece]]) -> list[str]:
    """The words of every piece, in plan order (``piece_text``)."""
    return [
        piece_text(sentence, plan, piece)
        for sentence, plan in zip(sentences, plans, strict=True)
        for piece in plan
    ]


def piece_text(sentence: str, plan: list[Piece], piece: Piece) -> str:
    """The words of ``sentence`` a piece of its ``plan`` covers (the sentence if it is whole)."""
    return sentence if len(plan) == 1 else " ".join(sentence.split()[slice(*piece.words)])


def annotate_pieces(
    tokenizer,  # noqa: ANN001 (a tokenizer with term tags)
    sentences: Sequence[str],
    plans: list[list[Piece]],
    terms: list[list[Term]],
    truecaser: Truecaser,
    limit: int,
) -> list[list[int]]:
    """Each piece's source ids with its glossary ``terms`` annotated inline, as a model trained
    with the ``terms`` modifier reads them (``seq2seq.data.terms``); pieces without terms, and
    windows cut at a token limit, keep their ids, and so does a piece the annotation would take
    over ``limit`` tokens. The text is normalised as ``encode_sentence``
    normalises it, so a piece without terms is encoded exactly as before."""
    from seq2seq.data.clean import normalize_en
    from seq2seq.data.terms import TermSpan, annotated_source_ids, find_span

    pieces = [
        (sentence, plan, piece)
        for sentence, plan in zip(sentences, plans, strict=True)
        for piece in plan
    ]
    out = []
    for (sentence, plan, piece), found in zip(pieces, terms, strict=True):
        if not found or piece.windowed or not piece.ids:
            out.append(piece.ids)
            continue
        text = normalize_en(truecaser.normalize(piece_text(sentence, plan, piece)))
        spans: list[TermSpan] = []
        for term in found:
            where = find_span(text, term.source)
            if where is not None and not any(
                s.start < where[1] and where[0] < s.end for s in spans
            ):
                spans.append(TermSpan(where[0], where[1], term.target))
        ids = annotated_source_ids(tokenizer, text, spans) if spans else piece.ids
        out.append(ids if len(ids) <= limit else piece.ids)
    return out


def constrained_beam(beam_size: int, constraints: Constraints) -> int:
    """The beam a sentence with constraints is searched with: the beam asked for, at least
    ``MIN_CONSTRAINED_BEAM``, and a slot for each bank (constraint tokens met, 0..tokens) up
    to ``MAX_CONSTRAINED_BEAM``: with fewer slots than banks, the highest banks take them all
    and the terms are pasted wherever they come first. It depends on the sentence alone, so
    a sentence's translation never depends on its neighbours."""
    wanted = max(beam_size, MIN_CONSTRAINED_BEAM, constraints.tokens + 1)
    return max(beam_size, min(wanted, MAX_CONSTRAINED_BEAM))


def warn_missing_terms(batch: TextBatch, found: list[SentenceTranslation], first_line: int) -> None:
    """Name, on stderr, the inputs whose translation lacks a glossary term it should hold
    (their lines: ``TextBatch.lines_with``)."""
    lines = batch.lines_with(lambda i: bool(found[i].missing), first_line)
    terms = {t.source: None for translation in found for t in translation.missing}
    if lines:
        shown = ", ".join(list(terms)[:10]) + (", ..." if len(terms) > 10 else "")
        warn_lines(
            f"{len(lines)} input(s) lack glossary term(s) that neither the constrained search "
            f"(within the length limit) nor the source annotation placed ({shown})",
            lines,
        )


@lru_cache(maxsize=4)
def _surfaces(tokenizer: TokenizerLike) -> tuple[bytes, ...]:
    """The UTF-8 bytes each token id adds to a text: its piece, the word-start mark as a
    space; a byte piece ``<0xE5>`` its one byte; special pieces nothing."""
    out = []
    for token in range(tokenizer.vocab_size):
        piece = tokenizer.id_to_piece(token)
        if re.fullmatch(r"<0x[0-9A-F]{2}>", piece):
            out.append(bytes([int(piece[3:5], 16)]))
        elif piece.startswith("<") and piece.endswith(">"):
            out.append(b"")
        else:
            out.append(piece.replace(WORD_START, " ").encode("utf-8"))
    return tuple(out)


def _spell(tokenizer: TokenizerLike, text: str, first: bool) -> list[int]:
    """Token ids that write ``text``: as SentencePiece encodes it at the start of a
    translation (``first``), or with no word-start mark, to continue text already written
    (Chinese runs on without spaces). [] when a character cannot be written at all."""
    ids = tokenizer.encode_target(text)
    if not ids:
        return []
    if not first:
        head = tokenizer.id_to_piece(ids[0])
        if head.startswith(WORD_START):
            rest = head[len(WORD_START) :]
            ids = ids[1:] if not rest else _pieces_of(tokenizer, rest) + ids[1:]
    unknown = tokenizer.piece_to_id("<unk>")
    return [] if not ids or unknown in ids else ids


def _pieces_of(tokenizer, text: str) -> list[int]:
    """``text`` as one piece if the vocabulary has it, else a piece (or byte pieces) per
    character."""
    unknown = tokenizer.piece_to_id("<unk>")
    whole = tokenizer.piece_to_id(text)
    if whole != unknown:
        return [whole]
    ids = []
    for char in text:
        token = tokenizer.piece_to_id(char)
        ids += (
            [token]
            if token != unknown
            else [tokenizer.piece_to_id(f"<0x{byte:02X}>") for byte in char.encode("utf-8")]
        )
    return ids
