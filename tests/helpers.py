"""Small builders shared by the tests."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest
import torch

from seq2seq import ModelConfig, Transformer
from seq2seq.cli import main
from seq2seq.errors import DataError


def tiny_config(**overrides) -> ModelConfig:
    """A model small enough to run hundreds of times per second on a CPU."""
    values = dict(
        vocab_size=40,
        d_model=32,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        d_ff=64,
        dropout=0.0,
        max_positions=128,
    )
    values.update(overrides)
    return ModelConfig(**values)


def tiny_model(seed: int = 0, **overrides) -> Transformer:
    """A tiny Transformer in eval mode, float64 so equality tests can be tight."""
    torch.manual_seed(seed)
    return Transformer(tiny_config(**overrides)).double().eval()


# The decoder styles beside the paper's post-LN one, as the shipped LM configs set them.
GPT = {"norm_first": True, "activation": "gelu", "positions": "learned"}
LLAMA = {
    "norm_first": True,
    "norm": "rmsnorm",
    "positions": "rope",
    "activation": "swiglu",
    "bias": False,
}
STYLES = {"paper": {}, "gpt": GPT, "llama": LLAMA}


def random_ids(batch: int, length: int, vocab: int = 40, seed: int = 1) -> torch.Tensor:
    """Ids of ordinary tokens (>= 4: never pad, unk, bos or eos)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(4, vocab, (batch, length), generator=generator)


SUBJECTS = [
    ("I", "我"),
    ("You", "你"),
    ("He", "他"),
    ("She", "她"),
    ("We", "我们"),
    ("They", "他们"),
    ("Tom", "汤姆"),
    ("My teacher", "我的老师"),
]
VERBS = [
    ("will buy", "会买"),
    ("can see", "能看见"),
    ("should eat", "应该吃"),
    ("will cook", "会做"),
    ("can find", "能找到"),
]
OBJECTS = [
    ("apples", "苹果"),
    ("the book", "那本书"),
    ("a new car", "一辆新车"),
    ("rice", "米饭"),
    ("tea", "茶"),
    ("the red bag", "那个红色的包"),
    ("some fish", "一些鱼"),
    ("the small dog", "那只小狗"),
]
TIMES = [("today", "今天"), ("tomorrow", "明天"), ("at home", "在家")]


def synthetic_pairs():
    """960 distinct, real-looking pairs; the Chinese has traditional duplicates to clean."""
    pairs = []
    for (s_en, s_zh), (v_en, v_zh), (o_en, o_zh), (t_en, t_zh) in itertools.product(
        SUBJECTS, VERBS, OBJECTS, TIMES
    ):
        pairs.append((f"{s_en} {v_en} {o_en} {t_en}.", f"{s_zh}{t_zh}{v_zh}{o_zh}。"))
    pairs.append(("I will buy apples today.", "我今天會買蘋果。"))  # duplicate after t2s
    return pairs


def tiny_checkpoint(
    path,
    seed: int = 0,
    saved_before_unk_id: bool = False,
    lm: bool = False,
    joined: bool = False,
    source_ends_with_eos: bool | None = None,
    terms: bool = False,
):
    """An untrained translation checkpoint laid out as ``seq2seq fit`` writes one: a
    SentencePiece model of the synthetic pairs and a tiny model of its vocabulary (seconds).
    ``saved_before_unk_id``: laid out as older versions wrote it: no ``unk_id`` or ``sep_id``
    in its model config, and the other special ids kept with the search settings.
    ``lm``: a decoder-only language model instead (task "lm"); ``joined``: a decoder-only
    translator ([bos] source [sep] target [eos], as configs/lm_translate.yaml trains one).
    ``source_ends_with_eos``: recorded in the section; None leaves the key out, as checkpoints
    written before it did (their models read sources without an eos). ``terms``: a vocabulary
    with the term annotation's tags (``seq2seq.data.terms``), as a term-trained model has."""
    from dataclasses import asdict

    from seq2seq.data.tokenizer import SEP, SOURCE_EOS_KEY, Tokenizer
    from seq2seq.decoding.search import SearchConfig
    from seq2seq.inference.checkpoint import CHECKPOINT_KEY

    texts = [text for pair in synthetic_pairs() for text in pair]
    # 150 + the 256 byte pieces
    from seq2seq.data.terms import TERM_TAGS

    symbols = ((SEP,) if joined else ()) + (TERM_TAGS if terms else ())
    tokenizer = Tokenizer.train(texts, 406 + len(TERM_TAGS) * terms, user_symbols=symbols)
    torch.manual_seed(seed)
    overrides = {"decoder_only": True, "n_encoder_layers": 0} if lm or joined else {}
    if joined:
        overrides["sep_id"] = tokenizer.sep_id
    model = Transformer(tiny_config(vocab_size=tokenizer.vocab_size, **overrides))
    model_config, search = model.config.to_dict(), asdict(SearchConfig())
    if saved_before_unk_id:
        del model_config["unk_id"], model_config["sep_id"]
        search.update(bos_id=2, eos_id=3, pad_id=0, sep_id=None)
    section = {
        "model_config": model_config,
        "tokenizer": tokenizer.to_bytes(),
        "search": search,
        "task": "lm" if lm else "translation",
    }
    if source_ends_with_eos is not None:
        section[SOURCE_EOS_KEY] = source_ends_with_eos
    weights = {f"model.{name}": w for name, w in model.state_dict().items()}
    torch.save({"state_dict": weights, CHECKPOINT_KEY: section}, path)
    return path


# -- end to end: a small ``seq2seq fit`` run (conftest's ``run``) -----------------------------

# The trainer's log and the checkpoints of a config's run, under its {root}: the end of a
# YAML config, after its trainer's other settings.
RUN_OUTPUTS = """\
  logger:
    class_path: lightning.pytorch.loggers.CSVLogger
    init_args:
      save_dir: {root}
      name: logs
checkpoint:
  dirpath: {root}/checkpoints
"""

CONFIG = (
    """
seed_everything: 3
model:
  config:
    d_model: 32
    n_heads: 2
    n_encoder_layers: 1
    n_decoder_layers: 1
    d_ff: 64
    dropout: 0.0
    max_positions: 64
  warmup_steps: 10
  lr_scale: 0.5
  val_bleu_sentences: 20
data:
  corpus: tsv
  path: {corpus}
  vocab_size: 556  # 300 before byte fallback took 256 ids
  max_tokens: 400
  max_len: 40
  cache_dir: {root}/cache
trainer:
  accelerator: cpu
  devices: 1
  max_steps: {max_steps}
  val_check_interval: 10
  check_val_every_n_epoch: null
  num_sanity_val_steps: 0
  limit_val_batches: 2
  log_every_n_steps: 5
  enable_progress_bar: false
  enable_model_summary: false
  callbacks:
    - class_path: lightning.pytorch.callbacks.ModelCheckpoint
      init_args:
        dirpath: {root}/checkpoints
        filename: "step{{step:05d}}"
        every_n_train_steps: 10
        save_top_k: -1
        auto_insert_metric_name: false
"""
    + RUN_OUTPUTS
)


def write_config(root: Path, corpus: Path, max_steps: int) -> str:
    config = root / f"config{max_steps}.yaml"
    config.write_text(CONFIG.format(corpus=corpus, root=root, max_steps=max_steps))
    return str(config)


def quiet_trainer(**settings):
    """A CPU Lightning Trainer that writes nothing (no logger, checkpoints, bar or summary)."""
    import lightning as L

    return L.Trainer(
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **settings,
    )


def checkpoint_command(command: str, checkpoint: str | Path, *options: object) -> list[str]:
    """``seq2seq COMMAND --checkpoint CHECKPOINT OPTIONS...``'s arguments, as strings."""
    return [command, "--checkpoint", str(checkpoint), *map(str, options)]


def fit_process(config: str | Path, *options: str) -> list[str]:
    """``python -m seq2seq fit --config CONFIG OPTIONS...``: a fit in a process of its own."""
    return [sys.executable, "-m", "seq2seq", "fit", "--config", str(config), *options]


def fit(root: Path, corpus: Path, max_steps: int, *extra: str) -> None:
    assert main(["fit", "--config", write_config(root, corpus, max_steps), *extra]) == 0


def without_byte_rule(translator):  # noqa: ANN001, ANN201 (a Translator)
    """``translator`` with no UTF-8 rule for byte pieces (``seq2seq.decoding.utf8``): to
    compare with an engine that has none (generate(), CTranslate2 as it writes) on an untrained
    model, which writes broken byte pieces freely."""
    from dataclasses import replace

    engine = translator.engine
    if hasattr(engine, "rules"):
        engine.rules = replace(engine.rules, bytes=())
    if hasattr(engine, "byte_ids"):
        engine.byte_ids = ()
    return translator


def cli_translate(checkpoint: Path, source: Path, output: Path, *options: str) -> int:
    """``seq2seq translate --checkpoint C --input S --output O [options]`` run in this
    process, as a user types it: its exit status."""
    from seq2seq.cli import main

    command = ["translate", "--checkpoint", str(checkpoint), "--input", str(source)]
    return main([*command, "--output", str(output), *options])


def translate_file(http, name: str, data: bytes):  # noqa: ANN001, ANN201 (httpx client, answer)
    """``data`` uploaded as ``name`` to LibreTranslate's ``/translate_file`` (en to zh): the
    answer, and the translated file fetched from the URL it gives (None when refused)."""
    import httpx

    upload = {"file": (name, data, "application/octet-stream")}
    answer = http.post("/translate_file", data={"source": "en", "target": "zh"}, files=upload)
    if answer.status_code != 200:
        return answer, None
    return answer, httpx.get(answer.json()["translatedFileUrl"], timeout=60)


def write_hsk_tsv(path: Path, limit: int | None = None) -> Path:
    """The HSK sentence pairs (a bundled corpus's real pairs) as a TSV corpus at ``path``."""
    from seq2seq.data.sources import _load_hsk

    pairs = _load_hsk()[:limit]
    path.write_text("".join(f"{en}\t{zh}\n" for en, zh in pairs), encoding="utf-8")
    return path


def prepared_pairs(
    tsv, cache_dir, modifiers=None, num_proc: int = 1, seed: int = 1, vocab_size: int = 3000
):  # noqa: ANN001, ANN201 (a TranslationDataModule)
    """A small translation data module of a TSV corpus, prepared into ``cache_dir`` and set up."""
    from seq2seq.data.datamodule import TranslationDataModule

    dm = TranslationDataModule(
        corpus="tsv",
        path=str(tsv),
        cache_dir=str(cache_dir),
        vocab_size=vocab_size,
        max_len=64,
        max_tokens=512,
        num_proc=num_proc,
        seed=seed,
        modifiers=modifiers,
    )
    dm.setup()
    return dm


def file_error(path: Path, text: str, read) -> str:  # noqa: ANN001 (a reader of path)
    """``text`` written to ``path`` and ``read(path)``: the one-line ``DataError`` it raises."""
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as error:
        read(path)
    assert "\n" not in str(error.value)
    return str(error.value)
