"""Training, floor 5: the only floor that imports Lightning.

module.py         ``TranslationModule``: the training step and the update
finetune.py       ``model.init_from``: a checkpoint's config, weights and tokenizer to start from
schedule.py       Adam and the paper's inverse-square-root schedule (plain PyTorch)
validation.py     ``ValidationBleu``: the callback that logs validation BLEU
data_checks.py    ``check_data_fits_model``: one-line errors for data the model cannot take
callbacks.py      throughput, best / last and atomic checkpoints, signal stops
lightning_cli.py  ``seq2seq fit`` / ``validate``: Lightning's own CLI over module and data
"""
