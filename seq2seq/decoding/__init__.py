"""Decoding, floor 2: the searches, and what runs our model through them.

    search.py            what every search shares: the ``Scorer``, the special ids, the
                         ``SearchConfig``, each step's allowed tokens; imports no model
    greedy.py            greedy search: the most probable token at every step
    beam.py              beam search, plain and lexically constrained
    utf8.py              byte pieces kept valid UTF-8: the mask every search applies
    repetition.py        the repetition guard every search applies (no 谢谢谢, no loops)
    sampling.py          temperature, top-k and top-p sampling, seeded per row (LM mode)
    constrained.py       constrained beams: terms that must appear, dynamic beam allocation
    term_constraints.py  a glossary's terms followed on the text a hypothesis writes
    decode.py            our Transformer as a ``Scorer``; ``translate_ids`` and ``generate_ids``
    shortlist.py         a lexical shortlist: each sentence's candidate pieces, its file format
    continuous.py        sentences joining and leaving a running search (the server's batching)

It imports the paper (``seq2seq.model``, ``seq2seq.cache``) and the ground (``seq2seq.textio``),
nothing above them.
"""
