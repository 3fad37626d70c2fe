"""The shared engine every study builds on.

Holds: steps (a workflow step declared once: its settings as configuration keys, from which its
command's options, its rules' command lines and DVC params and the API's defaults derive), errors (``VerbevalError``, ``InputError``: one-line messages), io (atomic writes), config
(the workflow config's layers and its schema validation), model_entries (the models a config
describes: defaults, revisions, pip and tiny models), model_checks (whether each model loads here:
local folders, hub ids, the hub), manifest (the data manifest: its sources, loaded and validated),
fetch (downloading one source, checksum checked), verified (verified copies and their cache), mirror
(building a data mirror), verb_list (The Giant Verb List's parser), models (loading LMs, their kind, BOS
and case, fingerprints), model_ids (what a model id names: local path or hub id), devices (devices and
device maps), tiny_models (the tiny-model factory), provenance (whether a model is randomly initialised, and its labels), wordtok (word-level tokenizers of tiny models), plots (the figure style and
saving), tables (the studies' Markdown and LaTeX table renderer and its number format), html_report (the
report pages' one style and HTML table builder), clidoc (the generated sub-command table), configdoc (the
generated key tables of docs/config.md) and cliutil (helpers of
the studies' command lines), npy_sort (numpy's sort kernels on AMD Zen 4, chosen before numpy
loads), omp_wait (torch's idle OpenMP threads spin briefly, set before torch loads), memory (free memory and batch sizes that fit), fasttok (word encoding without transformers),
stamps (up-to-date stamps of a multi-branch job's outputs), cluster (cluster resource checks),
failures (the failed jobs' causes), load_report (a checkpoint missing a tensor refused, extra ones one warning), parent_death (a workflow job's command ends with its shell), outfolders (an output folder replaced only when it is the
command's own earlier output), api_args (the in-process API's argument checks), model_state (a model
borrowed for scoring and handed back exactly), warm (work a warm process does once per
tokenizer, keyed by file content), prefetch (the next model of a queue loaded while the current one
computes), weight_swap (a revision's weights put into the module an earlier revision built),
session (a queue's or command's warm caches and prefetcher, passed to the step functions),
model_runs (ModelRun: a model source and its per-model settings as one typed value), console
(Snakemake's job descriptions kept short), bootstrap
(the percentile bootstrap both studies' CIs come from), count_draws (its resample counts, drawn
once per stream and kept), eee_schemas (Every Eval Ever's JSON schemas, read as data and applied), and the
model_sources package (GGUF files, pip packages, pins, header checks, fingerprints); cli registers
fetch, mirror, tiny-model and check-config.

May import: the standard library and third-party packages only; never a study
(``verbeval.agreement``, ``verbeval.simverb``, ``verbeval.veridicality``), ``verbeval.bench`` or the
top-level ``verbeval.cli`` / ``verbeval.workflow.dvc_yaml`` / ``verbeval.workflow.cli``. torch is imported lazily
(inside functions), so that ``verbeval --help`` starts without it.
"""
