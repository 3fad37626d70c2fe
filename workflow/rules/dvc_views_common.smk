# Shared set-up of the DVC view rules (dvc_views.smk): the cutoff figures and the output lists.
import os

from verbeval.agreement.figures import CUTOFF_FIGURES

DVC_FIGURES = {spec.stem: (name, spec.sides) for name, spec in CUTOFF_FIGURES.items()}


def dvc_metrics_files():
    return expand(f"{OUT}/metrics/{{model}}/{{group}}.json", model=TABLE_MODELS, group=GROUP_IDS)


def dvc_plot_files(stem, side):
    return expand(f"{FIGS}/dvc/{stem}/{side}/{{group}}.csv", group=GROUP_IDS)


def dvc_view_outputs():
    return dvc_metrics_files() + [f for stem, (_, sides) in DVC_FIGURES.items() for side in sides
                                  for f in dvc_plot_files(stem, side)]
