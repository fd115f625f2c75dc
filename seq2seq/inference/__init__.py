"""Inference, floor 4: from a checkpoint to translations, on the CPU or a GPU.

    checkpoint.py          the checkpoint format: load, average, atomic save
    translator.py          ``Translator``: lines in, one output line per input line
    source_encoding.py     its encoding steps: sentences planned into pieces, encoded
    glossary_terms.py      its glossary steps: each piece's terms, and its constraints
    batch_decoding.py      its decoding steps: encoded sources in token batches, finished
    options.py             ``TranslateOptions``: what every translation call decodes with
    engines.py             the engines ``Translator`` drives (``TorchEngine``; the protocol)
    reading.py             what a model reads: lines normalised, truecased, encoded, cut
    pieces.py              sentences as pieces within the source limit; token batches
    memory_split.py        a batch out of (GPU) memory split in halves and retried
    finishing.py           pieces' hypotheses back into sentence translations
    word_alignment.py      each output character aligned to the source word it came from
    ctranslate2_engine.py  ``CTranslate2Engine``, the same over an exported model
    documents.py           texts and documents as distinct sentences, and back
    confidence.py          a translation's confidence in [0, 1], and its fit to chrF
    glossary.py            glossaries: terms found in sentences, spelled as constraints
    glossary_bans.py       a glossary term's other words, banned beside it by the search
    generation.py          ``Generator``: prompts in, continuations out (LM mode)
    evaluation.py          the one BLEU / chrF scorer and the evaluation sets
    distillation.py        a teacher's translations of training sources, for a student
    attention_maps.py      attention probabilities of a forward pass, for pictures
    cpu.py                 ``prepare_for_inference``: a loaded model made fast, once
    frozen.py              what packed and int8 layers share: frozen, swapped in place
    packed.py, int8.py     linear layers over oneDNN-packed float32 or int8 weights

It imports decoding, data and the paper; never Lightning (a server or a script needs torch).
"""
