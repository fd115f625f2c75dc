"""The Chinese a translation is written in: the model writes Simplified Chinese (its training
Chinese is converted to Simplified, ``seq2seq.data.clean``); Traditional Chinese, and the words
of Taiwan and Hong Kong, are that output converted by OpenCC after the search. The model stays
one.

``target_tag`` reads a target as the CLI, the Python API and the servers name it
(case-insensitive, ``_`` for ``-``; LibreTranslate's ``zt``, DeepL's ``ZH-HANT``) into one of
``TARGETS``; ``convert`` writes a Simplified text in a target's script, and
``convert_aligned`` also says which character of the text each output character came from, so
that markup placed by alignment follows a conversion that changes a length (Taiwan's phrases:
U盘 -> 隨身碟). Pure text: no model.
"""

from __future__ import annotations

import difflib
import re
import threading
from collections.abc import Mapping
from functools import cache

SIMPLIFIED = "zh-Hans"
# target -> the OpenCC configuration that writes it from Simplified (None: the model's own)
TARGETS = {"zh-Hans": None, "zh-Hant": "s2t", "zh-TW": "s2twp", "zh-HK": "s2hk"}
NAMES = {
    "zh-Hans": "Chinese (Simplified)",
    "zh-Hant": "Chinese (Traditional)",
    "zh-TW": "Chinese (Traditional, Taiwan)",
    "zh-HK": "Chinese (Traditional, Hong Kong)",
}
# Other names of the targets (lower case, '-'): ISO and BCP 47 forms, LibreTranslate's zt.
ALIASES = {
    "zh": "zh-Hans",
    "zh-cn": "zh-Hans",
    "zh-sg": "zh-Hans",
    "zh-hans-cn": "zh-Hans",
    "zh-hans-sg": "zh-Hans",
    "cmn": "zh-Hans",
    "cmn-hans": "zh-Hans",
    "zt": "zh-Hant",
    "cmn-hant": "zh-Hant",
    "zh-hant-tw": "zh-TW",
    "zh-hant-hk": "zh-HK",
} | {tag.lower(): tag for tag in TARGETS}
_LOCK = threading.Lock()  # one OpenCC converter per configuration, shared by threads


def target_tag(tag: str) -> str:
    """The target ``tag`` names (``TARGETS``' spelling), read case-insensitively with ``_``
    for ``-``.

    Raises:
        ValueError: an unknown target, in one line naming the known ones.
    """
    found = ALIASES.get(str(tag).strip().replace("_", "-").lower())
    if found is None:
        raise ValueError(f"unknown target {tag!r} ({known_targets()})")
    return found


def known_targets() -> str:
    """The targets, for messages: ``targets: zh-Hans (or zh, zh-CN, zh-SG), ...``."""
    return (
        "targets: zh-Hans (or zh, zh-CN, zh-SG), zh-Hant (or zt), zh-TW (Taiwan's words), "
        "zh-HK (Hong Kong's)"
    )


@cache
def _converter(config: str):  # noqa: ANN202 (opencc.OpenCC)
    import opencc

    return opencc.OpenCC(config)


def convert(text: str, target: str) -> str:
    """``text`` (Simplified) written in ``target``'s script: OpenCC's conversion, or ``text``
    itself for zh-Hans."""
    config = TARGETS[target]
    if config is None or not text:
        return text
    converter = _converter(config)
    with _LOCK:
        return converter.convert(text)


def to_simplified(text: str) -> str:
    """``text`` in Simplified Chinese (OpenCC ``t2s``), as the model writes it."""
    converter = _converter("t2s")
    with _LOCK:
        return converter.convert(text)


def convert_aligned(
    text: str, target: str, kept: Mapping[str, str] | None = None
) -> tuple[str, list[int]]:
    """``convert(text, target)``, and for each of its characters the index of the character
    of ``text`` it came from (monotonic; ``text`` may not be empty where the result is not).

    ``kept``: texts not converted but written as given there wherever they occur (a verbatim
    span as itself; a glossary term as its user spelled it), longest first; the text between
    them is converted piece by piece."""
    if TARGETS[target] is None:
        return text, list(range(len(text)))
    wanted = {k: v for k, v in (kept or {}).items() if k}
    if not wanted:
        return _converted_part(text, 0, target)
    pattern = re.compile("|".join(map(re.escape, sorted(wanted, key=len, reverse=True))))
    out: list[str] = []
    origin: list[int] = []
    start = 0
    for match in pattern.finditer(text):
        part, where = _converted_part(text[start : match.start()], start, target)
        out.append(part)
        origin += where
        written = wanted[match.group()]
        out.append(written)
        origin += _spread(match.start(), match.end(), len(written))
        start = match.end()
    part, where = _converted_part(text[start:], start, target)
    return "".join(out) + part, origin + where


def _converted_part(text: str, offset: int, target: str) -> tuple[str, list[int]]:
    """A run of ``text`` converted, with each output character's origin (``offset`` on)."""
    converted = convert(text, target)
    if len(converted) == len(text):  # character for character, or phrases of equal length
        return converted, list(range(offset, offset + len(text)))
    origin: list[int] = []
    matcher = difflib.SequenceMatcher(None, text, converted, autojunk=False)
    for _, i1, i2, j1, j2 in matcher.get_opcodes():
        if j2 > j1:  # equal, replace, insert: spread over the characters replaced
            low = i1 if i2 > i1 else max(i1 - 1, 0)
            origin += _spread(offset + low, offset + max(i2, low + 1), j2 - j1)
    return converted, origin


def _spread(start: int, end: int, count: int) -> list[int]:
    """``count`` origins spread evenly over ``[start, end)``, in order."""
    width = max(end - start, 1)
    return [start + (k * width) // max(count, 1) for k in range(count)]
