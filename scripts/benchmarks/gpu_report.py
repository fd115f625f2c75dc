"""``gpu_check``'s table: the machine, each stage's outcome, training throughput per variant
and decoding per engine, as Markdown (printed last and written to ``table.md``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

SUMMARY = re.compile(r"^=*\s*(\d+ (?:passed|failed|skipped|error|deselected).*?) in [\d.]+s")


def pytest_summary(log: Path) -> str | None:
    """pytest's last summary line in ``log`` ("4 passed, 1 skipped"), or None."""
    text = log.read_text(encoding="utf-8", errors="replace")
    found = [m for line in text.splitlines() if (m := SUMMARY.match(line))]
    return found[-1].group(1) if found else None


def report(results: dict[str, Any]) -> str:
    """The whole table."""
    parts = [header(results), stages(results)]
    if results.get("train"):
        parts.append(training(results["train"]))
    if results.get("demo", {}).get("tok_per_s"):
        parts.append(demo_training(results["demo"]))
    if results.get("decode"):
        parts.append(decoding(results["decode"]))
    return "\n\n".join(parts) + "\n"


def header(results: dict[str, Any]) -> str:
    machine = results["machine"]
    train = results.get("train") or results.get("decode") or {}
    gpu = machine.get("gpu", "no GPU")
    if "driver" in machine:
        gpu += f" (driver {machine['driver']}, {machine['gpu_memory']})"
    torch = f"torch {train['torch']}" if "torch" in train else "torch not reached"
    if train.get("cuda"):
        torch += f" (CUDA {train['cuda']})"
    dry = " DRY RUN (CPU, tiny shapes: no figure means anything)" if results["dry_run"] else ""
    return (
        f"# gpu_check {machine['date']}:{dry} {gpu}, {torch}, Python {machine['python']}, "
        f"{machine['cpus']} CPUs\n\n`{results['command']}`; install: {results['install']}"
    )


def stages(results: dict[str, Any]) -> str:
    rows = ["| stage | status | seconds | budget s |", "|---|---|---:|---:|"]
    for name, stage in results["stages"].items():
        seconds = f"{stage['seconds']:.0f}" if "seconds" in stage else "-"
        rows.append(f"| {name} | {stage['status']} | {seconds} | {stage['budget']:.0f} |")
    return "\n".join(rows)


def training(train: dict[str, Any]) -> str:
    """One row per variant: its speed-ups, throughput, MFU, loader wait, memory, and tokens/s
    over the same model's config-as-written row and over Marian's with the same speed-ups."""
    data, peak = train.get("data", {}), train.get("peak_flops")
    lines = [
        f"Training `{train.get('config')}`, bf16 autocast, {data.get('pairs', 0):,} unique "
        f"pairs (corpus {data.get('corpus_seconds', 0):.0f} s, preparation "
        f"{data.get('prepare_seconds', 0):.0f} s); MFU against "
        + (f"{peak / 1e12:,.1f} TFLOP/s ({train['peak_source']})" if peak else "no known peak"),
        "",
        "| variant | compile | fused AdamW | tokens/batch x accumulation | steps | tokens/s "
        "| MFU % | loader wait ms/step | step ms | peak MiB | x own baseline | x Marian |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    measured = {v["name"]: v for v in train.get("variants", []) if "tokens_per_s" in v}
    for v in train.get("variants", []):
        lines.append(variant_row(v, measured))
    recompiled = [
        f"{n} ({v['compiled_while_timed']})"
        for n, v in measured.items()
        if v.get("compiled_while_timed")
    ]
    if recompiled:  # a compilation inside the timed steps: their rate understates the variant
        lines.append(f"\nGraphs compiled during the timed steps: {', '.join(recompiled)}")
    return "\n".join(lines)


def variant_row(v: dict[str, Any], measured: dict[str, dict]) -> str:
    on = {True: "on", False: "off"}
    first = f"| {v['name']} | {on[v['compile']]} | {on[v['fused']]} |"
    if "tokens_per_s" not in v:
        return first + f" {v.get('error') or 'skipped: ' + v.get('skipped', '?')} |" + " |" * 8
    rate = v["tokens_per_s"]
    own = measured.get(v["model"])
    marian = measured.get(v["name"].replace("ours", "marian", 1)) if v["model"] == "ours" else None
    mfu = f"{100 * v['mfu']:.1f}" if v.get("mfu") is not None else "-"
    return (
        first + f" {v['max_tokens']:,} x {v['accumulate']} | {v['steps']} | {rate:,.0f} | {mfu} "
        f"| {v['loader_wait_ms']:.2f} | {v['step_ms']:.1f} | {v['peak_memory_mib']:,.0f} "
        f"| {ratio(rate, own, 'tokens_per_s')} | {ratio(rate, marian, 'tokens_per_s')} |"
    )


def ratio(value: float, other: dict | None, key: str) -> str:
    return f"{value / other[key]:.2f}" if other and other.get(key) else "-"


def demo_training(demo: dict[str, Any]) -> str:
    """What ``seq2seq fit`` itself (Lightning, the data loader, logging) gave the demo model."""
    rates = sorted(demo["tok_per_s"])
    return (
        f"Demo model: `seq2seq fit` of `configs/tiny.yaml` ({demo['trainer']['precision']}), "
        f"{rates[len(rates) // 2]:,.0f} tokens/s (median of {len(rates)} windows of its "
        "ThroughputMonitor)"
    )


def decoding(decode: dict[str, Any]) -> str:
    """One row per (model, engine): seconds and sentences/s greedy and beam 5, and our time
    over CTranslate2's first precision's (float16 on a GPU) on the same model and beam."""
    by_engine: dict[tuple[str, str, str], dict[int | None, dict]] = {}
    for row in decode.get("rows", []):
        key = (row["model"], row["engine"], row["precision"])
        by_engine.setdefault(key, {})[row.get("beam")] = row  # beam None: it did not load
    reference = next((precision for _, e, precision in by_engine if e == "ct2"), None)
    lines = [
        f"Decoding {decode.get('sentences', 0):,} sentences ({decode.get('sources')}), batches "
        f"of {decode.get('max_tokens')} tokens; time over CTranslate2 {reference}'s (the goal: "
        f"at most 1.2). demo: `{decode.get('demo_checkpoint')}`, {decode.get('demo_steps')} "
        f"steps; base: {decode.get('base_shape')}, random weights, every output "
        f"{decode.get('base_length')} tokens",
        "",
        "| model | engine | greedy s | beam 5 s | greedy sent/s | beam 5 sent/s "
        f"| greedy / CT2 {reference} | beam 5 / CT2 {reference} |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (model, engine, precision), own in by_engine.items():
        ct2 = by_engine.get((model, "ct2", reference), {})
        if None in own:
            cells = [note(own[None])] + [""] * 5
        else:
            cells = [cell(own.get(b), "seconds", ".2f") for b in (1, 5)]
            cells += [cell(own.get(b), "sentences_per_s", ",.1f") for b in (1, 5)]
            cells += [relative(own.get(b), ct2.get(b)) for b in (1, 5)]
        lines.append(f"| {model} | {engine} {precision} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cell(row: dict | None, key: str, spec: str) -> str:
    if row is None:
        return "-"
    return format(row[key], spec) if key in row else note(row)


def note(row: dict) -> str:
    return row.get("error") or f"skipped: {row.get('skipped', '?')}"


def relative(row: dict | None, reference: dict | None) -> str:
    if not row or not reference or "seconds" not in row or "seconds" not in reference:
        return "-"
    return f"{row['seconds'] / reference['seconds']:.2f}"
