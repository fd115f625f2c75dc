"""Tools, floor 6: what users do with a trained model besides translating.

export.py          to Hugging Face ``MarianMTModel`` (exact) and CTranslate2
argos.py           an Argos Translate package (.argosmodel) that LibreTranslate serves
minisbd.py         the package's sentence splitter: a MiniSBD model of rules, no weights
onnx_graph.py      just enough ONNX protobuf to write that splitter without ``onnx``
marian_weights.py  our config and weights as ``MarianMTModel``'s (the export's exact mapping)
pretrained.py      import a Hugging Face ``MarianMTModel`` (OPUS-MT) exactly
pictures.py        attention heatmaps with Chinese labels, training curves
"""
