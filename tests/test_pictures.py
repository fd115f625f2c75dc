"""Attention maps are the model's real attention; the pictures are real PNGs with CJK labels."""

import pytest
import torch

plt = pytest.importorskip("matplotlib")
Image = pytest.importorskip("PIL.Image")


def _png(path):
    image = Image.open(path)
    assert image.format == "PNG"
    return image


def test_attention_picture_has_a_panel_per_layer_and_chinese_glyphs(tmp_path):
    from fontTools.ttLib import TTFont

    from seq2seq.tools.pictures import draw_attention, find_cjk_font

    font = find_cjk_font()
    assert font is not None, "no CJK font: pip install mplfonts"
    cmap = TTFont(font, fontNumber=0).getBestCmap()
    assert all(ord(ch) in cmap for ch in "火车站在哪里我们明天")  # the labels are not boxes
    maps = [torch.rand(4, 3, 5).softmax(-1) for _ in range(3)]
    queries, keys = ["▁火车", "在哪里", "</s>"], ["▁Where", "▁is", "▁the", "▁station", "?"]
    every = _png(draw_attention(maps, queries, keys, tmp_path / "all.png", title="t"))
    one = _png(draw_attention(maps, queries, keys, tmp_path / "one.png", layer=2, head=1))
    assert every.width > 2.5 * one.width and every.height == one.height  # 3 panels vs 1
    colours = len(one.convert("RGB").getcolors(maxcolors=1 << 20))
    assert colours > 50  # a heatmap, labels and a colour bar, not a blank canvas
    with pytest.raises(ValueError, match="--layer 5"):
        draw_attention(maps, queries, keys, tmp_path / "x.png", layer=5)


def test_training_curves_picture_from_a_metrics_file(tmp_path):
    from seq2seq.tools.pictures import latest_metrics, plot_curves, read_curves

    run = tmp_path / "runs" / "demo"
    for version in (0, 1, 10):
        (run / f"version_{version}").mkdir(parents=True)
    rows = ["epoch,lr-AdamW,step,tok_per_s,train_loss,val_bleu,val_loss,val_nll,val_ppl"]
    for step in range(0, 100, 10):
        rows.append(f"0,{step * 1e-5},{step},5000,{9 - step / 20},,,,")
    rows.append("0,,99,,,12.5,4.1,3.9,49.4")
    (run / "version_10" / "metrics.csv").write_text("\n".join(rows) + "\n")
    (run / "version_1" / "metrics.csv").write_text("epoch,step,train_loss\n0,1,3\n")
    assert latest_metrics(run) == run / "version_10" / "metrics.csv"  # 10 after 1, not before
    curves = read_curves(latest_metrics(run))
    assert curves["val_bleu"] == [(99, 12.5)] and len(curves["train_loss"]) == 10
    image = _png(plot_curves(run, tmp_path / "curves.png"))
    assert image.width > image.height > 300  # five panels in two rows
    with pytest.raises(ValueError, match="no metrics.csv"):
        plot_curves(tmp_path, tmp_path / "none.png")
