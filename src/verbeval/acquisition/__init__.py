"""The acquisition study: how agreement is acquired over training, from a checkpoint sweep's agreement scores.

Holds: analysis (the analysis of a sweep: the checkpoint index in, tables and figures out), curves
(learning curves, context resamples), fit (sigmoid fits, age of acquisition), frequency (lemma
frequency, its correlation with AoA, outliers), phases (changepoints), seeds (seed band, AoA
agreement across seeds), plots (the acquisition figures), steps (its workflow steps, each declared once), runs (lemma-contexts as a function of its typed record), toy (the toy model: a synthetic corpus and
a small GPT-2 trained on it) and cli (its sub-commands).

May import: ``verbeval.core`` and ``verbeval.agreement`` (the scores and the checkpoint index it
analyses); never another study, ``verbeval.bench`` or ``verbeval.workflow``.
"""
