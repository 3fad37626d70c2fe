"""The multilingual agreement study: the CLAMS sets (Mueller et al. 2020) in English, French, German,
Hebrew and Russian, scored TSE, EW and MW over each language's own verb lexicon.

Holds: clams (the CLAMS evaluation sets read into pairs), templates (the pairs as agreement template
rows, each with its lexicon cell), lexicons (a verb lexicon per language, from a package made for that
language's morphology), scoring (one model on every language: the agreement study's steps per cell,
pooled per group), report (the languages side by side, the unpaired comparisons), tables (what
``clams-table`` writes), steps (its workflow steps, declared once) and cli (their sub-commands).

May import: ``verbeval.core``, ``verbeval.agreement`` (it runs the agreement study's steps as
functions); never another study, ``verbeval.bench`` or the top-level ``verbeval.cli``.
"""
