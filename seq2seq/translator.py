"""Inference from a self-contained checkpoint: load, batch by tokens, translate, keep order."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import torch

from seq2seq.config import ConfigError, ModelConfig
from seq2seq.model import Transformer
from seq2seq.packing import pack_for_cpu_inference
from seq2seq.search import SearchConfig, translate_ids

CHECKPOINT_KEY = "seq2seq"  # our section of a Lightning checkpoint: config + tokenizer


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, unreadable or not one of ours."""


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a Lightning checkpoint on the CPU, with one-line errors for the usual problems."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found")
    try:
        # Our checkpoints hold plain Python config objects, so weights_only loading is off.
        checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as error:  # truncated zip, not a torch file, ...
        raise CheckpointError(f"{path}: cannot read checkpoint ({error})") from None
    if not isinstance(checkpoint, dict) or CHECKPOINT_KEY not in checkpoint:
        raise CheckpointError(f"{path}: not a seq2seq checkpoint (no '{CHECKPOINT_KEY}' section)")
    return checkpoint


@dataclass
class LoadedModel:
    """What a checkpoint holds: the model (eval mode), its tokenizer, decoding defaults, and
    the task it was trained for (``translation`` or ``lm``)."""

    model: Transformer
    tokenizer: Any
    search: SearchConfig
    task: str


def load_model(path: str | Path, device: str = "cpu") -> LoadedModel:
    """Model, tokenizer and search settings of a ``.ckpt`` written by ``seq2seq fit``."""
    from seq2seq.data.tokenizer import Tokenizer

    checkpoint = read_checkpoint(path)
    section = checkpoint[CHECKPOINT_KEY]
    try:
        config = ModelConfig.from_dict(section["model_config"])
    except (ConfigError, KeyError, TypeError) as error:
        raise CheckpointError(f"{path}: bad model config ({error})") from None
    if section.get("tokenizer") is None:
        raise CheckpointError(f"{path}: checkpoint holds no SentencePiece model")
    tokenizer = Tokenizer.from_bytes(section["tokenizer"])
    if tokenizer.vocab_size != config.vocab_size:
        raise CheckpointError(
            f"{path}: vocab_size {config.vocab_size} disagrees with the SentencePiece "
            f"model ({tokenizer.vocab_size} pieces)"
        )
    model = Transformer(config)
    try:
        model.load_state_dict(model_state_dict(checkpoint))
    except RuntimeError as error:  # the weights of another shape of model
        first = str(error).splitlines()[1].strip() if "\n" in str(error) else str(error)
        raise CheckpointError(
            f"{path}: weights do not fit the model config ({first[:200]})"
        ) from None
    known = {f.name for f in fields(SearchConfig)}
    search = SearchConfig(**{k: v for k, v in section.get("search", {}).items() if k in known})
    task = section.get("task", "translation")
    return LoadedModel(model.to(device).eval(), tokenizer, search, task)


def model_state_dict(checkpoint: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The Transformer's weights from a LightningModule state dict (drops the 'model.' prefix)."""
    prefix = "model."
    return {
        k[len(prefix) :]: v for k, v in checkpoint["state_dict"].items() if k.startswith(prefix)
    }


class Translator:
    """A trained model plus its tokenizer and decoding defaults.

    Example:
        >>> translator = Translator.from_checkpoint("runs/demo/checkpoints/last.ckpt")
        >>> translator.translate(["I love you."], beam_size=5)
        ['我爱你。']
    """

    def __init__(self, model: Transformer, tokenizer, search: SearchConfig) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.search = search
        self._split_batches = 0  # batches split after running out of memory, per call

    @classmethod
    def from_checkpoint(cls, path: str | Path, device: str = "cpu") -> Translator:
        """Build everything from a ``.ckpt`` written by ``seq2seq fit``: an encoder-decoder
        model, or a decoder-only one trained on joined pairs (``configs/lm_translate.yaml``).
        On the CPU in float32 its weights are packed for inference (``seq2seq.packing``)."""
        loaded = load_model(path, device)
        if loaded.task == "lm" or (
            loaded.model.config.decoder_only and loaded.search.sep_id is None
        ):
            raise CheckpointError(
                f"{path}: a language model, not a translation model; use 'seq2seq generate'"
            )
        return cls(pack_for_cpu_inference(loaded.model), loaded.tokenizer, loaded.search)

    def with_search(self, **overrides: Any) -> Translator:
        """A translator sharing this model, with some search settings changed (None = keep)."""
        changes = {k: v for k, v in overrides.items() if v is not None}
        return Translator(self.model, self.tokenizer, replace(self.search, **changes))

    def translate(
        self,
        lines: Sequence[str],
        beam_size: int = 5,
        max_tokens: int = 4000,
        on_batch: Callable[[int], None] | None = None,
    ) -> list[str]:
        """Translate ``lines``: exactly one output string (without newlines) per input line.

        Args:
            lines: English sentences; empty lines give empty outputs.
            beam_size: 1 = greedy search.
            max_tokens: padded decoder rows x source length per batch: a batch holds
                ``max_tokens / beam_size`` source tokens, so memory and speed do not depend on
                the beam (beam 5 on the demo test set: 6.7 s at 800 source tokens per batch,
                7.7 s at 4,000, 9.5 s at 8,000).
            on_batch: called with the number of lines finished after each batch (progress).
        """
        from seq2seq.data.clean import normalize_en

        encoded = [self.tokenizer.encode(normalize_en(line)) for line in lines]
        self._truncate(encoded)
        outputs = [""] * len(lines)
        self._split_batches = 0
        for batch in token_batches(encoded, self.batch_budget(max_tokens, beam_size)):
            best = self._best_outputs([encoded[i] for i in batch], beam_size)
            for index, tokens in zip(batch, best, strict=True):
                outputs[index] = one_line(self.tokenizer.decode(tokens))
            if on_batch is not None:
                on_batch(len(batch))
        if self._split_batches:
            print(
                f"warning: {self._split_batches} batch(es) ran out of memory and were split and "
                "retried; a smaller --max-tokens avoids the retries",
                file=sys.stderr,
            )
        return outputs

    def _best_outputs(self, sources: list[list[int]], beam_size: int) -> list[list[int]]:
        """The best output ids of each source. A batch that runs out of (GPU) memory is split
        in halves and retried, so one oversized batch never aborts a file."""
        try:
            hyps = translate_ids(self.model, self._pad(sources), beam_size, self.search)
            return [h[0].tokens for h in hyps]
        except torch.cuda.OutOfMemoryError:  # (= torch.OutOfMemoryError from torch 2.5)
            if len(sources) == 1:
                raise MemoryError(
                    f"out of memory translating a single sentence of {len(sources[0])} tokens "
                    f"on {self.model.embedding.weight.device}"
                ) from None
        self._split_batches += 1
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # hand the failed attempt's blocks back before retrying
        half = len(sources) // 2
        return self._best_outputs(sources[:half], beam_size) + self._best_outputs(
            sources[half:], beam_size
        )

    def batch_budget(self, max_tokens: int, beam_size: int) -> int:
        """Source tokens per batch: our search decodes beam_size rows per source."""
        return max(1, max_tokens // beam_size)

    def source_limit(self) -> int:
        """Longest source the model takes: its positions; a decoder-only model holds source
        and translation in one sequence, so its sources leave room for the longest
        translation the search allows."""
        limit = self.model.config.max_positions
        if self.model.config.decoder_only:
            limit = self.search.source_limit(limit)
        return limit

    def _truncate(self, encoded: list[list[int]]) -> None:
        """Cut sources to ``source_limit``; warn once, naming the lines (1-based)."""
        limit = self.source_limit()
        cut = [i + 1 for i, ids in enumerate(encoded) if len(ids) > limit]
        for i in cut:
            encoded[i - 1] = encoded[i - 1][:limit]
        if cut:
            warn_lines(f"truncated {len(cut)} over-long input line(s) to {limit} tokens", cut)

    def _pad(self, rows: list[list[int]]) -> torch.Tensor:
        pad = self.model.config.pad_id
        width = max(len(r) for r in rows)
        device = self.model.embedding.weight.device
        return torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=device)


def token_batches(encoded: list[list[int]], max_tokens: int, extra: int = 0) -> Iterable[list[int]]:
    """Indices of non-empty inputs, longest first, in batches of <= max_tokens padded tokens;
    each row costs its input plus ``extra`` positions (the new tokens of a generation)."""
    order = sorted((i for i, ids in enumerate(encoded) if ids), key=lambda i: -len(encoded[i]))
    batch: list[int] = []
    for index in order:
        width = (len(encoded[batch[0]]) if batch else len(encoded[index])) + extra
        if batch and (len(batch) + 1) * width > max_tokens:
            yield batch
            batch = []
        batch.append(index)
    if batch:
        yield batch


def warn_lines(message: str, line_numbers: list[int]) -> None:
    """One warning on stderr naming the (first 20) 1-based line numbers concerned."""
    shown = ", ".join(map(str, line_numbers[:20])) + (" ..." if len(line_numbers) > 20 else "")
    print(f"warning: {message}: line {shown}", file=sys.stderr)


def one_line(text: str) -> str:
    """Output text with no line breaks, so output line i always answers input line i."""
    return " ".join(text.splitlines()).replace("\u2028", " ").replace("\u2029", " ")
