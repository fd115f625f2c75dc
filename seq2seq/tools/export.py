"""Export a trained encoder-decoder checkpoint to Hugging Face ``MarianMTModel``, and from there
to CTranslate2.

Marian is the same post-LN Transformer with one tied, scaled embedding, so the export is a
renaming of weights plus one exact change of basis between our interleaved sinusoids and
Marian's sines-then-cosines: :mod:`seq2seq.tools.marian_weights` maps the config and the
weights; this module writes them, the tokenizer files and a model card.

The CTranslate2 conversion goes through the Hugging Face export and CTranslate2's own Transformers
converter, with two corrections for our models (a custom loader in place of the Marian one):

* CTranslate2's Marian loader drops the last embedding row, taking it for the ``<pad>`` that
  Transformers appends to Marian vocabularies. Ours has pad at id 0 and a real piece last, so
  every row is kept and the vocabulary is read whole.
* It starts the decoder from a zero embedding (Marian starts from pad, whose embedding is zero).
  Ours starts from ``<s>`` and its trained embedding, so the start token is ``<s>``.

Sources: ``MarianTokenizer`` appends ``</s>`` to every source, as our models read them since
``source_ends_with_eos`` (:mod:`seq2seq.data.tokenizer`), so ``MarianTokenizer`` + ``generate``
give ``seq2seq translate``'s outputs. A model trained before that read sources without it: its
HF export is written all the same with a one-line warning (drop the eos from ``input_ids`` for
its outputs), and its CTranslate2 export is exact, as our engine feeds CTranslate2 the tokens
``seq2seq translate`` feeds our model. The export's config records which kind it is
(:data:`EXPORT_SOURCE_EOS`), for ``seq2seq import``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from seq2seq.config import ModelConfig
from seq2seq.data.paired_tokenizer import PairedTokenizer
from seq2seq.data.tokenizer import SOURCE_EOS_KEY
from seq2seq.errors import CheckpointError
from seq2seq.inference.checkpoint import LoadedModel, load_model, read_checkpoint
from seq2seq.inference.ctranslate2_engine import SETTINGS_FILE, SPM_FILE, VMAP_FILE
from seq2seq.inference.engines import read_shortlist
from seq2seq.inference.evaluation import read_eval_json

# The mapping lived here first: its names stay importable from this module (``as`` re-exports).
from seq2seq.tools.marian_weights import (
    check_exportable,
    marian_rows,
    to_marian,
)


def generation_config(config: ModelConfig, pad_id: int | None = None):  # noqa: ANN201
    """``generate``'s defaults for the export, with our search's rules: start from bos; never
    emit pad, unk or bos (``bad_words_ids``, as Marian's own exports ban pad); at least one
    token before the eos (``min_new_tokens``; at ``max_length=2`` the forced eos still ends the
    output at once, as our length limit of 1 does); beam 5."""
    from transformers import GenerationConfig

    pad_id = config.pad_id if pad_id is None else pad_id
    banned = sorted({pad_id, config.unk_id, config.bos_id})
    return GenerationConfig(
        decoder_start_token_id=config.bos_id,
        eos_token_id=config.eos_id,
        pad_token_id=pad_id,
        bos_token_id=config.bos_id,
        forced_eos_token_id=config.eos_id,
        max_length=config.max_positions,
        num_beams=5,
        bad_words_ids=[[token] for token in banned],
        min_new_tokens=1,
    )


def export_hf(checkpoint: str | Path, output: str | Path, eval_json: str | None = None) -> Path:
    """Write a ``from_pretrained`` directory: weights, config, generation config, tokenizer
    files from our SentencePiece model and a model card. A model trained on sources without
    ``</s>`` is written with a one-line warning: MarianTokenizer gives it one."""
    loaded = load_model(checkpoint)
    out = write_hf(loaded, checkpoint, output, eval_json)
    if not loaded.tokenizer.source_ends_with_eos:
        print(
            f"warning: {checkpoint} was trained on sources without </s> but MarianTokenizer "
            "appends one: drop it from input_ids for seq2seq translate's outputs, or retrain "
            "for an export that MarianTokenizer feeds exactly",
            file=sys.stderr,
        )
    return out


def write_hf(
    loaded: LoadedModel,
    checkpoint: str | Path,
    output: str | Path,
    eval_json: str | None,
    positions: int | None = None,
) -> Path:
    """:func:`export_hf` of a loaded checkpoint, without the warning. ``positions``: a
    sinusoid table of that many rows where the model has fewer (the Argos export's; the
    sinusoids are a fixed function, so the rows the model has are unchanged)."""
    if loaded.model.config.decoder_only:
        raise CheckpointError(f"{checkpoint}: a decoder-only model has no MarianMTModel form")
    check_exportable(loaded.model.config)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    marian = to_marian(loaded.model, loaded.tokenizer)
    mc, search = loaded.model.config, loaded.search
    marian.generation_config = generation_config(mc, marian_rows(mc, loaded.tokenizer)[1])
    if positions is not None and positions > mc.max_positions:
        # Marian saves no sinusoid table: from_pretrained (and so CTranslate2's converter)
        # computes one of max_position_embeddings rows, row p depending on p alone.
        marian.config.max_position_embeddings = positions
    marian.save_pretrained(out)
    write_marian_tokenizer(loaded.tokenizer, loaded.model.config, out)
    card = model_card(checkpoint, mc, search, eval_json, loaded.tokenizer)
    (out / "README.md").write_text(card, "utf-8")
    return out


def write_marian_tokenizer(tokenizer, config: ModelConfig, out: Path) -> None:
    """``MarianTokenizer`` files: the one joint SentencePiece model for both sides, its
    vocabulary and the special tokens (MarianTokenizer appends ``</s>`` to every source, as
    our models read them; see the module docstring for older ones). An imported model writes
    back the files it came with."""
    if isinstance(tokenizer, PairedTokenizer):
        tokenizer.save_marian_files(out)
        pad_id = marian_rows(config, tokenizer)[1]
    else:
        tokenizer.save(out / "source.spm")
        shutil.copy(out / "source.spm", out / "target.spm")
        vocab = {tokenizer.id_to_piece(i): i for i in range(tokenizer.vocab_size)}
        (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        pad_id = config.pad_id
    names = {
        "pad_token": tokenizer.id_to_piece(pad_id),
        "unk_token": tokenizer.id_to_piece(config.unk_id),
        "eos_token": tokenizer.id_to_piece(config.eos_id),
    }
    settings = {
        "tokenizer_class": "MarianTokenizer",
        "source_lang": "en",
        "target_lang": "zh",
        "separate_vocabs": False,
        "model_max_length": 512,
        **names,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
    (out / "special_tokens_map.json").write_text(json.dumps(names, indent=2), encoding="utf-8")


def model_card(
    checkpoint, config: ModelConfig, search, eval_json: str | None, tokenizer: Any = None
) -> str:
    """README.md of an export: what was trained on what, how it scored, how to use it."""
    raw = read_checkpoint(checkpoint)
    data = raw.get("datamodule_hyper_parameters", {})
    steps = raw.get("global_step", "?")
    lines = [
        "# seq2seq English→Chinese Transformer (MarianMTModel export)",
        "",
        f"Exported by `seq2seq export` from `{Path(checkpoint).name}` (step {steps}).",
        "",
        "## Model",
        "",
        "The post-LN encoder–decoder of *Attention Is All You Need* with one embedding shared by",
        "source, target and output, scaled by sqrt(d_model); sinusoidal positions (Marian's",
        "half-sin/half-cos layout: the export permutes the model dimensions exactly).",
        "",
        "| field | value |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in config.to_dict().items()],
        "",
        "## Data",
        "",
        f"Corpus `{data.get('corpus', '?')}`"
        + (f" ({data['path']})" if data.get("path") else "")
        + f", joint SentencePiece vocabulary of {config.vocab_size} pieces.",
        "",
        "## Evaluation",
        "",
    ]
    lines += _evaluation_lines(raw, eval_json)
    lines += [
        "",
        "## Use",
        "",
        "```python",
        "from transformers import MarianMTModel, MarianTokenizer",
        'model = MarianMTModel.from_pretrained("DIR")',
        'tokenizer = MarianTokenizer.from_pretrained("DIR")',
        "```",
        "",
        *_source_note(tokenizer),
        f"Decoding defaults of the original: beam 5, GNMT length penalty {search.length_penalty}.",
        "",
    ]
    return "\n".join(lines)


def _source_note(tokenizer: Any) -> list[str]:
    if isinstance(tokenizer, PairedTokenizer) and tokenizer.target_token:
        return [
            f"Prefix every source with `{tokenizer.target_token} ` (the target-language token)."
        ]
    if tokenizer is None or tokenizer.source_ends_with_eos:
        return [
            "Sources are fed as MarianTokenizer cuts them (ending with `</s>`): greedy",
            "`generate` gives `seq2seq translate --beam-size 1`'s output for a normalised",
            "sentence (pass our length limit as `max_length` where an output reaches it).",
        ]
    return [
        "The model was trained without an eos at the end of the source; MarianTokenizer adds",
        "one, so drop it from `input_ids` for outputs identical to `seq2seq translate`.",
    ]


def _evaluation_lines(raw: dict, eval_json: str | None) -> list[str]:
    if eval_json:
        result = read_eval_json(eval_json)
        return [
            f"sacreBLEU on {result.get('eval_set', '?')} ({result.get('sentences', '?')} "
            f"sentences, beam {result.get('beam_size', '?')}):",
            "",
            f"- BLEU {result['bleu']:.2f} (`{result['bleu_signature']}`)",
            f"- chrF {result['chrf']:.2f} (`{result['chrf_signature']}`)",
        ]
    for state in raw.get("callbacks", {}).values():
        score = state.get("best_model_score") if isinstance(state, dict) else None
        if score is not None:
            return [
                f"Best validation BLEU during training (greedy, dev share): {float(score):.2f}",
                "(tokenizer zh). Run `seq2seq evaluate --json` and export with",
                "`--eval-json` to put test-set BLEU and its signature here.",
            ]
    return ["Not evaluated: export with `--eval-json` (from `seq2seq evaluate --json`)."]


# -- CTranslate2 ----------------------------------------------------------------------------


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


def declare_source_eos(directory: Path, with_eos: bool) -> None:
    """Say in CTranslate2's ``config.json`` whether sources end with ``</s>`` (the converter
    writes false): ``translate_batch`` on ``sp.encode(text, out_type=str)``, as Argos
    Translate and any plain user call it, then reads sources as the model was trained."""
    path = directory / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["add_source_eos"] = bool(with_eos)
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")


def export_ctranslate2(
    checkpoint: str | Path,
    output: str | Path,
    eval_json: str | None = None,
    quantization: str | None = None,
    positions: int | None = None,
    shortlist: str | Path | None = None,
) -> Path:
    """Write a CTranslate2 model directory that ``CTranslate2Engine`` (and
    ``seq2seq translate --engine ctranslate2``) reads; ``positions`` as :func:`write_hf`
    takes it (its settings file keeps the model's own ``max_positions``, where our engine
    cuts sources). ``shortlist``: a ``seq2seq shortlist`` file, checked against the model's
    vocabulary and written as the directory's ``vmap.txt``, CTranslate2's vocabulary map
    (``translate_batch(..., use_vmap=True)``, which ``CTranslate2Engine`` passes when it is
    there)."""

    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        raise ValueError("--format ctranslate2 needs: pip install ctranslate2") from None
    out = Path(output)
    loaded = load_model(checkpoint)
    if shortlist is not None:  # a bad file fails before the conversion
        read_shortlist(shortlist, loaded.tokenizer, loaded.model.config)
    with tempfile.TemporaryDirectory() as tmp:
        # No warning for a model trained without a source eos: CTranslate2Engine feeds it
        # what seq2seq translate feeds ours.
        hf_dir = write_hf(loaded, checkpoint, Path(tmp) / "hf", eval_json, positions)
        convert(hf_dir, out, quantization)
        shutil.copy(hf_dir / "README.md", out / "README.md")
    declare_source_eos(out, loaded.tokenizer.source_ends_with_eos)
    loaded.tokenizer.save(out / SPM_FILE)  # the SentencePiece model, or a PairedTokenizer
    settings = {
        "search": asdict(loaded.search),
        "model_config": loaded.model.config.to_dict(),
        SOURCE_EOS_KEY: loaded.tokenizer.source_ends_with_eos,
    }
    if loaded.truecase is not None:  # the training English's word forms (data.truecase)
        settings["truecase"] = loaded.truecase
    (out / SETTINGS_FILE).write_text(json.dumps(settings, indent=2), encoding="utf-8")
    if shortlist is not None:
        shutil.copyfile(shortlist, out / VMAP_FILE)
    return out
