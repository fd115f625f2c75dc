"""Pictures: attention heatmaps with Chinese labels, and training curves from a run's logs.

Chinese glyphs need a CJK font. ``find_cjk_font`` takes, in order: a font file the user names,
an installed CJK font matplotlib knows (Noto Sans CJK, Source Han Sans, WenQuanYi, SimHei, ...),
then Noto Sans CJK SC from the ``mplfonts`` package (installed with the ``export`` extra).
"""

from __future__ import annotations

import csv
import functools
import sys
from collections.abc import Sequence
from pathlib import Path

from torch import Tensor

CJK_FAMILIES = (
    "Noto Sans CJK SC",
    "Noto Sans SC",
    "Source Han Sans SC",
    "Noto Sans CJK JP",
    "WenQuanYi Micro Hei",
    "WenQuanYi Zen Hei",
    "SimHei",
    "Microsoft YaHei",
    "PingFang SC",
    "Heiti SC",
    "AR PL UMing CN",
)


def _pyplot():  # noqa: ANN202 (matplotlib module)
    try:
        import matplotlib
    except ImportError:
        raise ValueError("pictures need matplotlib: pip install 'seq2seq[export]'") from None
    matplotlib.use("Agg")  # files only, no screen
    import matplotlib.pyplot as plt

    return plt


def find_cjk_font(path: str | None = None) -> Path | None:
    """A font file with Chinese glyphs, or None (a warning says the labels will be boxes)."""
    _pyplot()
    from matplotlib import font_manager

    if path is not None:
        if not Path(path).is_file():
            raise ValueError(f"{path}: font file not found")
        return Path(path)
    by_name = {font.name: font.fname for font in font_manager.fontManager.ttflist}
    for family in CJK_FAMILIES:
        if family in by_name:
            return Path(by_name[family])
    try:
        import mplfonts
    except ImportError:
        return None
    bundled = Path(mplfonts.__file__).parent / "fonts" / "NotoSansCJKsc-Regular.otf"
    return bundled if bundled.is_file() else None


def _font_properties(path: Path | None):  # noqa: ANN202
    from matplotlib import font_manager

    if path is None:
        print(
            "warning: no CJK font found; Chinese labels will show as boxes "
            "(pip install mplfonts, or pass --font FILE)",
            file=sys.stderr,
        )
        return font_manager.FontProperties()
    font_manager.fontManager.addfont(str(path))
    return font_manager.FontProperties(fname=str(path))


def draw_attention(
    maps: Sequence[Tensor],
    queries: Sequence[str],
    keys: Sequence[str],
    output: str | Path,
    layer: int | None = None,
    head: int | None = None,
    title: str = "",
    font: str | None = None,
) -> Path:
    """Heatmaps of attention (one panel per layer, or one chosen layer), queries on the y axis
    and keys on the x axis.

    Args:
        maps: per layer, (H, T, S) probabilities of one sentence.
        queries, keys: the T and S token labels.
        layer: draw only this layer (0-based); None = every layer.
        head: draw only this head; None = the mean over heads.
    """
    plt = _pyplot()
    props = _font_properties(find_cjk_font(font))
    layers = list(range(len(maps))) if layer is None else [layer]
    for index in layers:
        if not 0 <= index < len(maps):
            raise ValueError(f"--layer {index} is not in [0, {len(maps)})")
    if head is not None and not 0 <= head < maps[0].shape[0]:
        raise ValueError(f"--head {head} is not in [0, {maps[0].shape[0]})")
    cell = 0.32
    width = max(4.0, cell * len(keys) + 2.0)
    height = max(3.0, cell * len(queries) + 1.5)
    columns = min(len(layers), 4)
    rows = -(-len(layers) // columns)
    figure, axes = plt.subplots(
        rows, columns, figsize=(width * columns, height * rows), squeeze=False
    )
    for axis in axes.flat[len(layers) :]:
        axis.set_visible(False)
    for axis, index in zip(axes.flat, layers, strict=False):
        grid = maps[index] if head is None else maps[index][head : head + 1]
        image = axis.imshow(
            grid.mean(dim=0).float().numpy(), cmap="viridis", vmin=0.0, aspect="auto"
        )
        axis.set_xticks(range(len(keys)), keys, rotation=90, fontproperties=props)
        axis.set_yticks(range(len(queries)), queries, fontproperties=props)
        what = "mean of heads" if head is None else f"head {head}"
        axis.set_title(f"layer {index} ({what})", fontproperties=props)
        figure.colorbar(image, ax=axis, fraction=0.046, pad=0.04)
    if title:
        figure.suptitle(title, fontproperties=props)
    figure.tight_layout()
    output = Path(output)
    figure.savefig(output, dpi=110)
    plt.close(figure)
    return output


def attention_picture(
    checkpoint: str | Path,
    text: str,
    output: str | Path,
    layer: int | None = None,
    head: int | None = None,
    beam_size: int = 5,
    max_new_tokens: int = 20,
    font: str | None = None,
) -> Path:
    """Translate (or continue) ``text`` with a checkpoint and draw its attention: the
    cross-attention of an encoder-decoder model (output tokens against source tokens), the
    self-attention of a decoder-only one (the whole sequence against itself)."""
    from seq2seq.inference.checkpoint import load_model
    from seq2seq.inference.packed import pack_for_cpu_inference

    loaded = load_model(checkpoint)
    # Packed as Translator and Generator pack it, so the picture shows what they output.
    model = pack_for_cpu_inference(loaded.model)
    # Each picture differs only in its maps, labels and title.
    draw = functools.partial(draw_attention, output=output, layer=layer, head=head, font=font)
    if loaded.task == "lm":
        return _continuation_attention(model, loaded.tokenizer, text, max_new_tokens, draw)
    return _translation_attention(model, loaded.tokenizer, loaded.search, text, beam_size, draw)


def _pieces(tokenizer, ids: Sequence[int]) -> list[str]:
    return [tokenizer.id_to_piece(i) for i in ids]


def _self_attention_picture(model, tokenizer, sequence: list[int], title: str, draw) -> Path:
    """One sequence's self-attention, its tokens on both axes."""
    import torch

    from seq2seq.inference.attention_maps import self_attention_maps

    maps = self_attention_maps(model, torch.tensor([sequence]))
    labels = _pieces(tokenizer, sequence)
    return draw([m[0] for m in maps], labels, labels, title=title)


def _continuation_attention(model, tokenizer, text: str, max_new_tokens: int, draw) -> Path:
    """A language model's greedy continuation of ``text``, and its self-attention."""
    from seq2seq.decoding.decode import generate_ids
    from seq2seq.decoding.sampling import SamplingConfig

    prompt = [model.config.bos_id, *tokenizer.encode(text)]
    new = generate_ids(model, [prompt], max_new_tokens, SamplingConfig(temperature=0.0))[0]
    sequence = prompt + new
    title = f"self-attention: {tokenizer.decode(sequence)}"
    return _self_attention_picture(model, tokenizer, sequence, title, draw)


def _translation_attention(model, tokenizer, search, text: str, beam_size: int, draw) -> Path:
    """A translator's best translation of ``text``: the cross-attention of an encoder-decoder,
    the self-attention of a decoder-only model over its one sequence."""
    import torch

    from seq2seq.data.clean import normalize_en
    from seq2seq.decoding.decode import translate_ids, translation_prompt
    from seq2seq.inference.attention_maps import cross_attention_maps
    from seq2seq.inference.pieces import cut_source

    config = model.config
    limit = search.source_limit(config.max_positions) if config.decoder_only else None
    text = normalize_en(text)
    source = tokenizer.encode_source(text) if text.strip() else []
    source = cut_source(source, limit or config.max_positions, tokenizer)
    if not source:
        raise ValueError("--text has no tokens to attend to")
    best = translate_ids(model, torch.tensor([source]), beam_size, search)[0][0].tokens
    title = f"{text} → {tokenizer.decode(best)}"
    if config.decoder_only:  # a decoder-only translator: its one sequence, self-attention
        sequence = translation_prompt(source, config) + best + [config.eos_id]
        return _self_attention_picture(model, tokenizer, sequence, f"self-attention: {title}", draw)
    tgt_in = torch.tensor([[config.bos_id, *best]])
    maps = cross_attention_maps(model, torch.tensor([source]), tgt_in)
    # Row t is the step that produced output token t (the last one produced eos).
    queries = _pieces(tokenizer, [*best, config.eos_id])
    keys = _pieces(tokenizer, source)
    return draw([m[0] for m in maps], queries, keys, title=f"cross-attention: {title}")


def latest_metrics(run: str | Path) -> Path:
    """``metrics.csv`` of a run: ``runs/NAME`` (its newest ``version_N``) or a version dir."""
    run = Path(run)
    if (run / "metrics.csv").is_file():
        return run / "metrics.csv"
    versions = sorted(run.glob("version_*/metrics.csv"), key=lambda p: _version(p.parent.name))
    if not versions:
        raise ValueError(f"{run}: no metrics.csv (expected runs/NAME/version_N/metrics.csv)")
    return versions[-1]


def _version(name: str) -> int:
    suffix = name.removeprefix("version_")
    return int(suffix) if suffix.isdigit() else -1


def read_curves(path: Path) -> dict[str, list[tuple[int, float]]]:
    """Each logged metric as (step, value) points, in step order."""
    curves: dict[str, list[tuple[int, float]]] = {}
    with path.open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            step = int(float(row.get("step") or 0))
            for name, value in row.items():
                if name not in ("step", "epoch") and value not in (None, ""):
                    curves.setdefault(name, []).append((step, float(value)))
    return curves


PANELS = (
    ("loss", ("train_loss", "val_loss", "val_nll")),
    ("validation BLEU", ("val_bleu",)),
    ("validation perplexity", ("val_ppl",)),
    ("learning rate", ("lr-AdamW",)),
    ("throughput (tokens/s)", ("tok_per_s",)),
)


def plot_curves(run: str | Path, output: str | Path) -> Path:
    """Loss, validation BLEU (or perplexity), learning rate and throughput against step."""
    plt = _pyplot()
    metrics = latest_metrics(run)
    curves = read_curves(metrics)
    panels = [(title, [n for n in names if n in curves]) for title, names in PANELS]
    panels = [(title, names) for title, names in panels if names]
    if not panels:
        raise ValueError(f"{metrics}: no loss, BLEU or learning-rate columns to plot")
    columns = min(len(panels), 3)
    rows = -(-len(panels) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.4 * columns, 3.4 * rows), squeeze=False)
    for axis in axes.flat[len(panels) :]:
        axis.set_visible(False)
    for axis, (title, names) in zip(axes.flat, panels, strict=False):
        for name in names:
            steps, values = zip(*curves[name], strict=True)
            axis.plot(steps, values, marker="o" if len(steps) < 20 else None, label=name)
        axis.set_title(title)
        axis.set_xlabel("step")
        axis.legend()
        axis.grid(alpha=0.3)
    figure.suptitle("/".join(metrics.parent.parts[-3:]))  # runs/NAME/version_N
    figure.tight_layout()
    output = Path(output)
    figure.savefig(output, dpi=100)
    plt.close(figure)
    return output
