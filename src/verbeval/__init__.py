"""verbeval: reproducible evaluation of how language models handle English verbs.

Layout (docs/architecture.md): ``verbeval.core`` is the shared engine; the studies
``verbeval.agreement``, ``verbeval.simverb`` and ``verbeval.veridicality`` build on it and not on
each other; ``verbeval.bench`` times the agreement pipeline. At the top, ``verbeval.commands`` assembles
the parser from each package's ``cli.register*`` functions, ``verbeval.cli`` runs it (the process edge), ``verbeval.workflow.cli`` holds
the sub-commands about the workflow as a whole, ``verbeval.workflow.report_tables`` writes a CSV table as a
page of the Snakemake report, and ``verbeval.workflow.dvc_yaml`` turns the Snakemake DAG into a dvc.yaml. Imports point down this list, never up.
"""

__version__ = "0.1.0"
