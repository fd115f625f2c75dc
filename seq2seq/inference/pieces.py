"""What an engine decodes, within its limits: sentences as pieces, pieces in token batches.

A sentence longer than the engine's source limit is decoded in pieces (``sentence_pieces``):
its clauses (cut after , ; : and before dashes) packed up to the limit, and a clause still too
long cut into windows of tokens at word starts. Sources are decoded in batches of at most
``MAX_TOKENS`` padded tokens, longest first (``token_batches``), and a stream of lines is read
in windows (``line_windows``). ``Translator`` (``seq2seq.inference.translator``) and
``Generator`` (``seq2seq.inference.generation``) share the batching.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial

from seq2seq.data.clean import normalize_en
from seq2seq.data.sentences import clauses
from seq2seq.data.tokenizer import TokenizerLike

# The decoding batch budget every command, the server and the API default to: source tokens x
# beam size per batch (decoder rows, after finished sentences leave).
MAX_TOKENS = 4000
WORD_START = "\u2581"  # SentencePiece's mark of a piece that starts a word


@dataclass
class Piece:
    """What the engine decodes for (part of) a sentence: source ids, and the sentence's words
    ``[first, last)`` they cover; ``windowed``: cut at a token limit, not at punctuation."""

    ids: list[int]
    words: tuple[int, int]
    windowed: bool = False


def encode_sentence(text: str, tokenizer: TokenizerLike) -> list[int]:
    """Source ids of one sentence (normalised; [] for white space), not cut."""
    text = normalize_en(text)
    return tokenizer.encode_source(text) if text.strip() else []


def sentence_pieces(sentence: str, limit: int, tokenizer: TokenizerLike) -> list[Piece]:
    """The pieces ``sentence`` is decoded as: itself when it holds at most ``limit`` tokens,
    else its clauses packed up to the limit (a clause still too long in windows of tokens)."""
    ids = encode_sentence(sentence, tokenizer)
    n_words = len(sentence.split())
    if len(ids) <= limit:
        return [Piece(ids, (0, n_words))]
    pieces: list[Piece] = []
    word = 0
    eos = int(tokenizer.source_ends_with_eos)
    length = partial(clause_length, tokenizer=tokenizer)
    for text in _pack(clauses(sentence), limit - eos, length):
        ids, count = encode_sentence(text, tokenizer), len(text.split())
        if len(ids) <= limit:
            pieces.append(Piece(ids, (word, word + count)))
        else:
            pieces += token_windows(ids, limit, word, tokenizer)
        word += count
    return pieces


def clause_length(text: str, tokenizer: TokenizerLike) -> int:
    """Tokens ``text`` adds to a source it is joined into: a source's eos comes once,
    however many clauses it joins."""
    return len(encode_sentence(text, tokenizer)) - int(tokenizer.source_ends_with_eos)


def _pack(texts: list[str], limit: int, length: Callable[[str], int]) -> list[str]:
    """Consecutive ``texts`` joined (with spaces) into as few pieces as stay within
    ``limit`` tokens by their separate ``length``s."""
    packed: list[str] = []
    tokens = 0
    for text in texts:
        count = length(text)
        if packed and tokens + count <= limit:
            packed[-1] += " " + text
            tokens += count
        else:
            packed.append(text)
            tokens = count
    return packed


def token_windows(ids: list[int], limit: int, word: int, tokenizer: TokenizerLike) -> list[Piece]:
    """``ids`` (a clause whose first word is the sentence's word ``word``) cut into windows of
    at most ``limit`` tokens, each starting a word where possible (a source that ends with eos
    keeps it at the end of every window)."""
    eos = ids[-1:] if tokenizer.source_ends_with_eos else []
    body, width = ids[: len(ids) - len(eos)], limit - len(eos)
    piece_of = tokenizer.id_to_piece
    starts = [i for i, t in enumerate(body) if piece_of(t).startswith(WORD_START)]
    windows, begin = [], 0
    while begin < len(body):
        cuts = [i for i in starts if begin < i <= begin + width]
        end = cuts[-1] if cuts and begin + width < len(body) else min(len(body), begin + width)
        count = sum(1 for i in starts if begin <= i < end) or 1
        windows.append(Piece(body[begin:end] + eos, (word, word + count), windowed=True))
        begin, word = end, word + count
    return windows


def cut_source(ids: list[int], limit: int, tokenizer: TokenizerLike) -> list[int]:
    """The first ``limit`` ids of an encoded source. A source that ends in an eos (the
    tokenizer's ``source_ends_with_eos``) keeps it: the model has never seen one without."""
    if len(ids) <= limit:
        return ids
    if tokenizer.source_ends_with_eos:
        return ids[: limit - 1] + ids[-1:]
    return ids[:limit]


def line_windows(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    """``lines`` in consecutive lists of ``size`` (the last one shorter), read lazily."""
    if size < 1:
        raise ValueError(f"window must be >= 1 line, got {size}")
    window: list[str] = []
    for line in lines:
        window.append(line)
        if len(window) == size:
            yield window
            window = []
    if window:
        yield window


def token_batches(encoded: list[list[int]], max_tokens: int, extra: int = 0) -> Iterable[list[int]]:
    """Indices of non-empty inputs, longest first, in batches of <= max_tokens padded tokens;
    each row costs its input plus ``extra`` positions (the new tokens of a generation)."""
    order = sorted((i for i, ids in enumerate(encoded) if ids), key=lambda i: -len(encoded[i]))
    batch: list[int] = []
    for index in order:
        width = (len(encoded[batch[0]]) if batch else len(encoded[index])) + extra
        if batch and (len(batch) + 1) * width > max_tokens:
            yield batch
            batch = []
        batch.append(index)
    if batch:
        yield batch
