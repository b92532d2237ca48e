# Prior datasets (paper §4.3, Tables 1-2): each configured source, read as it is
# published, sampled deterministically and converted into our task format.


rule prepare_dataset:
    output:
        manifest="results/datasets/{dataset}/manifest.json",
        tasks=directory("results/datasets/{dataset}/tasks"),
        report="results/datasets/{dataset}/report.md",
    log:
        "results/logs/datasets/{dataset}/prepare.log",
    benchmark:
        "results/benchmarks/datasets/{dataset}/prepare.tsv"
    wildcard_constraints:
        dataset=DATASET_NAMES,
    conda:
        "../envs/sample.yaml"
    params:
        source=dataset_source,
        sample=dataset_sample,
        seed=config["seed"],
        converter=converter_fingerprint(),
    script:
        "../scripts/prepare_dataset.py"
