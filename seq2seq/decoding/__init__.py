"""Decoding, floor 2: the searches, and what runs our model through them.

    search.py       greedy and beam search over a ``Scorer``; imports no model
    utf8.py         byte pieces kept valid UTF-8: the mask every search applies
    repetition.py   the repetition guard every search applies (no 谢谢谢, no loops)
    sampling.py     temperature, top-k and top-p sampling, seeded per row (LM mode)
    constrained.py  lexically constrained beam search: terms that must appear
    decode.py       our Transformer as a ``Scorer``; ``translate_ids`` and ``generate_ids``
    continuous.py   sentences joining and leaving a running search (the server's batching)

It imports the paper (``seq2seq.model``, ``seq2seq.cache``) and the ground (``seq2seq.textio``),
nothing above them.
"""
