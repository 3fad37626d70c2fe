"""The multilingual agreement study: the CLAMS sets (Mueller et al. 2020) in English, French, German,
Hebrew and Russian, scored TSE, EW and MW over each language's own verb lexicon.

Holds: clams (reading the CLAMS evaluation sets into the agreement template table), lexicons (a verb
lexicon per language, from a package made for that language's morphology), and the study's steps.

May import: ``verbeval.core``, ``verbeval.agreement`` (it runs the agreement study's steps as
functions); never another study, ``verbeval.bench`` or the top-level ``verbeval.cli``.
"""
