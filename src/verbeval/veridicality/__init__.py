"""The veridicality study (Ross & Pavlick 2019): do NLI models draw the inferences verbs license?

Holds: nli (reading the data, NLI scoring, the per-signature table and the scatter) and
counterfactual (manipulated pairs: verb replacements and to/that swaps, KL tables 7 and 8);
cli registers the veridicality-* sub-commands.

May import: ``verbeval.core`` and its own modules; never another study, ``verbeval.bench`` or the
top-level ``verbeval.cli`` / ``verbeval.dvc``.
"""
