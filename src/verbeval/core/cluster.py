"""Checks of the resources a cluster run (profiles/slurm, profiles/slurm-cpu) submits with.

Snakemake does not merge command-line resource options into a profile's: ``--set-resources
infer:mem_mb=200`` replaces the profile's whole ``set-resources`` list (so ``infer`` loses its GPU
partition while still asking for GPUs) and ``--default-resources slurm_account=X`` replaces the
whole ``default-resources`` list (every default partition, time and memory). The workflow calls
:func:`resource_problems` before the first submission and stops with its message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

#: what the cluster profiles' default-resources set, and a run needs
REQUIRED_DEFAULTS = ("slurm_partition", "runtime", "mem_mb")


def resource_problems(
    default_keys: Iterable[str], set_resources: Mapping[str, Mapping[str, object]], gpu_rules: Iterable[str]
) -> list[str]:
    """What the resources lack: the default keys of :data:`REQUIRED_DEFAULTS` that are not in
    ``default_keys`` (the keys of the default resources in force), and the rules of ``gpu_rules``
    (those that declare a ``gpu`` resource) without a ``slurm_partition`` in ``set_resources``."""
    problems = []
    keys = set(default_keys)
    missing = [k for k in REQUIRED_DEFAULTS if k not in keys]
    if missing:
        problems.append(
            f"default-resources lack {', '.join(missing)}: a command-line --default-resources replaces the "
            "profile's whole default-resources list (Snakemake does not merge them); repeat the profile's "
            "entries on the command line or edit a copy of the profile"
        )
    unrouted = sorted(r for r in set(gpu_rules) if "slurm_partition" not in set_resources.get(r, {}))
    if unrouted:
        problems.append(
            f"set-resources give no slurm_partition to rule(s) {', '.join(unrouted)}: a command-line "
            "--set-resources replaces the profile's whole set-resources list (Snakemake does not merge "
            "them), so these GPU jobs would go to the default partition; repeat the profile's entries "
            "for them on the command line or edit a copy of the profile"
        )
    return problems
