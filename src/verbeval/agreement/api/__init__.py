"""The in-process API (docs/api.md): suite (the templates, lexicon and groups loaded once),
evaluation (``evaluate``: a model in memory scored by the workflow's engine, its typed
``AgreementResult``) and callback (``AgreementCallback``: a transformers TrainerCallback scoring
during training).
"""
