"""The tokenizer of an imported Marian (OPUS-MT) model: two SentencePiece models, one vocabulary.

Marian models cut English with a source SentencePiece model and Chinese with a target one, and
map both sides' pieces to ids through ONE vocabulary (``vocab.json``), the rows of the shared
embedding. This class does exactly what Hugging Face's ``MarianTokenizer`` does, so imported
models see the ids they were trained on:

- a source is ``[target-language token] + pieces + [eos]``: Marian models read an eos at the
  end of every source, and multi-target models a token such as ``>>cmn_Hans<<`` first (stored
  here, so users never type it);
- a piece missing from the vocabulary becomes ``<unk>``;
- output ids are turned back into pieces through the vocabulary and joined by the target
  SentencePiece model.

Special ids are the model's own (Marian: eos 0, unk 1). Marian starts decoding from its
``<pad>`` token (whose embedding is zero); imported models keep that row as their ``bos`` and
get a distinct padding id after the last piece, so padding masks never hide the start token
(:mod:`seq2seq.tools.pretrained`).

It has the interface of :class:`seq2seq.data.tokenizer.Tokenizer` that translation needs, and
serialises to bytes (:meth:`to_bytes`) that :func:`seq2seq.data.tokenizer.tokenizer_from_bytes`
recognises, so checkpoints and data caches store it where they store a SentencePiece model.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sentencepiece as spm

MAGIC = b"seq2seq paired tokenizer 1\n"  # starts the serialised form (never a SentencePiece model)
ADDED_PAD_PIECE = "<seq2seq-pad>"  # shown for the padding id an import appends


class PairedTokenizer:
    """Source and target SentencePiece models over one shared vocabulary (Marian's layout).

    Args:
        source_model: serialised source SentencePiece model (``source.spm``).
        target_model: serialised target SentencePiece model (``target.spm``).
        vocab: piece -> id, the shared vocabulary (``vocab.json``).
        specials: the ids ``pad``, ``unk``, ``bos`` and ``eos``; a ``pad`` equal to
            ``len(vocab)`` is a padding id added after the vocabulary.
        target_token: piece prefixed to every source (e.g. ``>>cmn_Hans<<``), or None.
    """

    def __init__(
        self,
        source_model: bytes,
        target_model: bytes,
        vocab: dict[str, int],
        specials: dict[str, int],
        target_token: str | None = None,
    ) -> None:
        self._source_model, self._target_model = bytes(source_model), bytes(target_model)
        self._source = spm.SentencePieceProcessor(model_proto=self._source_model)
        self._target = spm.SentencePieceProcessor(model_proto=self._target_model)
        self.vocab = dict(vocab)
        self.pieces = {i: piece for piece, i in self.vocab.items()}
        self.specials = dict(specials)
        self.pad_id, self.unk_id = specials["pad"], specials["unk"]
        self.bos_id, self.eos_id = specials["bos"], specials["eos"]
        if target_token is not None and target_token not in self.vocab:
            known = ", ".join(self.language_tokens()[:12]) or "none"
            raise ValueError(
                f"target-language token {target_token!r} is not in the vocabulary (it has: {known})"
            )
        self.target_token = target_token

    def language_tokens(self) -> list[str]:
        """The vocabulary's target-language tokens (``>>xx<<``), as MarianTokenizer finds them."""
        return [piece for piece in self.vocab if piece.startswith(">>") and piece.endswith("<<")]

    @property
    def vocab_size(self) -> int:
        """Number of ids: the vocabulary, plus the padding id when an import appended one."""
        return max(len(self.vocab), self.pad_id + 1)

    source_ends_with_eos = True  # what Marian models read, always (a cut source keeps it)

    @property
    def appended_pad(self) -> bool:
        """Whether the padding id was appended after the vocabulary (by an import)."""
        return self.pad_id == len(self.vocab)

    @property
    def sep_id(self) -> None:
        """No ``<sep>``: Marian models are encoder-decoder models."""
        return None

    # -- encoding ---------------------------------------------------------------------------

    def _ids(self, pieces: Sequence[str]) -> list[int]:
        return [self.vocab.get(piece, self.unk_id) for piece in pieces]

    def encode_source(self, text: str) -> list[int]:
        """What the encoder reads: ``[target token] + source pieces + [eos]``."""
        if self.target_token is not None:
            text = f"{self.target_token} {text}"
        code, rest = _split_language_code(text)
        return self._ids(code + self._source.encode(rest, out_type=str)) + [self.eos_id]

    def encode_target(self, text: str) -> list[int]:
        """Target ids without bos/eos, cut by the target SentencePiece model."""
        return self._ids(self._target.encode(text, out_type=str))

    def encode_sources(self, texts: Sequence[str]) -> list[list[int]]:
        """:meth:`encode_source` of each text."""
        return [self.encode_source(text) for text in texts]

    def encode_targets(self, texts: Sequence[str]) -> list[list[int]]:
        """:meth:`encode_target` of each text."""
        return [self.encode_target(text) for text in texts]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of output ids: stops at the first eos, drops the other specials, joins the
        pieces with the target model (as ``MarianTokenizer.decode(skip_special_tokens=True)``)."""
        ids = list(ids)
        if self.eos_id in ids:
            ids = ids[: ids.index(self.eos_id)]
        dropped = {self.pad_id, self.bos_id, self.unk_id}
        pieces = [self.pieces[i] for i in ids if i not in dropped and i in self.pieces]
        return self._target.decode_pieces(pieces).replace("\u2581", " ").strip()

    def id_to_piece(self, token_id: int) -> str:
        """The vocabulary piece of ``token_id``."""
        return self.pieces.get(token_id, ADDED_PAD_PIECE if token_id == self.pad_id else "")

    def piece_to_id(self, piece: str) -> int:
        """The id of a vocabulary piece (``unk_id`` when there is no such piece)."""
        return self.vocab.get(piece, self.unk_id)

    # -- storage ----------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The serialised tokenizer: :data:`MAGIC` then one JSON object."""
        state: dict[str, Any] = {
            "source_model": base64.b64encode(self._source_model).decode("ascii"),
            "target_model": base64.b64encode(self._target_model).decode("ascii"),
            "vocab": self.vocab,
            "specials": self.specials,
            "target_token": self.target_token,
        }
        return MAGIC + json.dumps(state, ensure_ascii=False).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> PairedTokenizer:
        """Inverse of :meth:`to_bytes`."""
        if not data.startswith(MAGIC):
            raise ValueError("not a serialised PairedTokenizer")
        state = json.loads(data[len(MAGIC) :].decode("utf-8"))
        return cls(
            base64.b64decode(state["source_model"]),
            base64.b64decode(state["target_model"]),
            state["vocab"],
            state["specials"],
            state["target_token"],
        )

    def save(self, path: str | Path) -> None:
        """Writes :meth:`to_bytes` to ``path``."""
        Path(path).write_bytes(self.to_bytes())

    def save_marian_files(self, directory: Path) -> None:
        """``source.spm``, ``target.spm`` and ``vocab.json`` as MarianTokenizer reads them."""
        (directory / "source.spm").write_bytes(self._source_model)
        (directory / "target.spm").write_bytes(self._target_model)
        text = json.dumps(self.vocab, ensure_ascii=False, indent=0)
        (directory / "vocab.json").write_text(text, encoding="utf-8")


def _split_language_code(text: str) -> tuple[list[str], str]:
    """MarianTokenizer's ``remove_language_code``: a leading ``>>xx<<`` is one token."""
    if text.startswith(">>") and (end := text.find("<<")) != -1:
        return [text[: end + 2]], text[end + 2 :]
    return [], text
