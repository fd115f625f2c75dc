"""``gpu_check``'s decoding: our engine against CTranslate2 on the same device, greedy and
beam 5, through the same ``Translator`` (its batching, ``max_tokens`` per batch), on two
models: the demo model (trained weights, natural output lengths, the test split it was
trained beside) and the paper's base shape with random weights and the demo's vocabulary,
decoding exactly ``base_length`` tokens a sentence (``benchmarks.ctranslate2.base_checkpoint``).

Engines, each loaded once per model: ours in float32 and with its weights cast to float16,
CTranslate2 in float16 and int8_float16 on a GPU (float32 and int8 on the CPU, where
CTranslate2 has no float16: the dry run). Each (engine, beam) is translated once untimed on
the first ``warmup`` sentences, then timed over all of them. One row at a time is saved, so
a killed run keeps what it measured.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

ENGINES = {  # device type -> (engine name, precision)
    "cuda": (("ours", "float32"), ("ours", "float16"), ("ct2", "float16"), ("ct2", "int8_float16")),
    "cpu": (("ours", "float32"), ("ours", "float16"), ("ct2", "float32"), ("ct2", "int8")),
}
BEAMS = (1, 5)


def decode(job: dict[str, Any], save) -> dict[str, Any]:
    """Both models, every engine and beam, within ``job["deadline"]``."""
    import torch

    from benchmarks.ctranslate2 import BASE, base_checkpoint
    from seq2seq.inference.checkpoint import read_checkpoint
    from seq2seq.tools.export import export_ctranslate2

    work = Path(job["work"])
    demo = job["demo_checkpoint"]
    sources, origin = test_sources(demo, job)
    result: dict[str, Any] = {
        "device": job["device"],
        "torch": torch.__version__,
        "sentences": len(sources),
        "sources": origin,
        "max_tokens": job["max_tokens"],
        "demo_checkpoint": demo,
        "demo_steps": read_checkpoint(demo).get("global_step"),
        "base_length": job["base_length"],
        "rows": [],
    }
    models = {"demo": (demo, str(export_ctranslate2(demo, work / "demo-ct2")))}
    shape = result["base_shape"] = job.get("base_shape") or BASE
    models["base"] = base_checkpoint(demo, work, shape, job["base_length"])
    for model, (checkpoint, ct2) in models.items():
        for engine, precision in ENGINES[torch.device(job["device"]).type]:
            result["rows"] += engine_rows(model, engine, precision, checkpoint, ct2, sources, job)
            save(result)
    return result


def test_sources(checkpoint: str, job: dict[str, Any]) -> tuple[list[str], str]:
    """Up to ``job["sentences"]`` distinct test sources of the data the checkpoint was trained
    on; where that data cannot be read here (a carried checkpoint), English sides of the
    bundled pairs the ``data`` bench joins."""
    from seq2seq.errors import CheckpointError, DataError
    from seq2seq.inference.evaluation import held_out_split

    try:
        sources, _ = held_out_split(checkpoint, "test", progress=lambda line: None)
        return sources[: job["sentences"]], "the checkpoint's test split"
    except (CheckpointError, DataError, OSError):
        lines = (Path(job["work"]) / job["bundled_pairs"]).read_text(encoding="utf-8")
        english = [line.split("\t")[0] for line in lines.split("\n")[:-1]]
        return english[-job["sentences"] :], "the last bundled pairs' English"


def engine_rows(
    model: str,
    engine: str,
    precision: str,
    checkpoint: str,
    ct2: str,
    sources: list[str],
    job: dict[str, Any],
) -> list[dict[str, Any]]:
    """One row per beam for an engine (or one row saying why it did not run)."""
    row = {"model": model, "engine": engine, "precision": precision}
    if time.time() > job["deadline"]:
        return [row | {"skipped": "budget"}]
    try:
        translator = load(engine, precision, checkpoint, ct2, job["device"])
    except Exception as error:  # one engine failing (a missing library) must not stop the rest
        return [row | {"error": f"{type(error).__name__}: {str(error).splitlines()[0]}"}]
    rows = []
    for beam in BEAMS:
        if time.time() > job["deadline"]:
            rows.append(row | {"beam": beam, "skipped": "budget"})
            continue
        rows.append(row | {"beam": beam} | timed(translator, sources, beam, job))
    return rows


def load(engine: str, precision: str, checkpoint: str, ct2: str, device: str):
    """A ``Translator`` over our engine (float16: the loaded weights cast, unpacked) or over
    CTranslate2 with ``precision`` as its compute type."""
    from seq2seq.data.truecase import Truecaser
    from seq2seq.inference.checkpoint import load_model
    from seq2seq.inference.ctranslate2_engine import CTranslate2Engine
    from seq2seq.inference.engines import TorchEngine, token_rules
    from seq2seq.inference.translator import Translator

    if engine == "ct2":  # Translator.from_ctranslate2 takes no float16
        found = CTranslate2Engine(ct2, device=device, compute_type=precision)
        return Translator(found, found.tokenizer, Truecaser(found.truecase))
    if precision == "float32":
        return Translator.from_checkpoint(checkpoint, device)
    loaded = load_model(checkpoint, device)
    found = TorchEngine(loaded.model.half(), loaded.search, token_rules(loaded.tokenizer))
    return Translator(found, loaded.tokenizer, Truecaser(loaded.truecase))


def timed(translator, sources: list[str], beam: int, job: dict[str, Any]) -> dict[str, Any]:
    """Seconds to translate ``sources`` (after an untimed warm-up), output characters."""
    from seq2seq.inference.options import TranslateOptions

    options = TranslateOptions(beam_size=beam, max_tokens=job["max_tokens"], split=False)
    try:
        translator.translate(sources[: job["warmup"]], options)
        start = time.perf_counter()
        outputs = translator.translate(sources, options)
        seconds = time.perf_counter() - start
    except Exception as error:
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0]}"}
    return {
        "seconds": seconds,
        "sentences_per_s": len(sources) / seconds,
        "characters": sum(map(len, outputs)),
    }
