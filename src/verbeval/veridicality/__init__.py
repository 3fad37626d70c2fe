"""The veridicality study (Ross & Pavlick 2019): do NLI models draw the inferences verbs license?

Holds: nli (reading the data, NLI scoring, the per-signature table and the scatter),
counterfactual (the manipulated pairs: verb replacements and to/that swaps of every item),
sentence_edits (the edits of one sentence: tokens, verb forms, finding and inflecting the verbs) and
kl_tables (KL divergences, Tables 7 and 8); cli registers the veridicality-* sub-commands.

May import: ``verbeval.core`` and its own modules; never another study, ``verbeval.bench`` or the
top-level ``verbeval.cli`` / ``verbeval.workflow.dvc_yaml``.
"""
