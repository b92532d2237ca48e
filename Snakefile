# TMAX reproduction: specs -> tasks -> decontamination -> RL per model size ->
# cross-harness evaluation -> the paper's tables. One include per stage.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


report: "rules/report/workflow.rst"


include: "rules/common.smk"


# Under `--sdm apptainer` every rule runs in the workflow image (containers/Dockerfile,
# docs/slurm.md); config key `container`, validated with its default by common.smk.
container: config["container"]


include: "rules/sample.smk"
include: "rules/images.smk"
include: "rules/generate.smk"
include: "rules/validate.smk"
include: "rules/datasets.smk"
include: "rules/datasets_measure.smk"
include: "rules/decontaminate.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/report.smk"


rule all:
    default_target: True
    input:
        final_outputs(),
