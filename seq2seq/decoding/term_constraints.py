"""Glossary terms followed on the text a hypothesis writes (``TermConstraints``): the
``Constraints`` of lexically constrained beam search (``seq2seq.decoding.constrained``) for
target phrases, met whatever tokens write them, with texts the output may never hold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

from seq2seq.decoding.constrained import State

_UNSEEN = -1  # TermConstraints: a move not worked out yet (a state is a number >= 0, or None)
TermState = tuple[int, bytes, bool]  # a TermConstraints state: phrases met, tail, started


class TermConstraints:
    """Target phrases that must appear in a hypothesis's text, followed on that text.

    A state stands for (phrases met as a bit mask, the last bytes written, whether anything was
    written), numbered. A phrase is met when its UTF-8 bytes occur in the text, whatever tokens
    wrote it. One under way is the longest of its byte prefixes that the text ends with (bytes,
    so that a character written in byte pieces counts as it comes); its next token is the first
    of ``spell`` of the rest. A phrase not under way may start with any token whose text ends
    with a beginning of it ("的老" before "师"), so that it can begin inside a piece.

    The bank (``progress``) counts constraint tokens, as Post & Vilar's: a met phrase the
    tokens of its spelling, one under way those its written part saves from the rest's
    spelling. A coarser bank (phrases met, plus one while one is under way) loses every
    phrase longer than a token: a hypothesis two tokens into it then competes with those
    that have just begun, and loses to them.

    A phrase the vocabulary cannot write at all (``spell`` gives []) is no constraint: it could
    never be met, and would only keep every hypothesis from ending before its length limit.

    ``avoid``: texts the output may never hold, followed on the same bytes as the phrases: a
    glossary term's English translated a second time, by another word ("出租车的士",
    ``glossary.beside_texts``). ``advance`` gives None for a token that would complete one,
    unless ``banned_too`` (the search takes a banned candidate only when a sentence has no
    other open one). A text inside a phrase is not avoided: it would ban the phrase.

    Args:
        phrases: the target texts (repeats count once).
        surfaces: the bytes each token id adds to the text (a word-start mark as a space).
        spell: ``spell(text, first)``: token ids writing ``text`` at the start of the output
            (``first``) or after other text; [] where it cannot be written.
        avoid: texts no output may hold.
    """

    def __init__(
        self,
        phrases: Sequence[str],
        surfaces: Sequence[bytes],
        spell: Callable[[str, bool], list[int]],
        avoid: Sequence[str] = (),
    ) -> None:
        self.phrases = [p for p in dict.fromkeys(phrases) if spell(p, False) and spell(p, True)]
        self.count = len(self.phrases)
        self.surfaces = surfaces
        self._bytes = [phrase.encode("utf-8") for phrase in self.phrases]
        # A text inside a phrase would ban the phrase itself: not avoided.
        self._avoid = [
            text.encode("utf-8")
            for text in dict.fromkeys(avoid)
            if text and not any(text in phrase for phrase in self.phrases)
        ]
        # Beginnings of the texts to avoid: a tail keeps the longest, whatever is met.
        self._avoid_starts = {text[:end] for text in self._avoid for end in range(1, len(text))}
        self._keep = max(map(len, self._bytes + self._avoid), default=1) - 1
        # Per phrase, once r of its bytes are written: the next token, and the tokens that
        # counts as written. The tokens it may start with; the first of its spelling at the
        # start of the output; its length in tokens.
        self._next: list[list[int | None]] = []
        self._written: list[list[int]] = []
        self._entries: list[list[int]] = []
        self._first: list[list[int]] = []
        self._length: list[int] = []
        for phrase in self.phrases:
            rests = _rest_spellings(phrase, surfaces, spell)
            whole = len(rests[0])
            self._next.append([rest[0] if rest else None for rest in rests])
            self._written.append(
                [min(whole - 1, max(0, whole - len(rest))) if rest else 0 for rest in rests]
            )
            self._entries.append(_tokens_ending_in(phrase, surfaces))
            self._first.append(spell(phrase, True)[:1])
            self._length.append(whole)
        self.tokens = sum(self._length)
        # States are numbered as they are reached; what the search asks of a state is worked
        # out once, when it is first reached: an int indexes lists where a (met, tail,
        # started) tuple would be hashed at every look-up, and a search asks thousands.
        self._states: list[TermState] = []
        self._numbers: dict[TermState, int] = {}
        self._moves: list[dict[int, int | None]] = []  # per state: token -> the state after it
        self._unmet: list[int] = []
        self._progress: list[int] = []
        self._next_tokens: list[tuple[int, ...]] = []
        self._beginnings: dict[int, set[bytes]] = {}  # per mask of phrases met: the others' starts
        self._number((0, b"", False))

    def start(self) -> State:
        return 0

    def advance(self, state: State, token: int, banned_too: bool = False) -> State | None:
        moves = self._moves[cast(int, state)]
        found = moves.get(token, _UNSEEN)
        if found == _UNSEEN or (found is None and banned_too):
            met, tail, _ = self._states[cast(int, state)]
            text = tail + self.surfaces[token]
            for c, phrase in enumerate(self._bytes):
                if not met >> c & 1 and phrase in text:
                    met |= 1 << c
            found = self._number((met, self._tail(met, text), True))
            if not banned_too:  # a banned move is kept as None: only a fallback takes it
                found = None if any(avoided in text for avoided in self._avoid) else found
                moves[token] = found
        return found

    def _tail(self, met: int, text: bytes) -> bytes:
        """The longest end of ``text`` that begins a phrase not met or a text to avoid: all a
        state needs to keep of the text (either still to come starts there or later).
        Histories that differ before it reach the same state, so ``advance`` finds its answer
        already worked out."""
        beginnings = self._beginnings.get(met)
        if beginnings is None:
            unmet = [phrase for c, phrase in enumerate(self._bytes) if not met >> c & 1]
            beginnings = self._beginnings[met] = self._avoid_starts | {
                phrase[:end] for phrase in unmet for end in range(1, len(phrase))
            }
        for start in range(max(0, len(text) - self._keep), len(text)):
            if text[start:] in beginnings:
                return text[start:]
        return b""

    def unmet(self, state: State) -> int:
        return self._unmet[cast(int, state)]

    def progress(self, state: State) -> int:
        return self._progress[cast(int, state)]

    def next_tokens(self, state: State) -> Sequence[int]:
        return self._next_tokens[cast(int, state)]

    def _number(self, state: TermState) -> int:
        """The number of a state, and what the search asks of it, worked out when first seen."""
        number = self._numbers.get(state)
        if number is None:
            number = self._numbers[state] = len(self._states)
            met, tail, started = state
            progress, tokens = 0, []
            for c, phrase in enumerate(self._bytes):
                if met >> c & 1:
                    progress += self._length[c]
                    continue
                r = next((r for r in range(len(phrase) - 1, 0, -1) if tail.endswith(phrase[:r])), 0)
                progress += self._written[c][r]
                tokens += [self._next[c][r], *(() if r else self._entries[c])]
                tokens += [] if r or started else self._first[c]
            self._states.append(state)
            self._moves.append({})
            self._unmet.append(self.count - bin(met).count("1"))
            self._progress.append(progress)
            self._next_tokens.append(tuple(t for t in dict.fromkeys(tokens) if t is not None))
        return number


def _rest_spellings(
    phrase: str, surfaces: Sequence[bytes], spell: Callable[[str, bool], list[int]]
) -> list[list[int]]:
    """For each count r of the phrase's bytes written, tokens writing the other bytes: at a
    character boundary ``spell``'s; inside a character, byte pieces to finish it first."""
    byte_token = _vocabulary_index(surfaces)[1]
    data = phrase.encode("utf-8")
    rests, position = [], 0
    for index, char in enumerate(phrase):
        width = len(char.encode("utf-8"))
        rests.append(spell(phrase[index:], False))
        after = spell(phrase[index + 1 :], False) if index + 1 < len(phrase) else []
        for inside in range(position + 1, position + width):
            found = [byte_token.get(data[i : i + 1]) for i in range(inside, position + width)]
            pieces = [piece for piece in found if piece is not None]
            unwritable = len(pieces) < len(found) or (index + 1 < len(phrase) and not after)
            rests.append([] if unwritable else [*pieces, *after])
        position += width
    return rests


def _tokens_ending_in(phrase: str, surfaces: Sequence[bytes]) -> list[int]:
    """Tokens whose text ends with a beginning of ``phrase`` (at a character boundary):
    where a phrase can start inside a piece ("的老" before "师"), but never glued to a Latin
    letter or digit before it ("hi" does not start "iPhone")."""
    by_last_character = _vocabulary_index(surfaces)[0]
    found = []
    for end in range(1, len(phrase) + 1):
        prefix = phrase[:end].encode("utf-8")
        for token in by_last_character.get(phrase[end - 1], ()):
            before = surfaces[token][: len(surfaces[token]) - len(prefix)]
            if surfaces[token].endswith(prefix) and not before[-1:].isalnum():
                found.append(token)
    return found


_INDEXES: dict[int, tuple[Sequence[bytes], dict[str, list[int]], dict[bytes, int]]] = {}


def _vocabulary_index(surfaces: Sequence[bytes]) -> tuple[dict[str, list[int]], dict[bytes, int]]:
    """Tokens by the last character of their text, and the token of each single byte; built
    once per vocabulary (keyed by the surfaces' identity, which the entry keeps alive)."""
    if id(surfaces) not in _INDEXES:
        by_last: dict[str, list[int]] = {}
        single: dict[bytes, int] = {}
        for token, surface in enumerate(surfaces):
            text = surface.decode("utf-8", errors="ignore").rstrip()
            if text:
                by_last.setdefault(text[-1], []).append(token)
            if len(surface) == 1:
                single.setdefault(surface, token)
        _INDEXES[id(surfaces)] = (surfaces, by_last, single)
    _, by_last_character, byte_token = _INDEXES[id(surfaces)]
    return by_last_character, byte_token
