"""Scores and tables: ``marian``'s ours | marian | ratio table, ``compare-marian``'s
BLEU table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .decoders import SEARCHES
from .flops import peak_bf16_flops


def rate(result: dict[str, Any], key: str = "tokens") -> float:
    return result[key] / result["seconds"]


def bench_rows(results: dict[str, Any], matmul_rate: float) -> list[tuple[str, Any, Any]]:
    """(metric, ours, marian) rows of ``marian``'s results; marian None where there is no
    counterpart."""
    rows: list[tuple[str, Any, Any]] = []
    ours, marian = results["train"]["ours"], results["train"]["marian"]
    rows.append(("train tok/s (same batches)", rate(ours), rate(marian)))
    rows.append(
        (
            "train MFU %",
            100 * rate(ours, "flops") / matmul_rate,
            100 * rate(marian, "flops") / matmul_rate,
        )
    )
    rows.append(("train peak RSS MiB", ours["peak_rss_mib"], marian["peak_rss_mib"]))
    fit = results.get("fit")
    if fit:
        rows.append(("fit tok/s (seq2seq fit; vs marian loop)", rate(fit), rate(marian)))
        rows.append(("fit MFU %", 100 * rate(fit, "flops") / matmul_rate, None))
        rows.append(("fit peak RSS MiB", fit["peak_rss_mib"], None))
    for search in SEARCHES:
        ours, marian = results[search]["ours"], results[search]["marian"]
        rows.append((f"{search} sent/s", rate(ours, "sentences"), rate(marian, "sentences")))
        rows.append((f"{search} tgt tok/s", rate(ours), rate(marian)))
        rows.append((f"{search} peak RSS MiB", ours["peak_rss_mib"], marian["peak_rss_mib"]))
    gpu = results.get("gpu")
    if gpu:
        ours, marian = gpu["ours"], gpu["marian"]
        peak = peak_bf16_flops(ours["device_name"])
        rows.append(("GPU bf16 train tok/s", rate(ours), rate(marian)))
        if peak:
            rows.append(
                (
                    "GPU MFU % of bf16 peak",
                    100 * rate(ours, "flops") / peak,
                    100 * rate(marian, "flops") / peak,
                )
            )
        rows.append(
            ("GPU max memory MiB", ours["max_gpu_memory_mib"], marian["max_gpu_memory_mib"])
        )
    return rows


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if abs(value) < 100 else f"{value:,.0f}"


def print_ratio_table(rows: list[tuple[str, Any, Any]]) -> list[dict[str, Any]]:
    """Prints metric | ours | marian | ratio; returns the rows as dicts for the JSON."""
    width = max(len(row[0]) for row in rows)
    header = f"{'metric':<{width}} | {'ours':>9} | {'marian':>9} | {'ratio':>6}"
    print(header)
    print("-" * len(header))
    out = []
    for metric, ours, marian in rows:
        ratio = ours / marian if marian else None
        shown = f"{ratio:.2f}" if ratio is not None else "-"
        print(f"{metric:<{width}} | {fmt(ours):>9} | {fmt(marian):>9} | {shown:>6}")
        out.append({"metric": metric, "ours": ours, "marian": marian, "ratio": ratio})
    return out


def score(name: str, hypotheses: list[str], references: list[list[str]], out: Path) -> dict:
    """sacreBLEU of ``hypotheses`` against each source's references (as ``seq2seq evaluate``),
    with the hypotheses written to OUT/NAME.test.hyp.zh."""
    from seq2seq.inference.evaluation import reference_streams, score_translations

    path = out / f"{name}.test.hyp.zh"
    path.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    streams = reference_streams(references)
    return {**score_translations(hypotheses, streams), "hypotheses": str(path)}


def print_comparison(rows: list[dict[str, Any]]) -> None:
    """``compare-marian``'s table: one row per model."""
    header = (
        f"{'model':<8} {'params':>10} {'steps':>7} {'train tok':>11} {'tok/s':>7} "
        f"{'BLEU':>6} {'chrF':>6} {'decode s':>9}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        speed = f"{r['train_tok_per_s']:.0f}" if r["train_tok_per_s"] else "?"
        print(
            f"{r['model']:<8} {r['params']:>10,} {r['train_steps']:>7} {r['train_tokens']:>11,} "
            f"{speed:>7} {r['bleu']:>6.2f} {r['chrf']:>6.2f} {r['decode_seconds']:>9.1f}"
        )
