"""Throughput and latency of ``seq2seq serve`` under concurrent clients, against the one-file
ceiling of ``seq2seq translate``.

    python scripts/bench.py serve --checkpoint runs/demo/checkpoints/last.ckpt
    python scripts/bench.py serve --clients 1,8,32 --beams 1,5 --duration 15 --json serve.json

For each beam size, one server process (``python -m seq2seq serve --port 0 --beam-size B``,
``--threads`` torch threads) serves every client count in turn. At each count, N clients run in
this process as asyncio tasks sharing one ``httpx.AsyncClient`` (N connections): each one POSTs
one test sentence per request to LibreTranslate's ``/translate``, waits for the answer and sends
the next sentence, cycling through the sentences from its own starting offset. The first
``--warmup`` seconds are not counted; then a request counts if it completes within the next
``--duration`` seconds (a window in which none completes, on a machine too busy for so short a
one, is measured again twice as long): requests/s, sentences/s (non-empty lines of ``q``; one
per request for the test split) and latency percentiles (send to answer, as the client sees it).
Every answer must be 200 with a ``translatedText``; the script exits 1 if any was not.

The ceiling: after the server has stopped (nothing else of ours runs), this bench re-invoked
as a worker loads ``Translator.from_checkpoint`` with the same thread count, warms up on 50
sentences, and times ``translate`` of all the sentences as one file with the same beam and
batch budget (what ``seq2seq translate --input FILE`` does, without loading and writing).

Against LibreTranslate on the same model, same load: the ``serve-libretranslate`` bench.

All ratios (x 1 client, % of the ceiling) are between numbers measured in the same run. The
load generator shares the machine with the server: the CPU table shows the cores that the
server, this process and everything else used during each measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import harness
from benchmarks.harness import finish_worker, run_worker, running_server, thread_env
from benchmarks.serve_load import Level, run_level  # the clients and what they measure
from benchmarks.serve_report import build_report, print_report  # the results and tables
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.pieces import MAX_TOKENS

progress = harness.progress("bench_serve")
CEILING_WARMUP = 50  # sentences decoded before the ceiling is timed
DEMO = "runs/demo/checkpoints/last.ckpt"  # the demo recipe's model


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.ceiling_worker:
        finish_worker(lambda: measure_ceiling(args), args.result, args.threads)
        return
    sentences = load_sentences(args)
    progress(f"{len(sentences)} sentences; {args.threads} torch threads; {os.cpu_count()} cores")
    levels: list[Level] = []
    ceilings: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_serve.") as scratch:
        lines = Path(scratch) / "sentences.en"
        lines.write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
        for beam in args.beams:
            levels += serve_levels(args, beam, sentences, Path(scratch))
            ceilings[beam] = ceiling(args, beam, lines, Path(scratch))
            progress(
                f"beam {beam}: one-file ceiling {ceilings[beam]['sentences_per_s']:.1f} "
                f"sentences/s ({ceilings[beam]['seconds']:.2f} s)"
            )
    report = build_report(args, levels, ceilings, len(sentences))
    print_report(report)
    save_and_check("serve", report, args.json)


def save_and_check(bench: str, report: dict[str, Any], json_path: str | None) -> None:
    """``report`` to ``--json``; exits 1 if any request failed (the numbers are then not
    valid). Both serving benches end so."""
    harness.write_json(json_path, report)
    errors = sum(level["errors"] for level in report["levels"])
    if errors:
        raise SystemExit(f"bench.py {bench}: {errors} request(s) failed; the numbers are not valid")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = load_parser(__doc__, "the model to serve")
    add = parser.add_argument
    add(
        "--beams",
        type=int_list,
        default=[1, 5],
        help="beam sizes, comma-separated; one server each (1,5)",
    )
    add(
        "--server-option",
        action="append",
        default=[],
        help="one more 'seq2seq serve' option, repeatable (e.g. --server-option=--no-continuous)",
    )
    add(
        "--server-log",
        default=None,
        help="keep the servers' logs: BEAM is replaced by the beam size "
        "(default: a temporary file)",
    )
    # The ceiling worker: this bench re-invoked by ``ceiling``.
    add("--ceiling-worker", action="store_true", help=argparse.SUPPRESS)
    add("--beam", type=int, help=argparse.SUPPRESS)
    add("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    check_load(parser, args, "beams", args.beams)
    return args


def load_parser(doc: str, model: str) -> argparse.ArgumentParser:
    """A serving bench's parser (this one's and ``serve-libretranslate``'s) with the options
    both take: the model (``model`` says whose) and the sentences, the clients and how long
    they load a server, how our server batches, how long a client waits, and where the results
    go."""
    parser = harness.described_parser(doc)
    add = parser.add_argument
    add("--checkpoint", default=DEMO, help=f"{model} ({DEMO})")
    add(
        "--sentences",
        help="file of English lines to send (default: the checkpoint's test split, which needs "
        "its data cache)",
    )
    add("--clients", type=int_list, default=[1, 8, 32], help="concurrent client counts (1,8,32)")
    add("--duration", type=float, default=15.0, help="seconds measured per client count (15)")
    add("--warmup", type=float, default=2.0, help="seconds of load before each, not counted (2)")
    add("--threads", type=int, default=2, help="compute threads of each server and the ceiling (2)")
    add(
        "--max-wait-ms", type=float, default=5.0, help="our server's --max-wait-ms (its default, 5)"
    )
    add(
        "--max-batch-tokens",
        type=int,
        default=MAX_TOKENS,
        help="our server's --max-batch-tokens and the ceiling's --max-tokens (their default, "
        "%(default)s)",
    )
    add(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds a client waits for one answer before it counts as failed (120)",
    )
    add("--json", help="also write the results to this file")
    return parser


def check_load(
    parser: argparse.ArgumentParser, args: argparse.Namespace, beams: str, sizes
) -> None:
    """A usage error unless the durations are positive and the counts at least 1."""
    if args.duration <= 0 or args.warmup < 0 or min([*args.clients, *sizes]) < 1:
        parser.error(f"--duration must be > 0, --warmup >= 0, clients and {beams} >= 1")


def int_list(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def load_sentences(args: argparse.Namespace) -> list[str]:
    """``--sentences``' non-empty lines, or the distinct English sentences of the checkpoint's
    test split."""
    if args.sentences:
        lines = Path(args.sentences).read_text(encoding="utf-8").splitlines()
        sentences = [line for line in lines if line.strip()]
    else:
        from seq2seq.inference.evaluation import held_out_split

        sentences, _ = held_out_split(args.checkpoint, "test")
    if not sentences:
        raise SystemExit("bench.py serve: no sentences to send")
    return sentences


# -- the server -----------------------------------------------------------------------------


def serve_command(args: argparse.Namespace, beam: int, checkpoint=None, options=()) -> list[str]:
    """``seq2seq serve`` of ``checkpoint`` (default ``args.checkpoint``) with ``beam``,
    ``options`` and ``--server-option``s on a free loopback port."""
    command = [sys.executable, "-m", "seq2seq", "serve", "--checkpoint"]
    command += [str(checkpoint or args.checkpoint), "--host", "127.0.0.1", "--port", "0"]
    command += ["--beam-size", str(beam), "--max-wait-ms", str(args.max_wait_ms)]
    command += ["--max-batch-tokens", str(args.max_batch_tokens), *options, *args.server_option]
    return command


def serve_levels(
    args: argparse.Namespace, beam: int, sentences: list[str], scratch: Path
) -> list[Level]:
    """One server with ``beam``; every client count against it, in turn."""
    log = (
        Path(args.server_log.replace("BEAM", str(beam)))
        if args.server_log
        else scratch / f"server-beam{beam}.log"
    )
    progress(f"beam {beam}: starting the server (log: {log})")
    levels = []
    command, env = serve_command(args, beam), thread_env(args.threads)
    with running_server(command, log, env) as server:
        url, process = server.url, server.process
        progress(f"beam {beam}: serving at {url}")
        for clients in args.clients:
            level = asyncio.run(
                run_level(
                    url,
                    process.pid,
                    sentences,
                    beam,
                    clients,
                    args.warmup,
                    args.duration,
                    args.timeout,
                )
            )
            progress(
                f"beam {beam}, {clients} client(s): {level.requests} requests, "
                f"{level.requests_per_s:.1f}/s, p50 {level.p50_ms:.0f} ms, "
                f"p99 {level.p99_ms:.0f} ms, {level.errors} failed"
            )
            levels.append(level)
            if process.poll() is not None:
                raise SystemExit(f"bench.py serve: the server exited; its log:\n{log.read_text()}")
    return levels


# -- the one-file ceiling -------------------------------------------------------------------


def ceiling(args: argparse.Namespace, beam: int, lines: Path, scratch: Path) -> dict[str, Any]:
    """The ceiling worker's result: ``lines`` translated as one file with ``beam``."""
    progress(f"beam {beam}: timing the one-file ceiling")
    arguments = [
        "--ceiling-worker",
        "--checkpoint",
        args.checkpoint,
        "--sentences",
        str(lines),
        "--beam",
        str(beam),
        "--max-batch-tokens",
        str(args.max_batch_tokens),
        "--threads",
        str(args.threads),
    ]
    return run_worker("serve", scratch / f"ceiling-beam{beam}.json", arguments, args.threads)


def measure_ceiling(args: argparse.Namespace) -> dict[str, Any]:
    """The worker's side: load, warm up, then time ``translate`` of all the sentences."""
    from seq2seq.inference.translator import Translator

    sentences = load_sentences(args)
    translator = Translator.from_checkpoint(args.checkpoint)
    translator.translate(
        sentences[:CEILING_WARMUP],
        TranslateOptions(beam_size=args.beam, max_tokens=args.max_batch_tokens),
    )
    start = time.perf_counter()
    outputs = translator.translate(
        sentences, TranslateOptions(beam_size=args.beam, max_tokens=args.max_batch_tokens)
    )
    seconds = time.perf_counter() - start
    assert len(outputs) == len(sentences)
    return {
        "beam": args.beam,
        "sentences": len(sentences),
        "seconds": seconds,
        "sentences_per_s": len(sentences) / seconds,
    }
