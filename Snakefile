# verbeval: how language models handle English verbs.
#   snakemake --cores 8 --resources gpu=1                 (workstation)
#   snakemake --cores 8 --resources gpu=1 --config data_mirror=../shared/data   (offline mirror)
# Every rule calls one `verbeval` sub-command; all logic lives in the Python package (src/verbeval).
import os


# relative paths (config/, resources/, data/, results/) are read from the working directory
if not workflow.config_settings.configfiles and not os.path.isfile("config/config.yaml"):
    raise WorkflowError(f"config/config.yaml not found in the working directory {os.getcwd()}: run the workflow "
                        f"from the repository root ({workflow.basedir}), or from elsewhere with -s {workflow.basedir}/Snakefile "
                        f"--directory {workflow.basedir}")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/fetch.smk"
include: "workflow/rules/tiny_models.smk"
include: "workflow/rules/pip_models.smk"
include: "workflow/rules/agreement.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/veridicality.smk"
include: "workflow/rules/simverb.smk"
include: "workflow/rules/lexicon_modes.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/queues.smk"
include: "workflow/rules/dvc_views.smk"
include: "workflow/rules/acquisition.smk"
include: "workflow/rules/comparisons.smk"
include: "workflow/rules/multilingual.smk"


rule all:
    input:
        PLAN.all_outputs(),
    default_target: True


# A rule whose outputs are all plain paths (a queue job's hundreds of per-revision files, the DVC
# metrics of every model and group) says whether it makes a file by a set lookup: the DAG asks for
# every file it resolves (verbeval.workflow.snakemake_internals.exact_producer).
for _rule in workflow.rules:
    exact_producer(_rule)
