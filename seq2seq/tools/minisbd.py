"""The sentence splitter of an Argos package (``minisbd/en.onnx``): a MiniSBD model of rules.

Argos splits each paragraph into sentences with MiniSBD, a Stanza tokenizer exported to ONNX.
Its other splitters need Stanza or spaCy and their models (hundreds of MB) and ``NONE`` is not
implemented, so the package carries a MiniSBD model of its own: a small ONNX graph with no
learnt weights (:func:`splitter_onnx`). It marks a sentence end after ``. ! ?`` or ``…`` (and
any closing quotes) followed by a space and anything but a lower-case letter, except after
the abbreviations of :data:`ABBREVIATIONS` and initials (``J. K. Rowling``). The ONNX file is
written by the few lines of protobuf of :mod:`seq2seq.tools.onnx_graph`; neither ``onnx`` nor
``onnxruntime`` is needed here (MiniSBD brings ``onnxruntime`` where Argos runs).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from seq2seq.tools.onnx_graph import Graph

# A period after these words (any case, a whole word) ends no sentence; after those of
# ABBREVIATIONS_BEFORE_NUMBERS only when a number follows ("No. 5", but "I said no. Then").
ABBREVIATIONS = ("mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs")
ABBREVIATIONS_BEFORE_NUMBERS = ("no", "fig", "vol")
TERMINALS = ".!?…"
CLOSERS = "\"'”’»"  # closing quotes: "Go." Then (brackets not: "(the boy.) Left" goes on)
SPLITTER_VOCABULARY = (
    " "
    + "abcdefghijklmnopqrstuvwxyz"
    + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    + "0123456789"
    + TERMINALS
    + CLOSERS
    + "".join(chr(c) for c in range(0xC0, 0x250) if chr(c).isalpha())  # accented letters
)
FLAGS = ("dot", "terminal", "closer", "space", "lower", "upper", "digit", "filled")
_BASE = 27  # a word's code: its letters (1..26) as digits, the last letter lowest


def splitter_units() -> list[str]:
    """The splitter's vocabulary: ids 0 and 1 are MiniSBD's ``<PAD>`` and ``<UNK>``; every
    other character is ``<UNK>`` (no flag, not a letter)."""
    return ["<PAD>", "<UNK>", *SPLITTER_VOCABULARY]


def _flag_rows(units: list[str]) -> list[list[float]]:
    rows = []
    for unit in units:
        flags = {
            "dot": unit == ".",
            "terminal": unit in TERMINALS,
            "closer": unit in CLOSERS,
            "space": unit == " ",
            "lower": len(unit) == 1 and unit.islower(),
            "upper": len(unit) == 1 and unit.isupper(),
            "digit": unit.isdigit(),
            "filled": unit not in (" ", "<PAD>"),  # what may not stand before an initial
        }
        rows.append([float(flags[name]) for name in FLAGS])
    return rows


def _word_code(word: str) -> int:
    return sum((ord(c) - ord("a") + 1) * _BASE**i for i, c in enumerate(reversed(word)))


def splitter_metadata() -> dict[str, str]:
    """What MiniSBD reads from the model's metadata: its config, vocabulary and lexicon."""
    units = splitter_units()
    vocab = {
        "lang": "en",
        "idx": 0,
        "cutoff": 0,
        "lower": False,
        "_unit2id": {unit: i for i, unit in enumerate(units)},
        "_id2unit": units,
    }
    config = {
        "skip_newline": False,
        "max_seqlen": 1000,
        "no_ssplit": False,
        "batch_size": 1,
        "feat_funcs": ["space_before"],  # fed to the graph, not used: the ids say it all
        "use_dictionary": False,
        "num_dict_feat": 0,
    }
    return {
        "lang_code": "en",
        "config": json.dumps(config),
        "vocab": json.dumps(vocab, ensure_ascii=False),
        "lexicon": "null",
        "producer": "seq2seq export --format argos",
    }


def splitter_onnx() -> bytes:
    """A MiniSBD model: ``units`` (B, T) character ids and ``features`` (B, T, 1) in, class
    scores (B, T, 5) out, class 2 (sentence end) where a sentence ends and 1 (token end)
    elsewhere (every character is a token: MiniSBD needs tokens only to find the sentences).

    t ends a sentence when it is a terminal, or a closing quote after one, is followed by a
    space and then not by a lower-case letter, and is no period of an abbreviation or initial.
    """
    g = Graph()
    units = splitter_units()
    flags = g.node("Gather", g.const(_flag_rows(units), "float"), "units")  # (B, T, K)
    letters = [_word_code(u.lower()) if u.isascii() and u.isalpha() else 0 for u in units]
    codes = g.node("Gather", g.const(letters, "int64"), "units")  # (B, T): 0 = not a letter

    def flag(name: str, shift: int = 0) -> str:  # (B, T, 1): the flag of t - shift
        column = FLAGS.index(name)
        return g.shift(g.node("Slice", flags, *g.ints([column], [column + 1], [2])), shift, 3)

    def letter(shift: int) -> str:  # (B, T): the letter code of t - shift
        return g.shift(codes, shift, 2)

    def after_word(words: Sequence[str]) -> str:  # (B, T, 1): a whole word of ``words`` ends
        found = []  # at t - 1
        for size in sorted({len(w) for w in words}):
            code = letter(1)
            for i in range(2, size + 1):
                scaled = g.node("Mul", letter(i), g.const([_BASE ** (i - 1)], "int64"))
                code = g.node("Add", code, scaled)
            code = g.node("Unsqueeze", code, g.const([2], "int64"))
            wanted = g.const([_word_code(w) for w in words if len(w) == size], "int64")
            match = g.node("ReduceMax", g.as_float(g.node("Equal", code, wanted)), axes=[2])
            start = g.node("Equal", letter(size + 1), g.const([0], "int64"))  # no letter before
            start = g.node("Unsqueeze", g.as_float(start), g.const([2], "int64"))
            found.append(g.node("Mul", match, start))
        return g.node("Max", *found)

    one = g.const([1.0], "float")
    ends = g.node("Max", flag("terminal"), g.node("Mul", flag("closer"), flag("terminal", 1)))
    next_word = g.node("Sub", one, flag("lower", -2))
    ends = g.node("Mul", g.node("Mul", ends, flag("space", -1)), next_word)
    initial = g.node("Mul", flag("upper", 1), g.node("Sub", one, flag("filled", 2)))
    numbered = g.node("Mul", after_word(ABBREVIATIONS_BEFORE_NUMBERS), flag("digit", -2))
    abbreviation = g.node("Max", initial, after_word(ABBREVIATIONS), numbered)
    ends = g.node("Mul", ends, g.node("Sub", one, g.node("Mul", flag("dot"), abbreviation)))
    scores = g.node("Mul", ends, g.const([0.0, 0.0, 2.0, 0.0, 0.0], "float"))
    g.node("Add", scores, g.const([0.0, 1.0, 0.0, 0.0, 0.0], "float"), output="scores")
    return g.model(splitter_metadata())
