"""Documents translated without a model: each sentence through a function, aligned character
for character, through the same ``TextBatch`` (verbatim spans, markup placement) a
``Translator`` uses."""

from __future__ import annotations

from collections.abc import Callable

from seq2seq.formats.inline import Document
from seq2seq.formats.verbatim import Verbatim
from seq2seq.inference.documents import SentenceTranslation, TextBatch


def upper(sentence: str) -> str:
    return sentence.upper()


def identity(sentence: str) -> str:
    return sentence


def translate(documents: list[Document], change: Callable[[str], str] = upper) -> list[str]:
    """Each document rebuilt with every sentence replaced by ``change(sentence)``, verbatim
    spans (placeholders, URLs) kept as written; character i of a translation of the sentence's
    length is aligned to character i, any other to nothing."""
    batch = TextBatch(documents, verbatim=Verbatim())
    found = []
    for sentence in batch.sentences:
        text = change(sentence)
        same = len(text) == len(sentence)
        alignment = [(i, i + 1) if same else None for i in range(len(text))]
        found.append(SentenceTranslation([], [text], alignment=alignment))
    return batch.rebuild(found)
