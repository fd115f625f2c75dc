"""Every shipped config parses against the real classes (unknown keys or wrong types fail)."""

from pathlib import Path

import pytest
import torch
import yaml

from seq2seq.cli import main
from seq2seq.training.callbacks import AtomicCheckpointIO
from seq2seq.training.lightning_cli import run_lightning_cli

CONFIGS = sorted((Path(__file__).parent.parent / "configs").glob("*.yaml"))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_config_prints_complete_yaml(config, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(config), "--print_config"])
    assert exit_info.value.code in (0, None)
    printed = yaml.safe_load(capsys.readouterr().out)
    assert set(printed) >= {"model", "data", "trainer", "checkpoint", "seed_everything"}
    assert printed["model"]["config"]["d_model"] > 0


NEED_A_CHECKPOINT = ("finetune.yaml", "student.yaml", "student_base.yaml")
TRAINING_CONFIGS = [c for c in CONFIGS if c.name not in NEED_A_CHECKPOINT]


@pytest.mark.parametrize("config", TRAINING_CONFIGS, ids=lambda p: p.name)
def test_config_instantiates_with_the_tokenizers_vocabulary(config):
    cli = run_lightning_cli(["--config", str(config)], run=False)
    assert cli.model.config.vocab_size == cli.datamodule.vocab_size
    # The paper's post-LN in every shipped config but the GPT-2 / Llama style ones.
    assert cli.model.config.norm_first is config.name.startswith(("lm_gpt", "lm_llama"))
    # One flag: a decoder-only model gets joined pairs or LM blocks from the data module.
    assert cli.datamodule.decoder_only is cli.model.config.decoder_only
    # Checkpoints are written through the temporary-file-and-rename writer.
    assert isinstance(cli.trainer.strategy.checkpoint_io, AtomicCheckpointIO)


def test_the_finetune_config_takes_the_checkpoints_model_and_tokenizer(tmp_path, corpus):
    from seq2seq.inference.checkpoint import load_model
    from tests.helpers import tiny_checkpoint

    checkpoint = tiny_checkpoint(tmp_path / "base.ckpt")
    config = str(Path(__file__).parent.parent / "configs" / "finetune.yaml")
    cli = run_lightning_cli(
        ["--config", config, f"--model.init_from={checkpoint}", f"--data.path={corpus}"], run=False
    )
    base = load_model(checkpoint)
    assert cli.model.config == base.model.config
    assert cli.datamodule.tokenizer_from == str(checkpoint)
    for name, weight in base.model.state_dict().items():
        assert torch.equal(cli.model.model.state_dict()[name], weight), name
    # A short warmup to a small peak: the fine-tuning rate, far below training's.
    model, warmup = cli.model, cli.config.model.warmup_steps
    peak = model.lr_scale() * (model.config.d_model * warmup) ** -0.5  # the schedule's peak
    assert peak == pytest.approx(model.hparams.peak_lr) and model.hparams.peak_lr < 1e-4


@pytest.mark.parametrize(
    ("name", "layers"), [("student.yaml", (3, 1)), ("student_base.yaml", (6, 2))]
)
def test_a_student_config_takes_its_teachers_width_and_layers(tmp_path, corpus, name, layers):
    from seq2seq.inference.checkpoint import load_model
    from tests.helpers import tiny_checkpoint

    teacher = tiny_checkpoint(tmp_path / "teacher.ckpt")
    distilled = tmp_path / "distilled.tsv"
    distilled.write_text("Hello.\t你好。\n", encoding="utf-8")
    config = str(Path(__file__).parent.parent / "configs" / name)
    options = [f"--model.init_from={teacher}", f"--data.modifiers.distilled={distilled}"]
    cli = run_lightning_cli(["--config", config, *options], run=False)
    base, student = load_model(teacher).model, cli.model.model
    assert student.config.d_model == base.config.d_model  # the teacher's width, not base.yaml's
    assert (student.config.n_encoder_layers, student.config.n_decoder_layers) == layers
    assert torch.equal(student.embedding.weight, base.embedding.weight)
    top = base.decoder.layers[-1].state_dict()
    assert all(torch.equal(student.decoder.layers[-1].state_dict()[k], v) for k, v in top.items())
    assert cli.datamodule.tokenizer_from == str(teacher)
    assert cli.datamodule.modifiers.distilled == str(distilled)


def test_shipped_configs_exist():
    names = {p.name for p in CONFIGS}
    assert {"tiny.yaml", "base.yaml", "big.yaml", "wmt_en_zh.yaml"} <= names
    assert {"lm.yaml", "lm_translate.yaml", "lm_gpt.yaml", "lm_llama.yaml"} <= names


def test_unknown_key_is_rejected(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  config:\n    d_model: 64\n    n_heads: 4\n    colour: blue\n")
    assert main(["fit", "--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "colour" in err and "\n" not in err, err


def test_print_config_with_comments_documents_our_fields(capsys):
    pytest.importorskip("ruamel.yaml")
    config = str(Path(__file__).parent.parent / "configs" / "tiny.yaml")
    with pytest.raises(SystemExit):
        main(["fit", "--config", config, "--print_config=comments"])
    lines = capsys.readouterr().out.splitlines()
    for field, words in (
        ("d_model", "width of every residual stream"),
        ("max_tokens", "Padded-token budget"),
        ("warmup_steps", "warmup"),
    ):
        index = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{field}:"))
        assert lines[index - 1].strip().startswith("#") and words in lines[index - 1]


def test_the_terms_overlay_adds_term_annotation_to_a_config(capsys):
    configs = Path(__file__).parent.parent / "configs"
    with pytest.raises(SystemExit):
        main(
            [
                "fit",
                "--config",
                str(configs / "tiny.yaml"),
                "--config",
                str(configs / "modifiers" / "terms.yaml"),
                "--print_config",
            ]
        )
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["data"]["modifiers"]["terms"] == 0.8
    assert printed["data"]["modifiers"]["unrelated_terms"] == 0.5
    assert printed["trainer"]["max_steps"] == 2 * 1040  # copying is learnt with training
    assert printed["data"]["modifiers"]["no_end_punctuation"] == 0.1  # tiny.yaml's, repeated
    assert printed["checkpoint"]["dirpath"] == "runs/terms/checkpoints"
    assert printed["model"]["config"]["d_model"] == 256  # the rest is tiny.yaml's
