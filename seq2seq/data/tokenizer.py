"""A joint English+Chinese SentencePiece vocabulary with fixed special ids.

One vocabulary serves both languages because the model shares (ties) its source embedding,
target embedding and output projection. Special ids are fixed so model code can rely on them
without a tokenizer at hand.

Sources end with ``</s>``, as Marian and fairseq train their models (and as Hugging Face's
``MarianTokenizer`` feeds an export): ``encode_source`` appends the eos when
``source_ends_with_eos`` is True, the default for new models. Models trained before that
convention read sources without it; their checkpoints say so (:func:`checkpoint_tokenizer`)
and keep translating exactly as before. Decoder-only models join ``[bos] src [sep] tgt`` and
use ``source_ends_with_eos=False``.

Byte fallback: a character without a piece of its own is spelled as its UTF-8 bytes, one
``<0xNN>`` piece per byte (256 pieces, ids right after the specials and ``<sep>``), instead of
``<unk>``. Every text therefore encodes and decodes exactly, and the model never learns to
emit ``<unk>`` (shown as "⁇") for a rare Chinese character in a training target.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

import sentencepiece as spm

from seq2seq.data.paired_tokenizer import MAGIC as PAIRED_MAGIC
from seq2seq.data.paired_tokenizer import PairedTokenizer
from seq2seq.errors import DataError

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
SEP = "<sep>"  # between source and target of a decoder-only translation model
# In a checkpoint's seq2seq section (seq2seq.inference.checkpoint): whether the model read
# sources ending with eos; absent in checkpoints written before that convention, whose models read
# none.
SOURCE_EOS_KEY = "source_ends_with_eos"


class TokenizerLike(Protocol):
    """What translation, data preparation and export use of a tokenizer: our
    :class:`Tokenizer`, or an imported Marian model's
    :class:`~seq2seq.data.paired_tokenizer.PairedTokenizer`.

    Only :class:`Tokenizer` has ``encode``/``encode_batch`` (one model for any text): the
    decoder-only models and term annotation, which only ours serve, use those."""

    @property
    def pad_id(self) -> int: ...
    @property
    def unk_id(self) -> int: ...
    @property
    def bos_id(self) -> int: ...
    @property
    def eos_id(self) -> int: ...
    @property
    def sep_id(self) -> int | None: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def appended_pad(self) -> bool: ...
    @property
    def source_ends_with_eos(self) -> bool: ...

    def encode_source(self, text: str) -> list[int]: ...
    def encode_target(self, text: str) -> list[int]: ...
    def encode_sources(self, texts: Sequence[str]) -> list[list[int]]: ...
    def encode_targets(self, texts: Sequence[str]) -> list[list[int]]: ...
    def decode(self, ids: Sequence[int]) -> str: ...
    def id_to_piece(self, token_id: int) -> str: ...
    def piece_to_id(self, piece: str) -> int: ...
    def to_bytes(self) -> bytes: ...
    def save(self, path: str | Path) -> None: ...


class Tokenizer:
    """Wraps a SentencePiece model; ``encode`` adds no specials, ``decode`` strips them.

    Source and target share the model: ``encode_target`` is ``encode``, ``encode_source`` is
    ``encode`` plus the eos when ``source_ends_with_eos`` (an imported Marian model's
    :class:`~seq2seq.data.paired_tokenizer.PairedTokenizer` cuts each side with its own model).

    Args:
        model_proto: a serialized SentencePiece ``ModelProto`` (see :meth:`to_bytes`).
        source_ends_with_eos: ``encode_source`` appends ``eos_id`` (new encoder-decoder
            models); False for models trained before, and for decoder-only models.
    """

    pad_id, unk_id, bos_id, eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID
    appended_pad = False  # pad is one of the pieces (PairedTokenizer: see there)

    def __init__(self, model_proto: bytes, source_ends_with_eos: bool = True) -> None:
        self.source_ends_with_eos = source_ends_with_eos
        self._proto = bytes(model_proto)
        self._sp = spm.SentencePieceProcessor(model_proto=self._proto)
        specials = (self._sp.pad_id(), self._sp.unk_id(), self._sp.bos_id(), self._sp.eos_id())
        if specials != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise ValueError(f"model has special ids (pad, unk, bos, eos) = {specials}, not 0-3")

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int,
        model_type: str = "unigram",
        character_coverage: float = 0.9995,
        input_sentence_size: int = 200_000,
        num_threads: int = 2,
        seed: int = 1,
        user_symbols: Sequence[str] = (),
    ) -> Tokenizer:
        """Trains a model in memory on ``texts`` (both languages, already normalised); its
        sources end with eos (``from_bytes(to_bytes(), False)`` for a decoder-only model's).

        Args:
            texts: Training sentences; pass both sides of the training split.
            vocab_size: Exact vocabulary size including the four specials and the 256 byte
                pieces. SentencePiece raises if the text is too small to fill it.
            model_type: ``unigram`` or ``bpe`` (``char``/``word`` work too).
            character_coverage: Fraction of characters covered by single-character pieces; the
                rest are spelled as byte pieces. Below 1 keeps Chinese's long tail of rare
                characters from taking pieces that common words would use better.
            input_sentence_size: Train on at most this many sentences (a random sample).
            num_threads: Trainer threads.
            seed: Seed for SentencePiece's sampling, for a reproducible vocabulary.
            user_symbols: Extra pieces with ids right after the specials, never split and
                never produced from ordinary text (e.g. ``<sep>``).
        """
        spm.set_random_generator_seed(seed)
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(texts),
            model_writer=model,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            input_sentence_size=input_sentence_size,
            shuffle_input_sentence=True,
            num_threads=num_threads,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            # Text is normalised by seq2seq.data.clean already; SentencePiece's default NFKC
            # would fold Chinese full-width punctuation, so decode(encode(x)) != x.
            normalization_rule_name="identity",
            byte_fallback=True,  # rare characters become byte pieces, never <unk>
            minloglevel=2,
            **({"control_symbols": list(user_symbols)} if user_symbols else {}),
        )
        return cls(model.getvalue())

    @property
    def vocab_size(self) -> int:
        """Number of ids, specials included."""
        return self._sp.get_piece_size()

    @property
    def sep_id(self) -> int | None:
        """Id of the ``<sep>`` piece, or None when the vocabulary has none."""
        token_id = self._sp.piece_to_id(SEP)
        return None if token_id == UNK_ID else token_id

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, without bos/eos."""
        return self._sp.encode(text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, without bos/eos."""
        return self._sp.encode(list(texts))

    def encode_source(self, text: str) -> list[int]:
        """What the encoder reads: the ids of ``text``, then eos if ``source_ends_with_eos``."""
        return self._sp.encode(text) + self._source_end()

    def encode_target(self, text: str) -> list[int]:
        """Target ids of ``text`` (no bos/eos)."""
        return self._sp.encode(text)

    def encode_sources(self, texts: Sequence[str]) -> list[list[int]]:
        """:meth:`encode_source` of each text."""
        end = self._source_end()
        return [ids + end for ids in self.encode_batch(texts)]

    def _source_end(self) -> list[int]:
        return [EOS_ID] if self.source_ends_with_eos else []

    def encode_targets(self, texts: Sequence[str]) -> list[list[int]]:
        """:meth:`encode_target` of each text."""
        return self.encode_batch(texts)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``: stops at the first eos and ignores pad and bos.

        Byte pieces that do not form valid UTF-8 (a model can emit a character's first bytes
        only) decode to one U+FFFD replacement character per byte; nothing raises.
        """
        ids = list(ids)
        if EOS_ID in ids:
            ids = ids[: ids.index(EOS_ID)]
        return self._sp.decode([i for i in ids if i not in (PAD_ID, BOS_ID)])

    def id_to_piece(self, token_id: int) -> str:
        """The vocabulary piece of ``token_id``."""
        return self._sp.id_to_piece(token_id)

    def piece_to_id(self, piece: str) -> int:
        """The id of a vocabulary piece (``UNK_ID`` when there is no such piece)."""
        return self._sp.piece_to_id(piece)

    def to_bytes(self) -> bytes:
        """The serialized model, e.g. to embed in a checkpoint."""
        return self._proto

    @classmethod
    def from_bytes(cls, model_proto: bytes, source_ends_with_eos: bool = True) -> Tokenizer:
        """Inverse of :meth:`to_bytes` (which holds the SentencePiece model only: the source
        convention is stored beside it, e.g. in a checkpoint's section)."""
        return cls(model_proto, source_ends_with_eos)

    def save(self, path: str | Path) -> None:
        """Writes the model file (loadable by plain SentencePiece too)."""
        Path(path).write_bytes(self._proto)

    @classmethod
    def load(cls, path: str | Path, source_ends_with_eos: bool = True) -> Tokenizer:
        """Reads a model file written by :meth:`save` or ``spm_train``."""
        return cls(Path(path).read_bytes(), source_ends_with_eos)


def blank_ids(tokenizer: TokenizerLike) -> tuple[int, ...]:
    """The pieces that write no visible character: a bare ``▁`` (which decodes to nothing at
    the start of a line), pieces of ``▁`` and whitespace alone, and the byte pieces of ASCII
    whitespace and control bytes. A search never ends an output made of these alone
    (``seq2seq.decoding.search.SpecialTokens``): it would decode to an empty line."""
    blank = []
    for token_id in range(tokenizer.vocab_size):
        piece = tokenizer.id_to_piece(token_id)
        byte = _BYTE_PIECE.fullmatch(piece)
        if byte is not None:
            if int(byte.group(1), 16) <= 0x20 or int(byte.group(1), 16) == 0x7F:
                blank.append(token_id)
        elif piece and not piece.replace("▁", " ").strip() and not piece.startswith("<"):
            blank.append(token_id)
    return tuple(blank)


def symbol_ids(tokenizer: TokenizerLike) -> tuple[int, ...]:
    """The pieces that write no letter: digits, punctuation, symbols and white space, and the
    byte pieces of ASCII bytes that are no letter. The repetition guard lets these repeat
    (``1000000``, ``...``, ``---``: ``seq2seq.decoding.repetition``); control pieces
    (``<s>``, ``<pad>``, ...) are left out, never generated anyway."""
    symbols = []
    for token_id in range(tokenizer.vocab_size):
        piece = tokenizer.id_to_piece(token_id)
        byte = _BYTE_PIECE.fullmatch(piece)
        if byte is not None:
            value = int(byte.group(1), 16)
            if value < 0x80 and not chr(value).isalpha():
                symbols.append(token_id)
        elif piece and not _CONTROL_PIECE.fullmatch(piece) and not any(map(str.isalpha, piece)):
            symbols.append(token_id)
    return tuple(symbols)


def byte_piece_ids(tokenizer: TokenizerLike) -> tuple[int, ...]:
    """The ids of the 256 byte-fallback pieces ``<0x00>`` .. ``<0xFF>``, in byte order; empty
    for a vocabulary without all of them (an imported Marian model's). The searches keep them
    valid UTF-8 (``seq2seq.decoding.utf8``)."""
    found: dict[int, int] = {}
    for token_id in range(tokenizer.vocab_size):
        byte = _BYTE_PIECE.fullmatch(tokenizer.id_to_piece(token_id))
        if byte is not None:
            found.setdefault(int(byte.group(1), 16), token_id)
    return tuple(found[b] for b in range(256)) if len(found) == 256 else ()


_BYTE_PIECE = re.compile(r"<0x([0-9A-F]{2})>")
_CONTROL_PIECE = re.compile(r"<[^<>\s]+>")  # <s>, </s>, <pad>, <unk>, term tags


def tokenizer_from_bytes(data: bytes, source_ends_with_eos: bool = True) -> TokenizerLike:
    """The tokenizer a checkpoint or data cache stores: a SentencePiece model (ours), or an
    imported Marian model's :class:`PairedTokenizer` (whose sources always end with eos, so
    ``source_ends_with_eos`` is ignored)."""
    if data.startswith(PAIRED_MAGIC):
        return PairedTokenizer.from_bytes(data)
    return Tokenizer.from_bytes(data, source_ends_with_eos)


def load_tokenizer(path: str | Path, source_ends_with_eos: bool = True) -> TokenizerLike:
    """:func:`tokenizer_from_bytes` of a file."""
    return tokenizer_from_bytes(Path(path).read_bytes(), source_ends_with_eos)


def checkpoint_tokenizer(path: str | Path) -> TokenizerLike:
    """The tokenizer a seq2seq checkpoint holds, its sources ending with eos as the model was
    trained (False for a checkpoint written before the convention), read without building its
    model: what fine-tuning from the checkpoint cuts its data with.

    Raises:
        DataError: the file is missing, unreadable, or holds no tokenizer.
    """
    return section_tokenizer(_tokenizer_section(path))


def section_tokenizer(section: dict) -> TokenizerLike:
    """The tokenizer of a checkpoint's ``seq2seq`` section, reading sources as its model was
    trained: a section without :data:`SOURCE_EOS_KEY` was written before sources ended with
    eos, by a model trained without."""
    return tokenizer_from_bytes(section["tokenizer"], bool(section.get(SOURCE_EOS_KEY, False)))


def checkpoint_tokenizer_bytes(path: str | Path) -> bytes:
    """The tokenizer a seq2seq checkpoint holds (in its ``seq2seq`` section, see
    :mod:`seq2seq.inference.checkpoint`), read without building its model. The bytes hold the
    vocabulary, not the source convention: :func:`checkpoint_tokenizer` has both.

    Raises:
        DataError: the file is missing, unreadable, or holds no tokenizer.
    """
    return _tokenizer_section(path)["tokenizer"]


def _tokenizer_section(path: str | Path) -> dict:
    """A checkpoint's ``seq2seq`` section, checked to hold a tokenizer."""
    from seq2seq.moved import load_checkpoint_file

    try:  # mmap: the weights are never read into memory
        checkpoint = load_checkpoint_file(path, mmap=True)
    except Exception as error:  # missing, truncated, not a torch file
        raise DataError.at(path, None, f"cannot read checkpoint ({str(error)[:200]})") from None
    section = checkpoint.get("seq2seq") if isinstance(checkpoint, dict) else None
    if not isinstance(section, dict) or not section.get("tokenizer"):
        raise DataError.at(path, None, "not a seq2seq checkpoint with a tokenizer")
    return section
