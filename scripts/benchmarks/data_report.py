"""The ``data`` bench's report: a table per implementation, the line of peak PSS against pairs and
its extrapolation, and one checkout's numbers over another's."""

from __future__ import annotations

import os
import sys
from typing import Any

from benchmarks.proc_memory import GIB, MIB

EXTRAPOLATE = (26_000_000, 100_000_000)


def cell(value: float | None, scale: float = 1.0, digits: int = 1) -> str:
    """``value / scale`` with ``digits`` decimals and thousands commas; ``failed`` for None."""
    if value is None:
        return "failed"
    return f"{round(value / scale, digits) or 0.0:,.{digits}f}"  # "0", never "-0"


def get(row: dict[str, Any], step: str, key: str) -> float | None:
    """``row[step][key]``; None where the step failed (or never ran)."""
    found = row.get(step)
    return None if found is None else found[key]


# One table column each, after "pairs": header, step, key, unit, decimals. A rank column shows
# both ranks, "rank 0 / rank 1"; a failed step's cells say "failed".
COLUMNS = [
    ("prep wall s", "prepare", "prepare_s", 1, 1),
    ("prep CPU s", "prepare", "cpu", 1, 1),
    ("peak PSS GiB (tree)", "prepare", "pss", GIB, 3),
    ("peak RSS GiB (1 proc)", "prepare", "rss", GIB, 3),
    ("procs", "prepare", "procs", 1, 0),
    ("peak disk MB", "prepare", "disk", 1e6, 1),
    ("cache MB", "prepare", "cache", 1e6, 1),
    ("scratch MB", "prepare", "scratch", 1e6, 1),
    ("reload s", "reload", "setup_s", 1, 2),
    ("loader build s", "reload", "loader_build_s", 1, 2),
    ("loader tok/s", "reload", "tokens_per_s", 1, 0),
    ("tok/pair", "reload", "tokens_per_pair", 1, 1),
    ("USS after load MiB", "reload", "uss", MIB, 0),
    ("of which setup MiB", "reload", "setup_uss", MIB, 0),
    ("2-rank USS MiB", "ranks", "uss", MIB, 0),
    ("2-rank PSS MiB", "ranks", "pss", MIB, 0),
    ("2-rank USS growth MiB", "ranks", "uss_growth", MIB, 0),
    ("2-rank PSS growth MiB", "ranks", "pss_growth", MIB, 0),
]


def table_row(label: str, row: dict[str, Any]) -> list[str]:
    """One size's cells (see :data:`COLUMNS`)."""
    cells = [label]
    for _, step, key, unit, digits in COLUMNS:
        found = row.get(step)
        if step == "ranks" and found is not None:
            cells.append(" / ".join(cell(rank[key], unit, digits) for rank in found))
        else:
            cells.append(cell(get(row, step, key), unit, digits))
    return cells


def markdown(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table, numbers right-aligned."""
    rule = ["---"] + ["---:"] * (len(header) - 1)
    return "\n".join("| " + " | ".join(cells) + " |" for cells in [header, rule, *rows])


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares slope and intercept of ``(x, y)`` points; None under two distinct x."""
    if len({x for x, _ in points}) < 2:
        return None
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return slope, my - slope * mx


def extrapolation(rows: dict[int, dict[str, Any]]) -> str:
    """Peak PSS (GiB) against millions of pairs: the line and its values at 26M and 100M."""
    peaks = {n: get(row, "prepare", "pss") for n, row in rows.items()}
    points = [(n / 1e6, peak / GIB) for n, peak in peaks.items() if peak is not None]
    line = fit_line(points)
    if line is None:
        return "Peak PSS against pairs: n/a (needs two sizes prepared)"
    slope, intercept = line
    at = ", ".join(
        f"{n / 1e6:g}M pairs: {slope * n / 1e6 + intercept:,.1f} GiB" for n in EXTRAPOLATE
    )
    return (
        f"Peak PSS ≈ {slope:.3f} GiB per million pairs + {intercept:.3f} GiB (least squares "
        f"over {len(points)} sizes, {min(x for x, _ in points) * 1e6:,.0f} to "
        f"{max(x for x, _ in points) * 1e6:,.0f} pairs); extrapolated to {at}"
    )


RATIOS = [
    ("prep wall", "prepare", "prepare_s"),
    ("prep CPU", "prepare", "cpu"),
    ("peak PSS", "prepare", "pss"),
    ("cache", "prepare", "cache"),
    ("reload", "reload", "setup_s"),
    ("loader tok/s", "reload", "tokens_per_s"),
]


def ratios(ours: dict[int, dict], peer: dict[int, dict], labels: dict[int, str]) -> str:
    """This checkout's numbers over the peer's, per size."""
    rows = []
    for n, label in labels.items():
        cells = [label]
        for _, step, key in RATIOS:
            a, b = get(ours[n], step, key), get(peer[n], step, key)
            cells.append(f"{a / b:.3f}" if a is not None and b else "n/a")
        rows.append(cells)
    return markdown(["pairs"] + [f"{name} ×" for name, _, _ in RATIOS], rows)


def num_proc_text(passed: int | None, used: int | None) -> str:
    """How many preparation processes the data module was given and took."""
    if passed == used == -1:
        return "n/a (no preparation ran)"
    if used is None:
        return "not a setting of this data module"
    return f"{used}" + (" (passed)" if passed is not None else " (the data module's default)")


def report(
    impls: list[Any],
    results: dict[str, dict[int, dict]],
    labels: dict[int, str],
    sizes: dict[int, int],
) -> None:
    """Prints the tables, lines and ratios; ``impls``: the ``data`` bench's implementations (their
    ``name``, ``root``, ``num_proc`` and ``torch_threads``)."""
    print(
        f"CPUs: {os.cpu_count()} ({len(os.sched_getaffinity(0))} usable); "
        f"Python {sys.version.split()[0]}"
    )
    for n, label in labels.items():
        print(
            f"{label}: {n:,} distinct pairs, {sizes[n] / 1e6:,.1f} MB of TSV, "
            f"{sizes[n] / n:.1f} bytes per pair"
        )
    for impl in impls:
        rows = results[impl.name]
        print(f"\n### {impl.name}: {impl.root}")
        print(
            f"num_proc: {num_proc_text(*impl.num_proc)}; "
            f"torch threads in the children: {impl.torch_threads or 'n/a'}"
        )
        prepared = [row["prepare"] for row in rows.values() if row["prepare"]]
        if prepared:
            first = prepared[0]
            print(
                f"child start-up before prepare_data (not in the prep columns): "
                f"{first['wall'] - first['prepare_s']:.1f} s wall, "
                f"{first['startup_cpu']:.1f} s CPU, {first['startup_pss'] / MIB:,.0f} MiB PSS"
            )
        print()
        header = ["pairs"] + [column[0] for column in COLUMNS]
        print(markdown(header, [table_row(labels[n], row) for n, row in rows.items()]))
        print("\n" + extrapolation(rows))
    if len(impls) == 2:
        print(f"\n### {impls[0].name} / {impls[1].name}\n")
        print(ratios(results[impls[0].name], results[impls[1].name], labels))
