"""The ``serve`` bench's report: the results with their ratios (what ``--json`` writes), the machine
they were measured on, and the printed tables."""

from __future__ import annotations

import argparse
from typing import Any

from benchmarks.harness import machine
from benchmarks.serve_load import Level

THROUGHPUT_HEADER = [
    "beam",
    "clients",
    "requests/s",
    "sentences/s",
    "p50 ms",
    "p95 ms",
    "p99 ms",
    "× 1 client",
    "% of one-file ceiling",
]
CORES_HEADER = [
    "beam",
    "clients",
    "server cores",
    "load generator cores",
    "other processes' cores",
    "server peak RSS MiB",
    "failed requests",
]


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
    print_table(THROUGHPUT_HEADER, [throughput_row(r) for r in report["levels"]])
    print_ceilings(report["ceilings"])
    print()
    print_table(CORES_HEADER, [cores_row(r) for r in report["levels"]])
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


def throughput_row(r: dict[str, Any]) -> list[Any]:
    """One level's rates, latencies and ratios, under :data:`THROUGHPUT_HEADER`."""
    return [
        r["beam"],
        r["clients"],
        f"{r['requests_per_s']:.1f}",
        f"{r['sentences_per_s']:.1f}",
        f"{r['p50_ms']:.0f}",
        f"{r['p95_ms']:.0f}",
        f"{r['p99_ms']:.0f}",
        "–" if r["x_one_client"] is None else f"{r['x_one_client']:.2f}",
        f"{100 * r['of_ceiling']:.0f}%",
    ]


def cores_row(r: dict[str, Any]) -> list[Any]:
    """One level's cores used on each side and its failures, under :data:`CORES_HEADER`."""
    return [
        r["beam"],
        r["clients"],
        f"{r['server_cores']:.2f}",
        f"{r['client_cores']:.2f}",
        f"{r['other_cores']:.2f}",
        f"{r['peak_rss_mib']:.0f}",
        r["errors"],
    ]


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


def print_table(header: list[str], rows: list[list[Any]]) -> None:
    """A markdown table, numbers right-aligned, and a blank line."""
    print("| " + " | ".join(header) + " |")
    print("|" + "---:|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")
    print()


# -- servers against each other (serve-libretranslate) -----------------------------------------

SERVERS_HEADER = [
    "server",
    "clients",
    "sentences/s",
    "p50 ms",
    "p99 ms",
    "peak RSS MiB",
    "server cores",
    "other cores",
    "failed",
]
RATIOS_HEADER = ["clients", "server", "sentences/s ×", "p50 ×", "p99 ×", "peak RSS ×"]


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
    print_table(SERVERS_HEADER, [server_row(r) for r in report["levels"]])
    if report["ratios"]:
        print(f"Ratios to {report['ratios'][0]['reference']} at the same client count:\n")
        print_table(RATIOS_HEADER, [ratio_row(r) for r in report["ratios"]])
    for r in report["levels"]:
        if r["first_error"]:
            print(
                f"{r['server']}, {r['clients']} clients: {r['errors']} failed, the first with "
                f"{r['first_error']}"
            )


def server_row(r: dict[str, Any]) -> list[Any]:
    """One server at one client count, under :data:`SERVERS_HEADER`."""
    return [
        r["server"],
        r["clients"],
        f"{r['sentences_per_s']:.1f}",
        f"{r['p50_ms']:.0f}",
        f"{r['p99_ms']:.0f}",
        f"{r['peak_rss_mib']:.0f}",
        f"{r['server_cores']:.2f}",
        f"{r['other_cores']:.2f}",
        r["errors"],
    ]


def ratio_row(r: dict[str, Any]) -> list[Any]:
    """One server's numbers over the reference's, under :data:`RATIOS_HEADER`."""
    return [
        r["clients"],
        r["server"],
        *("–" if r[k] is None else f"{r[k]:.2f}" for k in RATIO_KEYS),
    ]
