"""Verb forms of any length: multitoken (multi-token forms and their contexts), modes (the
single_token/all/common modes and their scores), form_shards (the forms' log-probability shards)
and table (the modes' side-by-side table).
"""
