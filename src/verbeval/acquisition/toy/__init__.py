"""The toy model (docs/toy_model.md): spec (CorpusSpec: what the corpus is built from), corpus (a synthetic agreement corpus with planted lemma
frequencies and graded constructions; its CorpusSpec) and training (a small GPT-2 trained on it from
scratch on a CPU, saved at log-spaced steps).
"""
