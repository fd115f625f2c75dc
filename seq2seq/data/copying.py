"""The ``copy_spans`` modifier: spans a translation keeps as written, on both sides of a pair.

At inference a URL, a version or an identifier is kept by placement (``formats.verbatim``), but
the model still reads it and writes the words around it: one that never saw such a span in
training guesses (``Write to info@shop.example for a refund.`` -> 写出出出出事). Production
pipelines teach copying in the data: OpusTrainer's placeholder modifier puts the same string in
place of an aligned word on both sides, Bergamot's inline noise puts made-up tokens there.
This modifier does both with the spans users send:

- a span the pair already has on both sides (``7:00``, ``3.5``, ``DNA``) is replaced on both by
  a made-up span of the same kind, so that what is learnt is copying, not these few strings;
- otherwise a word (or a run of up to three) whose dictionary translation is a word of the
  reference (the term modifier's alignment, :mod:`seq2seq.data.terms`) is replaced, in the
  source and in the reference, by a made-up span of any kind: a URL, an e-mail address, a path,
  a version, a number, a date, a time, an identifier, a ``--flag``, a placeholder, an acronym,
  or a Latin-script name the model cannot know (``Kavrotin``).

A pair with neither is left as it is. Every span is made from the pair's own draw (a
``random.Random`` seeded with it): the same in every process, epoch and resume, as the other
modifiers. Made-up spans are what ``formats.verbatim`` detects as the same kind, one whole span
(tests check it), so training and inference agree on what a span is.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from seq2seq.formats.verbatim import TRANSLATED_ACRONYMS, Verbatim

COPY_FORMAT = 1  # how spans are made and placed: part of the cache's key (a change prepares again)
_LATIN_OR_DIGIT = re.compile(r"[A-Za-z0-9]")
_ONSETS = "b c d f g h k l m n p r s t v z br dr gr kr pl st tr".split()
_VOWELS = "a e i o u ai ea io ou".split()
_CODAS = ["", "", "", "n", "r", "s", "l", "x", "t"]
_TLDS = "com org net io dev app example".split()
_VERBATIM = Verbatim()


def _word(rng: random.Random, syllables: int | None = None) -> str:
    """A pronounceable made-up word of lower-case Latin letters (``kavrotin``)."""
    count = syllables or rng.randint(2, 3)
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(count)) + rng.choice(
        _CODAS
    )


def _url(rng: random.Random) -> str:
    host = f"{_word(rng)}.{rng.choice(_TLDS)}"
    path = "/".join(_word(rng, 2) for _ in range(rng.randint(0, 2)))
    return rng.choice([f"https://{host}/{path}".rstrip("/"), f"www.{host}", f"http://{host}"])


def _path(rng: random.Random) -> str:
    name = _word(rng)
    return rng.choice(
        [
            f"/usr/local/bin/{name}",
            f"~/.config/{name}",
            f"./{name}.sh",
            f"C:\\Users\\{name}",
            f"docs/{name}.md",
            f"/etc/{name}/{_word(rng, 2)}.conf",
        ]
    )


def _number(rng: random.Random) -> str:
    value = rng.choice(
        [
            f"{rng.randint(1, 999):,}",
            f"{rng.randint(1000, 99999):,}.{rng.randint(0, 99):02d}",
            f"{rng.randint(2, 99)}.{rng.randint(1, 9)}",
            str(rng.randint(10, 9999)),
        ]
    )
    return rng.choice(["", "", "-", "$", "€"]) + value + rng.choice(["", "", "%", "km", "GB", "MB"])


def _identifier(rng: random.Random) -> str:
    a, b = _word(rng, 2), _word(rng, 2)
    return rng.choice(
        [
            a + b.capitalize(),  # camelCase
            a.capitalize() + b.capitalize() + "Error",  # PascalCase with inner capitals
            f"{a}_{b}",  # snake_case
            f"{a}.{b}",  # a dotted name
            f"{a}.{b}()",
            f"{a}{rng.randint(2, 64)}",  # a name with digits
        ]
    )


def _version(rng: random.Random) -> str:
    """3.2.7, 1.0.0-beta.1, v2.16; never a date's shape (16.12.18) or a decimal's (8.2)."""
    parts = [rng.randint(0, 20), rng.randint(0, 30), rng.randint(0, 9)]
    version = ".".join(map(str, parts)) + rng.choice(["", "", "", "-beta.1", "-rc2"])
    return rng.choice([version, version, f"v{parts[0]}.{parts[1]}"])


def _placeholder(rng: random.Random) -> str:
    name = _word(rng, 2)
    return rng.choice(["%s", "%d", f"%({name})s", "{0}", f"{{{name}}}", f"${{{name.upper()}}}"])


def _acronym(rng: random.Random) -> str:
    while True:
        letters = "".join(rng.choice("ABCDEFGHJKLMNPRSTUWYZ") for _ in range(rng.randint(2, 4)))
        if letters not in TRANSLATED_ACRONYMS:
            return letters


_MAKERS: dict[str, Callable[[random.Random], str]] = {
    "url": _url,
    "email": lambda rng: f"{_word(rng, 2)}@{_word(rng)}.{rng.choice(_TLDS)}",
    "path": _path,
    "date": lambda rng: rng.choice(
        [
            f"20{rng.randint(0, 39):02d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            f"{rng.randint(1, 28):02d}/{rng.randint(1, 12):02d}/20{rng.randint(0, 39):02d}",
        ]
    ),
    "time": lambda rng: f"{rng.randint(0, 23)}:{rng.randint(0, 59):02d}",
    "version": _version,
    "number": _number,
    "placeholder": _placeholder,
    "flag": lambda rng: rng.choice(
        [f"--{_word(rng, 2)}-{_word(rng, 2)}", f"--{_word(rng, 2)}={rng.randint(1, 99)}"]
    ),
    "identifier": _identifier,
    "acronym": _acronym,
    "name": lambda rng: _word(rng).capitalize(),  # a Latin-script word the model cannot know
}
SPAN_KINDS = tuple(_MAKERS)


def made_up_span(rng: random.Random, kind: str | None = None) -> tuple[str, str]:
    """(span, kind): a made-up span of ``kind`` (any of :data:`SPAN_KINDS` when None)."""
    kind = kind or rng.choice(SPAN_KINDS)
    return _MAKERS[kind](rng), kind


def copy_span(en: str, zh: str, draw: float) -> tuple[str, str] | None:
    """The pair with one span put on both sides (the module docstring says where), drawn from
    ``draw`` in [0, 1); None when the pair has no place for one."""
    rng = random.Random(int(draw * (1 << 53)))
    places = [(s, _one_place(zh, en[s.start : s.end])) for s in _VERBATIM.spans(en)]
    shared = [(span, at) for span, at in places if at is not None]
    if shared:
        span, at = shared[rng.randrange(len(shared))]
        new, _ = made_up_span(rng, span.kind if span.kind in _MAKERS else None)
        return en[: span.start] + new + en[span.end :], _put(
            zh, at, at + span.end - span.start, new
        )
    place = _aligned_word(en, zh, rng.random())
    if place is None:
        return None
    (start, end), (at, stop) = place
    new, _ = made_up_span(rng)
    return en[:start] + new + en[end:], _put(zh, at, stop, new)


def _one_place(zh: str, text: str) -> int | None:
    """Where ``text`` stands in ``zh`` as a whole (no Latin letter or digit against it), when it
    stands there once; else None (``3`` in 30, or twice)."""
    found = [
        m.start() for m in re.finditer(rf"(?<![A-Za-z0-9]){re.escape(text)}(?![A-Za-z0-9])", zh)
    ]
    return found[0] if len(found) == 1 else None


def _aligned_word(en: str, zh: str, pick: float) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """((start, end) in ``en``, (start, end) in ``zh``) of a word and its translation."""
    from seq2seq.data.terms import _candidates, _free_occurrence, term_table, word_spans

    table, words = term_table(None), word_spans(en)
    found = _candidates(words, zh, table)
    if not found:
        return None
    i, n, key = found[int(pick * len(found))]
    place = _free_occurrence(zh, [c for c in table[key] if len(c) > 1], [])
    if place is None:
        return None
    at, used = place
    return (words[i][1], words[i + n - 1][2]), (at, at + len(used))


def _put(zh: str, start: int, end: int, span: str) -> str:
    """``zh`` with ``span`` in place of ``[start, end)``, set off by a space from a Latin letter
    or digit against it (Chinese writes 版本3.2.7 but ``Python 3``)."""
    before = " " if start and _LATIN_OR_DIGIT.match(zh[start - 1]) else ""
    after = " " if end < len(zh) and _LATIN_OR_DIGIT.match(zh[end]) else ""
    return zh[:start] + before + span + after + zh[end:]
