"""The veridicality study (Ross & Pavlick 2019): do NLI models draw the inferences verbs license?

Holds: data (reading the Ross & Pavlick data, the signatures, the long predictions table and the
pseudo-model's), predict (a real NLI model's predictions, its labels mapped by name), statistics (the
per-signature table: accuracy and correlations), report (the table as Markdown and LaTeX, the scatter),
counterfactual (the manipulated pairs: verb replacements and to/that swaps of every item),
sentence_edits (the edits of one sentence: tokens, verb forms, finding and inflecting the verbs) and
kl_tables (KL divergences, Tables 7 and 8), steps (the workflow steps of the veridicality-*
sub-commands, declared once: their settings and DVC params); cli registers those sub-commands.

May import: ``verbeval.core`` and its own modules; never another study, ``verbeval.bench`` or the
top-level ``verbeval.cli`` / ``verbeval.workflow.dvc_yaml``.
"""
