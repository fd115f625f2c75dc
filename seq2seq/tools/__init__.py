"""Tools, floor 6: what users do with a trained model besides translating.

export.py      to Hugging Face ``MarianMTModel`` (exact) and CTranslate2
pretrained.py  import a Hugging Face ``MarianMTModel`` (OPUS-MT) exactly
pictures.py    attention heatmaps with Chinese labels, training curves
"""
