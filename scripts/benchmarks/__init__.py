"""The benchmark scripts' shared parts, one job per module (``scripts/*.py`` are the entry
points; they find this package beside them, so nothing needs installing):

- ``harness``: subprocess workers (one measurement per process), peak RSS, thread settings,
  CPU load of other processes, profiler tables;
- ``recipe``: a config resolved by ``seq2seq fit``'s own parser, and copies of it to run;
- ``reference``: Hugging Face ``MarianMTModel`` as our model (build, loss, ``generate``);
- ``train``: our recipe's update step and training loop, for either model, and ``seq2seq fit``
  runs;
- ``flops``: model FLOPs of a batch, accelerator peaks, the measured matmul rate;
- ``decode``: decoders of both models at fixed or natural lengths, and Marian translations;
- ``report``: scores and tables;
- ``proc_memory``: a process tree's memory (``/proc``) and a directory's disk use;
- ``data_corpus``, ``data_child``, ``data_report``: ``bench_data``'s synthetic corpus, child
  processes and tables;
- ``serve_load``: ``bench_serve``'s concurrent clients and what they measure;
- ``serve_report``: ``bench_serve``'s results, their ratios and printed tables;
- ``terminology_report``: ``bench_terminology``'s printed report.
- ``documents_wild``: ``bench_documents_wild``'s comparisons of real documents with their
  translations, and its table.
- ``gpu_check``, ``gpu_env``, ``gpu_train``, ``gpu_decode``, ``gpu_report``:
  ``scripts/gpu_check.sh``'s stages (the driver, the machine and its installs, bf16 training
  against Marian, decoding against CTranslate2, the table).
"""
