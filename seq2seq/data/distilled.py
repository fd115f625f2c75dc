"""A distilled corpus in the training split (``data.modifiers.distilled``): the pairs
``seq2seq distill`` wrote take the place of the training pairs whose sources they translate
(``seq2seq.inference.distillation``; docs/distillation.md)."""

from __future__ import annotations

from typing import Any

import numpy as np

from seq2seq.data import tables
from seq2seq.data.modifiers import Modifiers
from seq2seq.data.prepare import log
from seq2seq.data.sources import load_tsv


def without_distilled(
    cleaned: Any, train_rows: np.ndarray, row_split: np.ndarray, modifiers: Modifiers
) -> np.ndarray:
    """``row_split`` with the training pairs whose source the distilled corpus translates
    taken out of every split (-1): the teacher's translation replaces their reference. A
    training source it does not hold (a distillation stopped early) keeps its reference."""
    distilled = {en for en, _ in distilled_pairs(modifiers.distilled)}
    english = tables.text_rows(cleaned, ["en"], train_rows)["en"]
    replaced = train_rows[np.fromiter((en in distilled for en in english), bool, len(english))]
    log.info(f"{len(replaced):,} of {len(train_rows):,} training pairs replaced by distilled ones")
    row_split = row_split.copy()
    row_split[replaced] = -1
    return row_split


def distilled_pairs(path: str) -> list[tuple[str, str]]:
    """A ``seq2seq distill`` corpus's pairs, but those the teacher left empty."""
    return [(en, zh) for en, zh in load_tsv(path) if en.strip() and zh.strip()]
