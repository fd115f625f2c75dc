"""``seq2seq serve`` against LibreTranslate on the same model under the same load, one server
after the other on this machine.

    python scripts/bench.py serve-libretranslate --checkpoint runs/demo/checkpoints/last.ckpt
    python scripts/bench.py serve-libretranslate --clients 1,8,32 --duration 15 --json lt.json

The checkpoint is exported once as an Argos package (``seq2seq export --format argos``) and
installed by the real argostranslate of LibreTranslate's own environment
(scripts/libretranslate_env.sh, made once and cached; or ``--python``). Then each server of
``--servers`` in turn:

* libretranslate: LibreTranslate 1.9.6 serving the package, offline (``--load-only en,zh``),
  ``--threads`` (waitress' request threads) ``--request-threads``. Argos decodes with
  CTranslate2: ``ARGOS_BEAM_SIZE`` = ``--beam``, one translator (``ARGOS_INTER_THREADS=1``) of
  ``--threads`` threads (``ARGOS_INTRA_THREADS``), CTranslate2's length penalty 0.2, outputs
  up to 256 tokens; MiniSBD (onnxruntime, its own default threads) cuts the sentences.
* ctranslate2: ``seq2seq serve --engine ctranslate2`` on the package's ``model/`` (the
  CTranslate2 export), its settings file given Argos' search: length penalty 0.2 in
  CTranslate2's formula, outputs up to 256 tokens (our cap at the model's positions: 255).
  One CTranslate2 translator (``inter_threads=1``) whose threads follow ``OMP_NUM_THREADS``.
* ours: ``seq2seq serve`` on the checkpoint (our engine, torch), with the checkpoint's own
  length penalty (GNMT's formula: CTranslate2's cannot be set) and length limit.

Every server gets ``OMP_NUM_THREADS`` = ``--threads`` and beam ``--beam``; ours batch requests
together (``--max-wait-ms``, ``--max-batch-tokens``), LibreTranslate decodes each request on
its own. A server is started, sent one sentence (model loading is not measured), then loaded at
each client count as the ``serve`` bench does (``benchmarks.serve_load``): N clients each
POST one test sentence per request to ``/translate`` and send the next on the answer; after
``--warmup`` seconds, ``--duration`` seconds are measured: sentences/s, latency percentiles,
the cores used and the server's peak resident memory (its process tree, read every 0.2 s).
Ratios are between servers measured in the same run, at the same client count. Every answer
must be 200 with a ``translatedText``; the bench exits 1 if any was not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from benchmarks import harness, libretranslate
from benchmarks.harness import running_server, thread_env
from benchmarks.proc_memory import MIB
from benchmarks.serve import (
    check_load,
    load_parser,
    load_sentences,
    save_and_check,
    serve_command,
)
from benchmarks.serve_load import run_level, tree_rss
from benchmarks.serve_report import build_comparison, print_comparison
from seq2seq.inference.ctranslate2_engine import SETTINGS_FILE
from seq2seq.tools import argos

SERVERS = ("ours", "ctranslate2", "libretranslate")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    sentences = load_sentences(args)
    python = Path(args.python) if args.python else libretranslate.libretranslate_python()
    progress(f"{len(sentences)} sentences; {args.threads} threads; {os.cpu_count()} cores")
    rows: list[dict[str, Any]] = []
    servers: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_serve_lt.") as tmp:
        scratch = Path(tmp)
        logs = Path(args.logs) if args.logs else scratch
        logs.mkdir(parents=True, exist_ok=True)
        package = argos.export_argos(args.checkpoint, scratch / "out")
        installed = libretranslate.install_package(python, package, logs / "libretranslate-home")
        progress(f"exported and installed {package.name}")
        for name in args.servers:
            start = time.perf_counter()
            with SERVER_STARTS[name](args, python, installed, logs) as (url, pid, description):
                ready = time.perf_counter() - start
                sample = warm_up(url, sentences[0], args.timeout)
                servers[name] = {
                    "description": description,
                    "ready_s": ready,
                    "ready_rss_mib": tree_rss(pid) / MIB,
                    "sample": [sentences[0], sample],
                }
                progress(f"{name}: ready in {ready:.1f} s; {sentences[0]!r} -> {sample!r}")
                rows += measure(args, name, url, pid, sentences)
    report = build_comparison(args, rows, servers, len(sentences), versions(python))
    print_comparison(report)
    save_and_check("serve-libretranslate", report, args.json)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = load_parser(__doc__, "the model every server serves")
    add = parser.add_argument
    add(
        "--servers",
        type=lambda text: [s for s in text.split(",") if s],
        default=list(SERVERS),
        help=f"servers to measure, in this order (default: {','.join(SERVERS)})",
    )
    add("--reference", default="libretranslate", help="the server ratios are to (libretranslate)")
    add("--beam", type=int, default=argos.ARGOS_BEAM_SIZE, help="every server's")
    add(
        "--request-threads",
        type=int,
        default=4,
        help="LibreTranslate's --threads: waitress threads taking requests (its default, 4)",
    )
    add(
        "--max-other-cores",
        type=float,
        default=0.25,
        help="a level during which other processes used more cores is measured again (0.25)",
    )
    add("--retries", type=int, default=2, help="at most this many times (2)")
    add("--python", help="LibreTranslate's python (default: made by the script)")
    add("--logs", help="keep the servers' logs in this directory")
    args = parser.parse_args(argv)
    args.server_option = []  # serve_command's extra options: none
    unknown = set(args.servers) - set(SERVERS)
    if unknown or not args.servers:
        parser.error(f"--servers: choose among {','.join(SERVERS)}")
    check_load(parser, args, "beam", [args.beam])
    return args


progress = harness.progress("bench_serve_libretranslate")


def versions(python: Path) -> dict[str, str]:
    """The versions of what decodes: ours and LibreTranslate's environment."""
    import ctranslate2

    code = "from importlib.metadata import version as v; print(v('libretranslate'))"
    found = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return {"ctranslate2": ctranslate2.__version__, "libretranslate": found.stdout.strip()}


# -- the servers: each yields (url, pid, description) once it answers ---------------------------


@contextmanager
def start_ours(
    args: argparse.Namespace, python: Path, installed: Path, logs: Path
) -> Iterator[tuple[str, int, str]]:
    command, env = serve_command(args, args.beam), thread_env(args.threads)
    description = f"seq2seq serve, torch, beam {args.beam}, the checkpoint's search"
    with running_server(command, logs / "ours.log", env) as server:
        yield server.url, server.process.pid, description


@contextmanager
def start_ctranslate2(
    args: argparse.Namespace, python: Path, installed: Path, logs: Path
) -> Iterator[tuple[str, int, str]]:
    model = argos_search_model(installed / "model", logs / "ctranslate2-model")
    options = ["--engine", "ctranslate2"]
    command = serve_command(args, args.beam, model, options)
    description = f"seq2seq serve --engine ctranslate2, beam {args.beam}, Argos' search"
    with running_server(command, logs / "ctranslate2.log", thread_env(args.threads)) as server:
        yield server.url, server.process.pid, description


@contextmanager
def start_libretranslate(
    args: argparse.Namespace, python: Path, installed: Path, logs: Path
) -> Iterator[tuple[str, int, str]]:
    threads = str(args.threads)
    env = {
        "ARGOS_BEAM_SIZE": str(args.beam),
        "ARGOS_INTER_THREADS": "1",
        "ARGOS_INTRA_THREADS": threads,
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
    }
    home, request_threads = logs / "libretranslate-home", args.request_threads
    description = (
        f"LibreTranslate, beam {args.beam}, {request_threads} request threads, "
        f"CTranslate2 {threads} threads"
    )
    with libretranslate.libretranslate(python, home, env=env, threads=request_threads) as started:
        url, process = started
        yield url, process.pid, description


SERVER_STARTS = {
    "ours": start_ours,
    "ctranslate2": start_ctranslate2,
    "libretranslate": start_libretranslate,
}


def argos_search_model(model: Path, out: Path) -> Path:
    """``model`` (links to its files) with Argos' search in our settings file: CTranslate2's
    length penalty 0.2 and outputs up to 256 tokens (+ the eos our limit counts)."""
    out.mkdir(parents=True, exist_ok=True)
    for path in model.iterdir():
        if path.name != SETTINGS_FILE and not (out / path.name).exists():
            (out / path.name).symlink_to(path.resolve())
    settings = json.loads((model / SETTINGS_FILE).read_text(encoding="utf-8"))
    settings["search"].update(
        length_penalty=argos.ARGOS_LENGTH_PENALTY,
        max_len_a=0.0,
        max_len_b=argos.ARGOS_MAX_DECODING_LENGTH + 1,
    )
    (out / SETTINGS_FILE).write_text(json.dumps(settings, indent=2), encoding="utf-8")
    return out


# -- the load -------------------------------------------------------------------------------


def warm_up(url: str, sentence: str, timeout: float) -> str:
    """One request (LibreTranslate loads its model on the first); its translation."""
    answer = httpx.post(
        url + "/translate",
        json={"q": sentence, "source": "en", "target": "zh"},
        timeout=timeout,
        trust_env=False,
    )
    answer.raise_for_status()
    return answer.json()["translatedText"]


def measure(
    args: argparse.Namespace, name: str, url: str, pid: int, sentences: list[str]
) -> list[dict[str, Any]]:
    """Every client count against one running server: the levels' summaries. A level during
    which other processes used more than ``--max-other-cores`` is measured again, at most
    ``--retries`` times (the machine is shared; the last measurement is kept)."""
    rows = []
    for clients in args.clients:
        for attempt in range(1 + args.retries):
            level = asyncio.run(
                run_level(
                    url,
                    pid,
                    sentences,
                    args.beam,
                    clients,
                    args.warmup,
                    args.duration,
                    args.timeout,
                )
            )
            progress(
                f"{name}, {clients} client(s): {level.sentences_per_s:.1f} sentences/s, "
                f"p50 {level.p50_ms:.0f} ms, p99 {level.p99_ms:.0f} ms, peak "
                f"{level.peak_rss_mib:.0f} MiB, other processes {level.other_cores:.2f} cores, "
                f"{level.errors} failed"
            )
            if level.other_cores <= args.max_other_cores or attempt == args.retries:
                break
            progress(f"{name}, {clients} client(s): disturbed, measured again")
        rows.append({"server": name, "attempts": attempt + 1, **level.summary()})
    return rows
