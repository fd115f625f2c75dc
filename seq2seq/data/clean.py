"""Text normalisation and pair filtering.

English and Chinese are normalised differently: both get NFKC (folds full-width digits and
letters, which Tatoeba's Chinese side uses) and collapsed whitespace; Chinese is also converted
from traditional to simplified script (about 20k Tatoeba sentences are traditional) and keeps
full-width punctuation (see :func:`normalize_zh`).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import numpy as np

Pair = tuple[str, str]

_WHITESPACE = re.compile(r"\s+")
# NFKC folds these full-width punctuation marks to ASCII, but Chinese typography (and ~90% of
# the Chinese side of Tatoeba) uses the full-width forms, so we map them back. Between two ASCII
# letters/digits ("1,000", "3:30") the ASCII form is right and is kept.
_ZH_PUNCT = str.maketrans(
    {",": "，", "!": "！", "?": "？", ":": "：", ";": "；", "(": "（", ")": "）"}
)
_ASCII_PUNCT_IN_ZH = re.compile(r"(?<![0-9A-Za-z])[,!?:;()]|[,!?:;()](?![0-9A-Za-z])")


@lru_cache(maxsize=1)
def _t2s():  # noqa: ANN202 - opencc ships no type stubs
    import opencc  # deferred: only the Chinese side needs it

    return opencc.OpenCC("t2s")


def _collapse_whitespace(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def normalize_en(text: str) -> str:
    """NFKC plus collapsed whitespace."""
    return _collapse_whitespace(unicodedata.normalize("NFKC", text))


def normalize_zh(text: str) -> str:
    """NFKC, traditional→simplified (OpenCC ``t2s``), full-width punctuation, collapsed spaces.

    Example: ``"Ｔｏｍ有１２個蘋果,對嗎?"`` → ``"Tom有12个苹果，对吗？"``.
    """
    text = _t2s().convert(unicodedata.normalize("NFKC", text))
    text = _ASCII_PUNCT_IN_ZH.sub(lambda m: m.group().translate(_ZH_PUNCT), text)
    return _collapse_whitespace(text)


@dataclass
class CleanReport:
    """How many pairs :func:`clean_pairs` read, kept and dropped, per reason."""

    total: int = 0
    kept: int = 0
    empty: int = 0
    duplicate: int = 0
    too_long: int = 0
    bad_ratio: int = 0

    def to_dict(self) -> dict[str, int]:
        """The counts as a plain dict (for ``report.json``)."""
        return asdict(self)

    def __str__(self) -> str:
        return (
            f"kept {self.kept}/{self.total} pairs (dropped: empty {self.empty}, "
            f"duplicate {self.duplicate}, too long {self.too_long}, "
            f"length ratio {self.bad_ratio})"
        )


def clean_pairs(
    pairs: Iterable[Pair], max_len_chars: int = 400, max_ratio: float = 12.0
) -> tuple[list[Pair], CleanReport]:
    """Normalises pairs and drops empty, duplicate, over-long and badly aligned ones.

    Checks run in that order and each dropped pair is counted under the first reason only.
    Duplicates are exact (en, zh) repeats after normalisation; the first occurrence is kept,
    so the order of the input is preserved.

    Args:
        pairs: (english, chinese) pairs.
        max_len_chars: Drop a pair if either side is longer than this many characters.
        max_ratio: Drop a pair if the longer side has more than ``max_ratio`` times the
            characters of the shorter. A Chinese character carries about as much as an
            English word (~4-5 characters), so good pairs sit near 3:1, but proverbs reach
            11:1 in Tatoeba ("树高遭雷击。"); the default only catches gross misalignments.

    Returns:
        The kept pairs and a :class:`CleanReport`.
    """
    report = CleanReport()
    seen: set[Pair] = set()
    kept: list[Pair] = []
    for en, zh in pairs:
        report.total += 1
        pair = (normalize_en(en), normalize_zh(zh))
        reason = _drop_reason(pair, seen, max_len_chars, max_ratio)
        if reason:
            setattr(report, reason, getattr(report, reason) + 1)
            continue
        seen.add(pair)
        kept.append(pair)
    report.kept = len(kept)
    return kept, report


def _drop_reason(pair: Pair, seen: set[Pair], max_len_chars: int, max_ratio: float) -> str:
    """The CleanReport field to count ``pair`` under, or ``""`` to keep it."""
    reason = filter_reason(*pair, max_len_chars, max_ratio)
    if reason == "" and pair in seen:
        return "duplicate"
    return reason


def filter_reason(en: str, zh: str, max_len_chars: int, max_ratio: float) -> str:
    """Why a normalised pair is dropped whatever else the corpus holds (``"empty"``,
    ``"too_long"``, ``"bad_ratio"``), or ``""``.

    A duplicate is the only reason that depends on the rest of the corpus; the first occurrence
    of a pair that passes these checks is kept, every later one dropped as a duplicate. Since a
    pair that fails them is never kept, checking duplicates after them counts each drop under
    the same reason as :func:`clean_pairs`' order (empty, duplicate, too long, ratio).
    """
    if not en or not zh:
        return "empty"
    if max(len(en), len(zh)) > max_len_chars:
        return "too_long"
    if max(len(en), len(zh)) > max_ratio * min(len(en), len(zh)):
        return "bad_ratio"
    return ""


FILTER_REASONS = ("", "empty", "too_long", "bad_ratio")  # codes 0..3 of clean_batch's "drop"


def clean_batch(
    en: list[str], zh: list[str], max_len_chars: int, max_ratio: float
) -> dict[str, Any]:
    """Normalises a batch of pairs (a ``datasets`` batched map): the normalised ``en`` and
    ``zh``, each pair's ``drop`` code (an index into :data:`FILTER_REASONS`, 0: kept so far)
    and 128-bit keys of each side (``en_key_hi``, ``en_key_lo``, ``zh_key_hi``, ``zh_key_lo``,
    :func:`text_key`) from which de-duplication and the split run on arrays.
    """
    out: dict[str, list] = {
        name: []
        for name in ("en", "zh", "drop", "en_key_hi", "en_key_lo", "zh_key_hi", "zh_key_lo")
    }
    for raw_en, raw_zh in zip(en, zh, strict=True):
        pair = normalize_en(raw_en), normalize_zh(raw_zh)
        out["en"].append(pair[0])
        out["zh"].append(pair[1])
        out["drop"].append(FILTER_REASONS.index(filter_reason(*pair, max_len_chars, max_ratio)))
        for side, text in zip(("en", "zh"), pair, strict=True):
            hi, lo = text_key(text)
            out[f"{side}_key_hi"].append(hi)
            out[f"{side}_key_lo"].append(lo)
    # As arrays: Arrow would read Python ints of 2**63 and more as overflowing int64s.
    return {
        name: np.asarray(values, dtype=np.uint64) if "key" in name else values
        for name, values in out.items()
    }


def text_key(text: str) -> tuple[int, int]:
    """The first 128 bits of the text's SHA-256, as two unsigned 64-bit halves.

    The split's hash bucket is the top 32 bits of the first half (see
    :func:`seq2seq.data.split.bucket`); 128 bits make a collision between two different
    sentences of even a 100M-pair corpus vanishingly unlikely (about 1e-23).
    """
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big"), int.from_bytes(digest[8:16], "big")
