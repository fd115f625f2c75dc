"""Monolingual data for a decoder-only language model: clean, split, tokenize, pack.

Each document (a line of text) becomes ``[bos] tokens [eos]``; documents are concatenated in
corpus order and cut into blocks of ``block_size + 1`` tokens that overlap by one, so every
token but the very first is predicted exactly once (input ``block[:-1]``, target
``block[1:]``). The bos/eos pairs mark the document boundaries inside a block, as GPT-2's
``<|endoftext|>`` does; attention may look across them, and the model learns that an eos
starts something unrelated.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from seq2seq.data.clean import normalize_en, normalize_zh
from seq2seq.data.split import SPLITS, split_name


def clean_documents(texts: Iterable[str], lang: str) -> tuple[list[str], dict[str, int]]:
    """Normalised, non-empty, de-duplicated documents (first occurrence kept) and counts."""
    normalize = normalize_zh if lang == "zh" else normalize_en
    seen: set[str] = set()
    kept: list[str] = []
    report = {"total": 0, "empty": 0, "duplicates": 0}
    for text in texts:
        report["total"] += 1
        doc = normalize(text)
        if not doc:
            report["empty"] += 1
        elif doc in seen:
            report["duplicates"] += 1
        else:
            seen.add(doc)
            kept.append(doc)
    report["kept"] = len(kept)
    return kept, report


def split_documents(docs: Iterable[str]) -> dict[str, list[str]]:
    """``train``/``dev``/``test`` by a hash of each document (2% dev, 2% test)."""
    splits: dict[str, list[str]] = {name: [] for name in SPLITS}
    for doc in docs:
        splits[split_name(doc)].append(doc)
    return splits


def pack_blocks(
    documents: Sequence[Sequence[int]], block_size: int, bos_id: int, eos_id: int, pad_id: int
) -> np.ndarray:
    """Token ids of documents -> (n_blocks, block_size + 1) int32 blocks (tail padded).

    Block i holds stream positions ``[i * block_size, (i + 1) * block_size]``: consecutive
    blocks share one token, the last input of one being the first of the next.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    pieces = [np.asarray([bos_id, *doc, eos_id], dtype=np.int32) for doc in documents]
    stream = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int32)
    n_blocks = max(1, -(-(len(stream) - 1) // block_size))  # ceil
    blocks = np.full((n_blocks, block_size + 1), pad_id, dtype=np.int32)
    for i in range(n_blocks):
        chunk = stream[i * block_size : (i + 1) * block_size + 1]
        blocks[i, : len(chunk)] = chunk
    return blocks


class TokenBlocks:
    """Packed blocks as a dataset: ``self[i]`` is block i, (block_size + 1,) int32."""

    def __init__(self, blocks: np.ndarray) -> None:
        self.blocks = blocks

    def __getitem__(self, i: int) -> np.ndarray:
        return self.blocks[i]

    def __len__(self) -> int:
        return len(self.blocks)

    def lengths(self) -> list[int]:
        """Every block costs block_size + 1 positions (for the token-budget sampler)."""
        return [self.blocks.shape[1]] * len(self.blocks)

    def n_tokens(self, pad_id: int) -> int:
        """Predicted (non-pad target) tokens in all blocks."""
        return int((self.blocks[:, 1:] != pad_id).sum())
