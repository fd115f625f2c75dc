"""The benchmarks: one module per bench, run by ``python scripts/bench.py NAME [options]``
(``python scripts/bench.py`` lists them; ``NAME --help`` tells what each measures and how),
and the parts they share. Nothing needs installing: ``scripts/bench.py`` puts this checkout
and this package on the path.

- ``harness``: worker subprocesses (one measurement each) and their peak RSS, servers started,
  waited for and stopped, free ports, timing and the best of alternating rounds, progress
  lines, the machine line (CPU, cores, versions, how busy the rest of the machine was);
- ``proc_memory``: a process tree's memory and CPU time (``/proc``) and a directory's disk use;
- ``recipe``, ``reference``, ``train``, ``flops``, ``decoders``, ``report``: ``marian``'s and
  ``compare-marian``'s config, Marian model, training loop, FLOPs, decoders and tables;
- ``data_corpus``, ``data_child``, ``data_report``: ``data``'s corpus, children and tables;
- ``serve_load``, ``serve_report``: ``serve``'s (and ``serve-libretranslate``'s) clients and
  tables; ``libretranslate``: the real LibreTranslate those benches and tests/test_argos.py
  drive;
- ``terminology_report``, ``verbatim_counts``, ``documents_compare``: the report of
  ``terminology``, what ``verbatim`` counts, what ``documents-wild`` compares;
  ``documents_office_readers``: how ``documents-office`` reads files, with readers not ours;
- ``gpu_check``, ``gpu_env``, ``gpu_train``, ``gpu_decode``, ``gpu_report``:
  ``scripts/gpu_check.sh``'s stages (the driver, the machine and its installs, bf16 training
  against Marian, decoding against CTranslate2, the table).
"""

from __future__ import annotations

import importlib
import sys

# NAME -> what it measures; the module is NAME with '_' for '-'.
BENCHES = {
    "marian": "speed and memory against Hugging Face MarianMTModel on the same batches",
    "compare-marian": "ours and MarianMTModel as the same model, trained side by side: BLEU, chrF",
    "decode": "milliseconds per decoding step at several target lengths; parameter counts",
    "ctranslate2": "CPU decoding: ours float32 and int8 against CTranslate2's",
    "streaming": "streamed translation against one pass over the whole input",
    "documents": "paragraphs, long lines and HTML tags against one sentence per line",
    "documents-wild": "real documents through the CLI: what a reader loses",
    "documents-office": "real office, EPUB, PO and XLIFF files through the CLI: what is kept",
    "terminology": "glossary terms: their rate, BLEU with and without, the time they cost",
    "verbatim": "verbatim spans (URLs, numbers, identifiers, acronyms) kept",
    "repetition": "loops: how often translations repeat themselves under each guard setting",
    "real-text": "the test split as written, UPPERCASED and Title Cased; short UI strings",
    "serve": "seq2seq serve under concurrent clients against the one-file ceiling",
    "serve-libretranslate": "seq2seq serve against LibreTranslate on the same model, same load",
    "libretranslate-answers": "LibreTranslate's answers against ours at Argos' settings, why",
    "finetune": "fine-tuning a pretrained model on one domain: the gain and the cost elsewhere",
    "shortlist": "a lexical shortlist: speed and BLEU with and without, ours and CTranslate2",
    "distill": "a distilled student against its teacher: BLEU, speed, latency, per engine",
    "data": "data preparation at scale: memory, time, disk; reloading; DDP ranks' memory",
}


def main(argv: list[str] | None = None) -> int:
    """``NAME [options]``: runs bench NAME's ``main(options)``; no NAME: the list."""
    argv = sys.argv[1:] if argv is None else argv
    name = argv[0].replace("_", "-") if argv else ""
    if name not in BENCHES:
        width = max(map(len, BENCHES))
        listing = "\n".join(f"  {n:<{width}}  {what}" for n, what in BENCHES.items())
        asked = not argv or argv[0] in ("-h", "--help")
        unknown = "" if asked else f"bench.py: no bench {argv[0]!r}\n"
        usage = f"{unknown}usage: python scripts/bench.py NAME [options] (NAME --help)"
        print(f"{usage}\n\n{listing}", file=sys.stdout if asked else sys.stderr)
        return 0 if asked else 2
    sys.argv[0] = f"bench.py {name}"  # argparse's prog in usage and errors
    module = importlib.import_module(f"benchmarks.{name.replace('-', '_')}")
    return module.main(argv[1:]) or 0
