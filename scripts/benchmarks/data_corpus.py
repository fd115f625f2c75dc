"""The ``data`` bench's corpus: N distinct synthetic pairs joined from real ones, a TSV built once
per size (see ``benchmarks/data.py`` for why the joined pairs are distinct)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

Pair = tuple[str, str]


def base_pairs(max_chars: int) -> list[Pair]:
    """The bundled pairs, cleaned, one per English sentence, each side at most ``max_chars``,
    and no English sentence followed by a space starting another (see :func:`synthetic_pair`)."""
    from seq2seq.data.clean import clean_pairs
    from seq2seq.data.sources import load_bundled

    cleaned, _ = clean_pairs(load_bundled())
    by_english: dict[str, str] = {}
    for en, zh in cleaned:
        if len(en) <= max_chars and len(zh) <= max_chars:
            by_english.setdefault(en, zh)
    return space_prefix_free(list(by_english.items()))


def space_prefix_free(pairs: list[Pair]) -> list[Pair]:
    """``pairs`` less those whose English followed by a space starts another's English."""
    import bisect

    english = sorted(en for en, _ in pairs)

    # The strings starting with p = s + " " come in sorted order as one run from p up: one
    # exists if the first string not below p is one.
    def is_prefix(en: str) -> bool:
        i = bisect.bisect_left(english, en + " ")
        return i < len(english) and english[i].startswith(en + " ")

    return [(en, zh) for en, zh in pairs if not is_prefix(en)]


def synthetic_pair(pairs: list[Pair], k: int) -> Pair:
    """Pair ``k``: real pairs a = k mod M and b = (a + k div M + 1) mod M joined.

    For k < M(M-1), k div M + 1 lies in [1, M-1], so b ≠ a, and (a, b) gives back k. With
    distinct English sentences none of which, followed by a space, starts another, the joined
    English ``en_a + " " + en_b`` splits back into a and b in one way only: distinct pairs.
    """
    m = len(pairs)
    a = k % m
    b = (a + k // m + 1) % m
    return f"{pairs[a][0]} {pairs[b][0]}", pairs[a][1] + pairs[b][1]


def write_corpus(path: Path, pairs: list[Pair], n: int, chunk: int = 50_000) -> None:
    """Writes pairs 0..n-1 as TSV, ``chunk`` lines at a time, checking that the English sides
    are distinct (by a 64-bit hash each: 8 bytes a pair); atomic (a temporary name, renamed)."""
    import numpy as np

    if n > len(pairs) * (len(pairs) - 1):
        raise SystemExit(f"{n:,} pairs: more than {len(pairs):,} real pairs can make distinct")
    hashes = np.empty(n, dtype=np.int64)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for start in range(0, n, chunk):
            lines = [synthetic_pair(pairs, k) for k in range(start, min(n, start + chunk))]
            hashes[start : start + len(lines)] = [hash(en) for en, _ in lines]
            f.write("".join(f"{en}\t{zh}\n" for en, zh in lines))
    hashes.sort()
    if n > 1 and not np.all(hashes[1:] != hashes[:-1]):
        tmp.unlink()
        raise SystemExit(f"{path}: two synthetic pairs share their English (a bug)")
    tmp.rename(path)


def corpus(work: Path, n: int, label: str, max_chars: int, say: Callable[[str], None]) -> Path:
    """The TSV of ``n`` synthetic pairs in ``work``, built unless an earlier run left it;
    progress lines go to ``say``."""
    path = work / f"pairs-{n}.tsv"
    if path.is_file():
        say(f"{label} pairs: {path} (built by an earlier run)")
        return path
    base = work / f"base-{max_chars}.tsv"
    if not base.is_file():
        say(f"reading and cleaning the bundled corpus into {base}…")
        rows = base_pairs(max_chars)
        base.with_name(base.name + ".tmp").write_text(
            "".join(f"{en}\t{zh}\n" for en, zh in rows), encoding="utf-8"
        )
        base.with_name(base.name + ".tmp").rename(base)
    lines = base.read_text(encoding="utf-8").split("\n")[:-1]  # not splitlines: U+2028 & co.
    pairs = [tuple(line.split("\t")) for line in lines]
    say(f"building {label} pairs from {len(pairs):,} real ones…")
    start = time.perf_counter()
    write_corpus(path, pairs, n)  # type: ignore[arg-type]
    say(f"built {path} in {time.perf_counter() - start:.1f} s")
    return path
