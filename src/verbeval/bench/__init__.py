"""Benchmarks (docs/performance.md): the workflow run by Snakemake, aggregation, inference
throughput, post-processing, real models and the paper-style baseline.

Holds: runner (the driver: parts, order, the JSON), workflow_runs (the workflow and snakemake parts:
``snakemake`` on the bench models or any configuration), snakemake_jobs (running ``snakemake`` and
each job's wall time from Snakemake's own job metadata), model_specs (the bench models' shapes and
their build), timing (best-of-N timing, subprocess time, load, peak memory), aggregation,
throughput, postprocess, api_calls (the in-process API's evaluate calls), real_models (the benchmarks of
those parts), paper_shapes (the paper configuration at the paper's model sizes, on CUDA), paper_baseline (the
paper-code oracle, which the tests import as their independent reference), baseline_ratio (the
oracle timed against verbeval's jobs), sweep (a checkpoint sweep of N revisions: the cost per
revision), sweep_sizes (its checkpoint shapes, ``--sweep-size``), output_hashes (the ``bench-hashes`` sub-command: two source trees' outputs compared by
sha256), report (the printed summary) and cli (the ``bench`` sub-command).

May import: ``verbeval.core``, ``verbeval.agreement`` (it times the agreement pipeline) and
``verbeval.workflow`` (the plan of the run it starts: its groups, settings and output paths);
never a command module: it runs the workflow as ``snakemake``, whose rules run ``verbeval``.
"""
