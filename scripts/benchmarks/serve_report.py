"""The ``serve`` bench's report: the results with their ratios (what ``--json`` writes), the machine
they were measured on, and the printed tables."""

from __future__ import annotations

import argparse
from typing import Any

from benchmarks.harness import machine
from benchmarks.serve_load import Level

# A table's columns: (header, key of the row, format spec; "": the value as it is).
THROUGHPUT = (
    ("beam", "beam", ""),
    ("clients", "clients", ""),
    ("requests/s", "requests_per_s", ".1f"),
    ("sentences/s", "sentences_per_s", ".1f"),
    ("p50 ms", "p50_ms", ".0f"),
    ("p95 ms", "p95_ms", ".0f"),
    ("p99 ms", "p99_ms", ".0f"),
    ("× 1 client", "x_one_client", ".2f"),
    ("% of one-file ceiling", "of_ceiling", ".0%"),
)
CORES = (
    ("beam", "beam", ""),
    ("clients", "clients", ""),
    ("server cores", "server_cores", ".2f"),
    ("load generator cores", "client_cores", ".2f"),
    ("other processes' cores", "other_cores", ".2f"),
    ("server peak RSS MiB", "peak_rss_mib", ".0f"),
    ("failed requests", "errors", ""),
)


def build_report(
    args: argparse.Namespace, levels: list[Level], ceilings: dict[int, dict], n_sentences: int
) -> dict[str, Any]:
    """Everything measured, with the ratios: to 1 client at the same beam (when measured) and
    to the one-file ceiling at the same beam."""
    rows = []
    for level in levels:
        row = level.summary()
        single = next((o for o in levels if o.beam == level.beam and o.clients == 1), None)
        row["x_one_client"] = (
            level.sentences_per_s / single.sentences_per_s
            if single and single.sentences_per_s
            else None
        )
        row["of_ceiling"] = level.sentences_per_s / ceilings[level.beam]["sentences_per_s"]
        rows.append(row)
    return {
        "machine": machine(args.threads),
        "checkpoint": args.checkpoint,
        "sentences": n_sentences,
        "settings": {
            k: getattr(args, k)
            for k in ("duration", "warmup", "threads", "max_wait_ms", "max_batch_tokens")
        },
        "levels": rows,
        "ceilings": {str(b): c for b, c in ceilings.items()},
    }


def print_report(report: dict[str, Any]) -> None:
    """The setting, the throughput table, the ceilings, the CPU table and any failures."""
    print_setting(report)
    print_table(THROUGHPUT, report["levels"])
    print_ceilings(report["ceilings"])
    print()
    print_table(CORES, report["levels"])
    print_failures(report["levels"])


def print_setting(report: dict[str, Any]) -> None:
    """One paragraph: the machine, the sentences, the timing and the server's batching."""
    m, s = report["machine"], report["settings"]
    print(
        f"\n{m['cpu']}, {m['cores']} cores; server and ceiling: {m['threads']} torch threads; "
        f"torch {m['torch']}; {report['sentences']} sentences; {s['warmup']:g} s warm-up + "
        f"{s['duration']:g} s per level; --max-wait-ms {s['max_wait_ms']:g}, "
        f"--max-batch-tokens {s['max_batch_tokens']}\n"
    )


def print_ceilings(ceilings: dict[str, dict[str, Any]]) -> None:
    """One line per beam: the one-file ceiling and what it cost."""
    for beam, c in ceilings.items():
        print(
            f"One-file ceiling, beam {beam}: {c['sentences_per_s']:.1f} sentences/s "
            f"({c['sentences']} sentences in {c['seconds']:.2f} s, one process, "
            f"{c['threads']} threads, peak RSS {c['peak_rss_mib']:.0f} MiB)"
        )


def print_failures(levels: list[dict[str, Any]]) -> None:
    """The first failure of each level that had any (the numbers are then not valid)."""
    for r in levels:
        if r["first_error"]:
            print(
                f"beam {r['beam']}, {r['clients']} clients: {r['errors']} failed, the first "
                f"with {r['first_error']}"
            )


def print_table(columns: tuple[tuple[str, str, str], ...], rows: list[dict[str, Any]]) -> None:
    """A markdown table of ``rows`` in ``columns``, numbers right-aligned ("–": none), and a
    blank line."""
    print("| " + " | ".join(header for header, _, _ in columns) + " |")
    print("|" + "---:|" * len(columns))
    for row in rows:
        cells = ("–" if row[key] is None else format(row[key], spec) for _, key, spec in columns)
        print("| " + " | ".join(cells) + " |")
    print()


# -- servers against each other (serve-libretranslate) -----------------------------------------

SERVERS = (
    ("server", "server", ""),
    ("clients", "clients", ""),
    ("sentences/s", "sentences_per_s", ".1f"),
    ("p50 ms", "p50_ms", ".0f"),
    ("p99 ms", "p99_ms", ".0f"),
    ("peak RSS MiB", "peak_rss_mib", ".0f"),
    ("server cores", "server_cores", ".2f"),
    ("other cores", "other_cores", ".2f"),
    ("failed", "errors", ""),
)
RATIOS = (
    ("clients", "clients", ""),
    ("server", "server", ""),
    ("sentences/s ×", "sentences_per_s", ".2f"),
    ("p50 ×", "p50_ms", ".2f"),
    ("p99 ×", "p99_ms", ".2f"),
    ("peak RSS ×", "peak_rss_mib", ".2f"),
)


def build_comparison(
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    servers: dict[str, dict[str, Any]],
    n_sentences: int,
    versions: dict[str, str],
) -> dict[str, Any]:
    """Everything measured, each server's levels (``server`` added to each level's summary)
    and the ratios of every server to ``args.reference`` at the same client count."""
    reference = {r["clients"]: r for r in rows if r["server"] == args.reference}
    ratios = []
    for r in rows:
        base = reference.get(r["clients"])
        if base is None or r["server"] == args.reference:
            continue
        ratios.append(
            {
                "clients": r["clients"],
                "server": r["server"],
                "reference": args.reference,
                **{k: _ratio(r[k], base[k]) for k in RATIO_KEYS},
            }
        )
    return {
        "machine": {**machine(args.threads), **versions},
        "checkpoint": args.checkpoint,
        "sentences": n_sentences,
        "settings": {k: getattr(args, k) for k in COMPARISON_SETTINGS},
        "servers": servers,
        "levels": rows,
        "ratios": ratios,
    }


RATIO_KEYS = ("sentences_per_s", "p50_ms", "p99_ms", "peak_rss_mib")
COMPARISON_SETTINGS = (
    "beam",
    "duration",
    "warmup",
    "threads",
    "request_threads",
    "max_wait_ms",
    "max_batch_tokens",
    "max_other_cores",
    "retries",
)


def _ratio(value: float, base: float) -> float | None:
    return value / base if base else None


def print_comparison(report: dict[str, Any]) -> None:
    """The setting, how each server ran, one row per server and client count, the ratios to
    the reference server and any failures."""
    m, s = report["machine"], report["settings"]
    print(
        f"\n{m['cpu']}, {m['cores']} cores; {s['threads']} compute threads per server; beam "
        f"{s['beam']}; {report['sentences']} sentences; {s['warmup']:g} s warm-up + "
        f"{s['duration']:g} s per level (again, up to {s['retries']} times, where other "
        f"processes used over {s['max_other_cores']:g} cores); "
        + ", ".join(f"{k} {v}" for k, v in m.items() if k not in ("cpu", "cores", "threads"))
        + "\n"
    )
    for name, server in report["servers"].items():
        print(f"- {name}: {server['description']} (ready in {server['ready_s']:.1f} s)")
    print()
    print_table(SERVERS, report["levels"])
    if report["ratios"]:
        print(f"Ratios to {report['ratios'][0]['reference']} at the same client count:\n")
        print_table(RATIOS, report["ratios"])
    for r in report["levels"]:
        if r["first_error"]:
            print(
                f"{r['server']}, {r['clients']} clients: {r['errors']} failed, the first with "
                f"{r['first_error']}"
            )
