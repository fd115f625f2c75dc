"""Training, floor 5: the only floor that imports Lightning.

    module.py         ``TranslationModule``: the training step and the update
    schedule.py       Adam and the paper's inverse-square-root schedule (plain PyTorch)
    callbacks.py      throughput, best / last and atomic checkpoints, validation BLEU
    lightning_cli.py  ``seq2seq fit`` / ``validate``: Lightning's own CLI over module and data
"""
