"""Monolingual data for a decoder-only language model: clean, split, tokenize, pack.

Each document (a line of text) becomes ``[bos] tokens [eos]``; documents are concatenated in
corpus order and cut into blocks of ``block_size + 1`` tokens that overlap by one, so every
token but the very first is predicted exactly once (input ``block[:-1]``, target
``block[1:]``). The bos/eos pairs mark the document boundaries inside a block, as GPT-2's
``<|endoftext|>`` does; attention may look across them, and the model learns that an eos
starts something unrelated.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from seq2seq.data.clean import normalize_en, normalize_zh, text_key


def clean_document_batch(texts: list[str], lang: str) -> dict[str, Any]:
    """Normalises a batch of documents (a ``datasets`` batched map): the normalised ``text``,
    whether it is ``empty`` and its 128-bit key (``key_hi``, ``key_lo``,
    :func:`~seq2seq.data.clean.text_key`) for de-duplication and the split on arrays."""
    normalize = normalize_zh if lang == "zh" else normalize_en
    docs = [normalize(text) for text in texts]
    keys = [text_key(doc) for doc in docs]
    return {
        "text": docs,
        "empty": [not doc for doc in docs],
        "key_hi": np.asarray([hi for hi, _ in keys], dtype=np.uint64),
        "key_lo": np.asarray([lo for _, lo in keys], dtype=np.uint64),
    }


def pack_flat(
    ids: np.ndarray, lengths: np.ndarray, block_size: int, bos_id: int, eos_id: int, pad_id: int
) -> np.ndarray:
    """Token ids of documents -> (n_blocks, block_size + 1) int32 blocks (tail padded).

    The documents come flat, ``ids`` (all documents' ids, one after the other) and each one's
    length ``lengths``: vectorised, for millions of documents. Block i holds stream positions
    ``[i * block_size, (i + 1) * block_size]``: consecutive blocks share one token, the last
    input of one being the first of the next.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    lengths = np.asarray(lengths, dtype=np.int64)
    bos_at = np.zeros(len(lengths), dtype=np.int64)  # each document is [bos] ids [eos]
    np.cumsum(lengths[:-1] + 2, out=bos_at[1:])
    eos_at = bos_at + lengths + 1
    total = int(lengths.sum()) + 2 * len(lengths)
    n_blocks = max(1, -(-(total - 1) // block_size))  # ceil
    stream = np.full(n_blocks * block_size + 1, pad_id, dtype=np.int32)  # padded tail included
    is_text = np.zeros(len(stream), dtype=bool)
    is_text[:total] = True
    is_text[bos_at] = is_text[eos_at] = False
    stream[is_text] = ids
    stream[bos_at], stream[eos_at] = bos_id, eos_id
    windows = np.lib.stride_tricks.sliding_window_view(stream, block_size + 1)
    return np.ascontiguousarray(windows[::block_size][:n_blocks])


class TokenBlocks:
    """Packed blocks as a dataset: ``self[i]`` is block i, (block_size + 1,) int32."""

    def __init__(self, blocks: np.ndarray) -> None:
        self.blocks = blocks

    def __getitem__(self, i: int) -> np.ndarray:
        return self.blocks[i]

    def __len__(self) -> int:
        return len(self.blocks)

    def lengths(self) -> np.ndarray:
        """Every block costs block_size + 1 positions (for the token-budget sampler)."""
        return np.full(len(self.blocks), self.blocks.shape[1], dtype=np.int64)

    def n_tokens(self, pad_id: int) -> int:
        """Predicted (non-pad target) tokens in all blocks."""
        return int((self.blocks[:, 1:] != pad_id).sum())
