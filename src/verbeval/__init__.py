"""verbeval: reproducible evaluation of how language models handle English verbs."""

__version__ = "0.1.0"
