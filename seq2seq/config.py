"""The one source of truth for a model's shape: a typed, validated dataclass."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from seq2seq.errors import ConfigError

ACTIVATIONS = ("relu", "gelu", "swish", "swiglu")
NORMS = ("layernorm", "rmsnorm")
POSITIONS = ("sinusoidal", "learned", "rope")


@dataclass
class ModelConfig:
    """Hyper-parameters of the Transformer. Defaults are the paper's base model (Table 3).

    Attributes:
        vocab_size: size of the ONE vocabulary shared by source and target (tied embedding).
        d_model: width of every residual stream (paper: 512 base, 1024 big).
        n_heads: attention heads; ``d_model`` must be divisible by it.
        n_encoder_layers: encoder depth N (ignored when ``decoder_only``).
        n_decoder_layers: decoder depth N.
        d_ff: inner width of the position-wise feed-forward network.
        dropout: residual and embedding dropout P_drop (paper: 0.1 base, 0.3 big en-fr).
        attention_dropout: dropout on attention weights; 0 as in the paper.
        activation_dropout: dropout on the feed-forward hidden layer; 0 as in the paper, which
            drops out only sub-layer outputs and the embedding sums (§5.4).
        activation: feed-forward non-linearity: ``relu`` (paper), ``gelu`` (GPT-2),
            ``swish`` (SiLU, ``x * sigmoid(x)``: OPUS-MT/Marian models) or ``swiglu`` (Llama:
            ``W2(silu(x W1) * x W3)``, a third d_model x d_ff matrix).
        norm: ``layernorm`` (paper) or ``rmsnorm`` (Llama: rescale by the root mean square, no
            centring, no bias).
        positions: ``sinusoidal`` (paper, fixed), ``learned`` (GPT-2, a trained table) or
            ``rope`` (rotary: queries and keys of self-attention are rotated by their position,
            so attention scores depend on relative position; nothing is added to the input).
        bias: biases in every linear layer and LayerNorm (paper); False as in Llama.
        output_bias: a bias vector added to the tied pre-softmax projection (Marian's
            ``final_logits_bias``); False as in the paper. Imported OPUS-MT models set it.
        max_positions: longest sequence the position table covers.
        pad_id: padding token; never attended to as a key, never predicted.
        unk_id: the unknown piece SentencePiece gives text outside the vocabulary; never
            predicted (an output "<unk>" is no translation). Checkpoints written before the
            field existed load with the default, the id our tokenizer fixes.
        bos_id: begin-of-sequence token fed as the first decoder input.
        eos_id: end-of-sequence token that finishes a hypothesis.
        sep_id: the token between source and target of a decoder-only translation model,
            which reads ``[bos] source [sep]`` and continues with the target (None for other
            models). Set from the tokenizer's ``<sep>`` piece when training starts.

    These ids are the one source of truth for special tokens: the checkpoint stores them here,
    and the searches, the exports and the data layer's batches receive them from it.
        decoder_only: build a causal language model: no encoder, no cross-attention.
        norm_first: False is the paper's post-LN ``LayerNorm(x + Sublayer(x))``; True is the
            pre-LN variant ``x + Sublayer(LayerNorm(x))`` with a final LayerNorm per stack,
            which trains more stably for deep stacks and language models.
    """

    vocab_size: int = 8000
    d_model: int = 512
    n_heads: int = 8
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    activation: str = "relu"
    norm: str = "layernorm"
    positions: str = "sinusoidal"
    bias: bool = True
    output_bias: bool = False
    max_positions: int = 1024
    pad_id: int = 0
    unk_id: int = 1
    bos_id: int = 2
    eos_id: int = 3
    sep_id: int | None = None
    decoder_only: bool = False
    norm_first: bool = False

    def __post_init__(self) -> None:
        self.validate()

    @property
    def head_dim(self) -> int:
        """Width d_k = d_v of one attention head."""
        return self.d_model // self.n_heads

    def validate(self) -> None:
        """Raise ConfigError with a one-line message for the first invalid field."""
        for name in ("vocab_size", "d_model", "n_heads", "d_ff", "max_positions"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"ModelConfig.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("n_encoder_layers", "n_decoder_layers"):
            if int(getattr(self, name)) < 0:
                raise ConfigError(f"ModelConfig.{name} must be >= 0, got {getattr(self, name)}")
        if self.n_decoder_layers < 1:
            raise ConfigError("ModelConfig.n_decoder_layers must be >= 1")
        if not self.decoder_only and self.n_encoder_layers < 1:
            raise ConfigError("ModelConfig.n_encoder_layers must be >= 1 unless decoder_only")
        if self.d_model % self.n_heads:
            raise ConfigError(
                f"ModelConfig.d_model ({self.d_model}) must be divisible by "
                f"n_heads ({self.n_heads})"
            )
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                value = getattr(self, name)
                raise ConfigError(f"ModelConfig.{name} must be in [0, 1), got {value}")
        for name, choices in (
            ("activation", ACTIVATIONS),
            ("norm", NORMS),
            ("positions", POSITIONS),
        ):
            if getattr(self, name) not in choices:
                raise ConfigError(
                    f"ModelConfig.{name} must be one of {choices}, got {getattr(self, name)!r}"
                )
        if self.positions == "rope" and self.head_dim % 2:
            raise ConfigError(f"rotary positions need an even head width, got {self.head_dim}")
        for name in ("pad_id", "unk_id", "bos_id", "eos_id", "sep_id"):
            token_id = getattr(self, name)
            if token_id is not None and not 0 <= token_id < self.vocab_size:
                raise ConfigError(
                    f"ModelConfig.{name} ({token_id}) is outside the vocabulary "
                    f"[0, {self.vocab_size})"
                )
        specials = [self.pad_id, self.unk_id, self.bos_id, self.eos_id, self.sep_id]
        if len(set(specials) - {None}) != len(specials) - specials.count(None):
            raise ConfigError(
                "ModelConfig's special token ids (pad, unk, bos, eos, sep) must be distinct"
            )

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for checkpoints and YAML."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ModelConfig:
        """Build from a dict, rejecting unknown keys and wrongly typed values by name."""
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ConfigError(f"unknown ModelConfig key(s): {', '.join(unknown)}")
        for key, value in values.items():
            default = known[key].default
            if default is None and value is None:
                continue
            expected = int if key == "sep_id" else type(default)
            ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                ok = True
            if not ok:
                raise ConfigError(
                    f"ModelConfig.{key} must be {expected.__name__}, got {type(value).__name__} "
                    f"{value!r}"
                )
        return cls(**values)


def paper_parameter_count(config: ModelConfig) -> int:
    """Parameters of a tied Transformer with the paper's layer, counted from its structure.

    With d = d_model, f = d_ff, V = vocab_size (one embedding matrix, shared by the encoder,
    the decoder and the output projection; sinusoidal positions have no parameters):

        attention     = 4 (d^2 + d)              W_Q, W_K, W_V, W_O with biases
        feed-forward  = 2 d f + f + d            W_1, W_2 with biases
        LayerNorm     = 2 d                      gain and bias
        encoder layer = attention + feed-forward + 2 LayerNorm
        decoder layer = 2 attention + feed-forward + 3 LayerNorm   (self + cross-attention)
        total         = V d + N_enc encoder layer + N_dec decoder layer

    A decoder-only model's layers have no cross-attention (one attention, two LayerNorms) and
    no encoder; pre-LN (``norm_first``) adds one final LayerNorm per stack. Table 3 of the
    paper: 65M (base) and 213M (big) with a 37k vocabulary. Only for the paper's layer:
    relu or gelu, biases, LayerNorm and sinusoidal positions.
    """
    paper_layer = (
        config.activation in ("relu", "gelu")
        and config.bias
        and config.norm == "layernorm"
        and config.positions == "sinusoidal"
    )
    if not paper_layer:
        raise ValueError(
            "paper_parameter_count counts the paper's layer only (relu/gelu, "
            "biases, LayerNorm, sinusoidal positions)"
        )
    d, f = config.d_model, config.d_ff
    attention = 4 * (d * d + d)
    feed_forward = 2 * d * f + f + d
    layer_norm = 2 * d
    n_encoder = 0 if config.decoder_only else config.n_encoder_layers
    encoder_layer = attention + feed_forward + 2 * layer_norm
    if config.decoder_only:
        decoder_layer = attention + feed_forward + 2 * layer_norm
    else:
        decoder_layer = 2 * attention + feed_forward + 3 * layer_norm
    final_norms = (int(n_encoder > 0) + 1) * layer_norm if config.norm_first else 0
    return (
        config.vocab_size * d
        + n_encoder * encoder_layer
        + config.n_decoder_layers * decoder_layer
        + final_norms
    )
