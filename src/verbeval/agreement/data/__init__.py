"""The agreement study's inputs: minimal_pairs (the linguistics of a minimal pair), template_files
(the published template files), custom_pairs (users' pair files), errata, groups (the groups file), templates
(the template table), lexicon (verb forms from the verb lists), eligibility (the lemmas a tokenizer
reads as one token) and items (each row's lexical items: its subject noun and verb lemma).
"""
