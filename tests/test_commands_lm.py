"""Decoder-only mode end to end through the real commands: the shipped LM configs train on a
small local text file and generate; a decoder-only translation model trains on joined pairs and
is scored by the same translate/evaluate commands as an encoder-decoder one."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
import torch

from seq2seq import ModelConfig, Transformer
from seq2seq.cli import main
from seq2seq.inference.generation import Generator
from tests.helpers import RUN_OUTPUTS, synthetic_pairs

pytestmark = pytest.mark.slow
CONFIGS = Path(__file__).parent.parent / "configs"

# Shrinks a shipped config to seconds on a CPU; the style fields (norm, positions, activation,
# bias, norm_first) and the decoder-only flag still come from the shipped file.
SMALL = (
    """
model:
  config:
    d_model: 32
    n_heads: 2
    n_decoder_layers: 2
    d_ff: 64
    max_positions: {positions}
  warmup_steps: 10
  cooldown_steps: 0
data:
  corpus: {kind}
  path: {corpus}
  vocab_size: {vocab}
  max_tokens: {max_tokens}
  block_size: 16
  max_len: 40
  cache_dir: {root}/cache
trainer:
  max_steps: 20
  max_time: null
  val_check_interval: 10
  limit_val_batches: 2
  log_every_n_steps: 5
  enable_progress_bar: false
  enable_model_summary: false
"""
    + RUN_OUTPUTS
)


def fit_small(shipped: str, root: Path, corpus: Path, kind: str, **sizes) -> Path:
    values = {"vocab": 376, "max_tokens": 17 * 8, "positions": 96, **sizes}
    small = root / "small.yaml"
    small.write_text(SMALL.format(kind=kind, corpus=corpus, root=root, **values))
    assert main(["fit", "--config", str(CONFIGS / shipped), "--config", str(small)]) == 0
    return root / "checkpoints" / "last.ckpt"


@pytest.fixture(scope="module")
def chinese_text(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("text") / "zh.txt"
    path.write_text("".join(zh + "\n" for _, zh in synthetic_pairs()), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def lm(tmp_path_factory, chinese_text) -> Path:
    root = tmp_path_factory.mktemp("lm")
    return fit_small("lm.yaml", root, chinese_text, "text")


def test_lm_training_logs_validation_perplexity(lm):
    (path,) = lm.parent.parent.glob("logs/version_*/metrics.csv")
    rows = [r for r in csv.DictReader(path.open()) if r.get("val_ppl")]
    assert len(rows) == 2  # steps 10 and 20
    for row in rows:
        assert math.isclose(float(row["val_ppl"]), math.exp(float(row["val_nll"])), rel_tol=1e-4)
    assert float(rows[-1]["val_nll"]) < float(rows[0]["val_nll"])
    assert float(rows[-1]["val_ppl"]) < 376  # better than uniform over the vocabulary


def test_generate_streams_one_prompt_and_a_seed_repeats_it(lm, capsys):
    args = ["generate", "--checkpoint", str(lm), "--prompt", "我们", "--max-new-tokens", "8"]
    assert main([*args, "--seed", "5"]) == 0
    first = capsys.readouterr().out
    assert first.startswith("我们") and first.endswith("\n") and first.count("\n") == 1
    assert main([*args, "--seed", "5"]) == 0
    assert capsys.readouterr().out == first
    assert main([*args, "--greedy"]) == 0
    greedy = capsys.readouterr().out
    assert main([*args, "--temperature", "0.00001", "--seed", "9"]) == 0
    assert capsys.readouterr().out == greedy


def test_generate_takes_the_repetition_guards_options(lm, capsys):
    """generate --max-repeats N gives what the Python API gives with the same setting."""
    from dataclasses import replace

    args = ["generate", "--checkpoint", str(lm), "--prompt", "我们", "--max-new-tokens", "24"]
    outputs = {}
    for repeats in (0, 1):
        assert main([*args, "--greedy", "--max-repeats", str(repeats)]) == 0
        outputs[repeats] = capsys.readouterr().out.rstrip("\n")
        generator = Generator.from_checkpoint(lm)
        generator.search = replace(generator.search, max_repeats=repeats)
        assert generator.generate(["我们"], max_new_tokens=24, sampling=_greedy()) == [
            outputs[repeats]
        ]


def test_generate_keeps_one_line_per_prompt_whatever_it_holds(lm, tmp_path, capsys):
    prompts = ["我们", "", "   ", "他\r", "汤姆" * 10000, "\x07控制", "emoji 🙂", "明天"]
    raw = ("\n".join(prompts) + "\n").encode() + b"\xff\xfe bad bytes\n"
    source = tmp_path / "prompts.txt"
    source.write_bytes(raw)
    out = tmp_path / "out.txt"
    assert (
        main(
            [
                "generate",
                "--checkpoint",
                str(lm),
                "--input",
                str(source),
                "--output",
                str(out),
                "--max-new-tokens",
                "5",
                "--greedy",
            ]
        )
        == 0
    )
    lines = out.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(lines) == len(prompts) + 1
    assert lines[0].startswith("我们") and lines[-2].startswith("明天")
    warnings = [w for w in capsys.readouterr().err.splitlines() if "kept the last" in w]
    assert len(warnings) == 1 and warnings[0].endswith("line 5")  # the 20,000 characters
    # Batched outputs equal one prompt at a time (left padding does not leak).
    generator = Generator.from_checkpoint(lm)
    options = {"max_new_tokens": 5, "sampling": _greedy()}
    assert generator.generate(["我们", "明天"], **options) == [
        generator.generate([p], **options)[0] for p in ("我们", "明天")
    ]


def _greedy():
    from seq2seq.decoding.sampling import SamplingConfig

    return SamplingConfig(temperature=0.0)


def test_commands_refuse_the_wrong_kind_of_checkpoint_in_one_line(lm, tmp_path, capsys):
    assert main(["translate", "--checkpoint", str(lm)]) == 2
    err = capsys.readouterr().err
    assert "a language model, not a translation model" in err and err.count("\n") == 1
    checkpoint = torch.load(lm, weights_only=False)
    checkpoint["seq2seq"]["model_config"]["decoder_only"] = False
    mismatched = tmp_path / "mismatched.ckpt"
    torch.save(checkpoint, mismatched)
    assert main(["generate", "--checkpoint", str(mismatched), "--prompt", "x"]) == 2
    assert "weights do not fit the model config" in capsys.readouterr().err
    # A real encoder-decoder checkpoint (weights that fit) cannot generate.
    config = ModelConfig.from_dict(checkpoint["seq2seq"]["model_config"])
    weights = Transformer(config).state_dict()
    checkpoint["state_dict"] = {f"model.{k}": v for k, v in weights.items()}
    encoder_decoder = tmp_path / "encdec.ckpt"
    torch.save(checkpoint, encoder_decoder)
    assert main(["generate", "--checkpoint", str(encoder_decoder), "--prompt", "x"]) == 2
    assert "cannot continue a prompt" in capsys.readouterr().err
    for bad in (["--temperature", "-1"], ["--top-p", "0"], ["--beam-size", "0"]):
        assert main(["generate", "--checkpoint", str(lm), "--prompt", "x", *bad]) == 2
        assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("shipped", ["lm_gpt.yaml", "lm_llama.yaml"])
def test_gpt_and_llama_configs_train_and_generate_with_the_cache(
    shipped, tmp_path, chinese_text, capsys
):
    checkpoint = fit_small(shipped, tmp_path, chinese_text, "text")
    generator = Generator.from_checkpoint(checkpoint)
    config = generator.model.config
    if shipped == "lm_llama.yaml":
        assert (config.norm, config.positions, config.activation, config.bias) == (
            "rmsnorm",
            "rope",
            "swiglu",
            False,
        )
    else:
        assert (config.norm_first, config.positions, config.activation) == (True, "learned", "gelu")
    assert (
        main(
            [
                "generate",
                "--checkpoint",
                str(checkpoint),
                "--prompt",
                "我",
                "--beam-size",
                "3",
                "--max-new-tokens",
                "6",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.startswith("我")


def test_a_decoder_only_translator_is_scored_by_the_same_commands(tmp_path, capsys):
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text("".join(f"{en}\t{zh}\n" for en, zh in synthetic_pairs()), "utf-8")
    checkpoint = fit_small("lm_translate.yaml", tmp_path, corpus, "tsv", vocab=556, max_tokens=800)
    (path,) = tmp_path.glob("logs/version_*/metrics.csv")
    assert [r["val_bleu"] for r in csv.DictReader(path.open()) if r.get("val_bleu")]
    source = tmp_path / "in.en"
    source.write_text("Tom will buy apples today.\n\nI can see the book.\n", encoding="utf-8")
    out = tmp_path / "out.zh"
    for beam in ("1", "3"):
        assert (
            main(
                [
                    "translate",
                    "--checkpoint",
                    str(checkpoint),
                    "--input",
                    str(source),
                    "--output",
                    str(out),
                    "--beam-size",
                    beam,
                ]
            )
            == 0
        )
        lines = out.read_text(encoding="utf-8").split("\n")[:-1]
        assert len(lines) == 3 and lines[1] == "" and lines[0]
    assert main(["evaluate", "--checkpoint", str(checkpoint), "--json", "--beam-size", "2"]) == 0
    assert '"bleu"' in capsys.readouterr().out


def test_attention_of_a_language_model_is_its_self_attention(lm, tmp_path):
    image_module = pytest.importorskip("PIL.Image")
    out = tmp_path / "lm_attention.png"
    assert (
        main(
            [
                "attention",
                "--checkpoint",
                str(lm),
                "--text",
                "我们",
                "--max-new-tokens",
                "4",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    with image_module.open(out) as image:
        assert image.format == "PNG" and image.width > image.height  # two layers side by side


def test_sequences_longer_than_the_positions_are_a_one_line_error(tmp_path, capsys):
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text("".join(f"{en}\t{zh}\n" for en, zh in synthetic_pairs()), "utf-8")
    with pytest.raises(AssertionError):  # fit_small expects success
        fit_small(
            "lm_translate.yaml", tmp_path, corpus, "tsv", vocab=556, max_tokens=800, positions=64
        )
    err = capsys.readouterr().err
    assert "make 82-token sequences but model.config.max_positions is 64" in err
