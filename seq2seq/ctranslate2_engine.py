"""CTranslate2 as a second inference engine: convert an export, translate with it.

The conversion goes through our Hugging Face export and CTranslate2's own Transformers
converter, with two corrections for our models (a custom loader in place of the Marian one):

* CTranslate2's Marian loader drops the last embedding row, taking it for the ``<pad>`` that
  Transformers appends to Marian vocabularies. Ours has pad at id 0 and a real piece last, so
  every row is kept and the vocabulary is read whole.
* It starts the decoder from a zero embedding (Marian starts from pad, whose embedding is zero).
  Ours starts from ``<s>`` and its trained embedding, so the start token is ``<s>``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

from seq2seq.search import SearchConfig
from seq2seq.translator import CheckpointError, Translator, load_model

SEARCH_FILE = "seq2seq_search.json"  # our decoding defaults, beside CTranslate2's files
SPM_FILE = "spm.model"


def _loader():  # noqa: ANN202 (ctranslate2 type)
    from ctranslate2.converters.transformers import BartLoader, MarianMTLoader

    class Seq2SeqMarianLoader(MarianMTLoader):
        """MarianMTLoader without the pad-row removal and the zero start embedding."""

        def get_model_spec(self, model):
            model.config.normalize_before = False  # post-LN
            model.config.normalize_embedding = False
            return BartLoader.get_model_spec(self, model)

        def set_config(self, config, model, tokenizer):
            start = tokenizer.convert_ids_to_tokens(model.config.decoder_start_token_id)
            config.bos_token = start
            config.eos_token = tokenizer.eos_token
            config.unk_token = tokenizer.unk_token
            config.decoder_start_token = start

        def set_decoder(self, spec, decoder):
            BartLoader.set_decoder(self, spec, decoder)  # start_from_zero_embedding stays off

        def get_vocabulary(self, model, tokenizer):
            return BartLoader.get_vocabulary(self, model, tokenizer)

    return Seq2SeqMarianLoader()


def convert(hf_dir: Path, output: Path, quantization: str | None = None) -> None:
    """Run CTranslate2's Transformers converter on an export with our loader for Marian."""
    from ctranslate2.converters import transformers as ct2_transformers

    loaders = ct2_transformers._MODEL_LOADERS
    original = loaders["MarianConfig"]
    loaders["MarianConfig"] = _loader()
    try:
        converter = ct2_transformers.TransformersConverter(str(hf_dir))
        converter.convert(str(output), quantization=quantization, force=True)
    finally:
        loaders["MarianConfig"] = original


def export_ctranslate2(
    checkpoint: str | Path,
    output: str | Path,
    eval_json: str | None = None,
    quantization: str | None = None,
) -> Path:
    """Write a CTranslate2 model directory that ``CTranslate2Translator`` (and
    ``seq2seq translate --engine ctranslate2``) reads."""
    from seq2seq.export import export_hf

    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        raise ValueError("--format ctranslate2 needs: pip install ctranslate2") from None
    out = Path(output)
    with tempfile.TemporaryDirectory() as tmp:
        hf_dir = export_hf(checkpoint, Path(tmp) / "hf", eval_json)
        convert(hf_dir, out, quantization)
        shutil.copy(hf_dir / "source.spm", out / SPM_FILE)
        shutil.copy(hf_dir / "README.md", out / "README.md")
    loaded = load_model(checkpoint)
    settings = {"search": asdict(loaded.search), "max_positions": loaded.model.config.max_positions}
    (out / SEARCH_FILE).write_text(json.dumps(settings, indent=2), encoding="utf-8")
    return out


class CTranslate2Translator(Translator):
    """``Translator`` on a CTranslate2 model directory (from ``seq2seq export``): the same line
    handling, batching and truncation, CTranslate2's search in place of ours.

    Greedy output equals ours exactly: the source pieces are the same, and a greedy output cut
    to a sentence's own length limit is what our search gives (CTranslate2 takes one limit per
    batch). Beam search differs in its length penalty: CTranslate2 divides by length^alpha,
    GNMT's penalty is ((5 + length) / 6)^alpha.
    """

    def __init__(self, model_dir: str | Path, device: str = "cpu", compute_type: str = "default"):
        # No torch model here: Translator.translate needs only the tokenizer, the search
        # settings, source_limit() and _best_outputs(), all set or overridden below.
        import ctranslate2

        from seq2seq.data.tokenizer import Tokenizer

        directory = Path(model_dir)
        if not (directory / "model.bin").is_file() or not (directory / SPM_FILE).is_file():
            raise CheckpointError(f"{directory}: not a CTranslate2 export of seq2seq")
        self.tokenizer = Tokenizer.load(directory / SPM_FILE)
        settings = json.loads((directory / SEARCH_FILE).read_text(encoding="utf-8"))
        self.search = SearchConfig(**settings["search"])
        self.max_positions = int(settings["max_positions"])
        self.engine = ctranslate2.Translator(
            str(directory), device=device, compute_type=compute_type, inter_threads=1
        )
        self._split_batches = 0

    def with_search(self, **overrides) -> CTranslate2Translator:
        """A translator sharing this engine, with some search settings changed (None = keep)."""
        import copy
        from dataclasses import replace

        changes = {k: v for k, v in overrides.items() if v is not None}
        changed = copy.copy(self)
        changed.search = replace(self.search, **changes)
        return changed

    def batch_budget(self, max_tokens: int, beam_size: int) -> int:
        """CTranslate2 sizes its beams itself: whole batches run faster there (demo test set,
        beam 5: 3.7 s with 4,000 source tokens per batch, 5.4 s with 800)."""
        return max_tokens

    def source_limit(self) -> int:
        """The export's position table, as for our model."""
        return self.max_positions

    def _best_outputs(self, sources: list[list[int]], beam_size: int) -> list[list[int]]:
        import torch

        sp = self.tokenizer
        # Our search's limits exactly (float32 arithmetic, capped at the positions), minus the
        # eos it forces at the limit.
        lengths = torch.tensor([len(source) for source in sources])
        limits = (self.search.max_lengths(lengths, cap=self.max_positions) - 1).tolist()
        longest = max(limits)  # 0 when every sentence may hold only its eos
        results = self.engine.translate_batch(
            [[sp.id_to_piece(t) for t in source] for source in sources],
            beam_size=beam_size,
            length_penalty=self.search.length_penalty,
            # Our rules: at least one token before the eos unless the limit leaves none (those
            # outputs are cut to [] below), never unk, pad or bos.
            max_decoding_length=max(1, longest),
            min_decoding_length=min(1, longest),
            disable_unk=True,
            suppress_sequences=[
                [sp.id_to_piece(self.search.pad_id)],
                [sp.id_to_piece(self.search.bos_id)],
            ],  # fmt: skip
        )
        return [
            [sp.piece_to_id(p) for p in result.hypotheses[0]][:limit]
            for result, limit in zip(results, limits, strict=True)
        ]
