import pytest

from seq2seq import ConfigError, ModelConfig


def test_defaults_are_the_paper_base_model():
    config = ModelConfig()
    assert (config.d_model, config.n_heads, config.d_ff) == (512, 8, 2048)
    assert (config.n_encoder_layers, config.n_decoder_layers) == (6, 6)
    assert config.dropout == 0.1 and config.activation == "relu"
    assert config.norm_first is False and config.decoder_only is False
    assert config.head_dim == 64


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"d_model": 30, "n_heads": 4}, "divisible"),
        ({"activation": "tanh"}, "activation"),
        ({"dropout": 1.5}, "dropout"),
        ({"vocab_size": 0}, "vocab_size"),
        ({"pad_id": 3}, "distinct"),
        ({"unk_id": 2}, "distinct"),
        ({"unk_id": -1}, "unk_id"),
        ({"eos_id": 9000}, "eos_id"),
        ({"n_encoder_layers": 0}, "n_encoder_layers"),
    ],
)
def test_invalid_config_names_the_problem(overrides, field):
    with pytest.raises(ConfigError, match=field):
        ModelConfig(**overrides)


def test_decoder_only_needs_no_encoder_layers():
    assert ModelConfig(decoder_only=True, n_encoder_layers=0).decoder_only


def test_from_dict_round_trip_and_rejects_unknown_or_mistyped_keys():
    config = ModelConfig(vocab_size=100, d_model=64, n_heads=4)
    assert ModelConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ConfigError, match="unknown ModelConfig key.*d_modle"):
        ModelConfig.from_dict({"d_modle": 64})
    with pytest.raises(ConfigError, match="d_model must be int"):
        ModelConfig.from_dict({"d_model": "512"})
    assert ModelConfig.from_dict({"dropout": 0}).dropout == 0


def test_a_config_saved_before_unk_id_existed_loads_with_the_tokenizers_unk():
    saved = ModelConfig(vocab_size=100, d_model=64, n_heads=4).to_dict()
    del saved["unk_id"]
    assert ModelConfig.from_dict(saved).unk_id == 1
