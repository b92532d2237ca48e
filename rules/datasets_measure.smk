# Prior datasets measured for the dataset-comparison table (the paper's Table 1):
# every task labelled with our taxonomy's domain and skill types (balance exp(H)/N on
# the same axes as ours), the difficulty of the converted environments (pass@1,
# pass@8 of a reference model), and the contamination check the generated tasks go
# through (same benchmarks, same n). rules/datasets.smk writes each manifest.json.


rule label_dataset:
    input:
        manifest="results/datasets/{dataset}/manifest.json",
        taxonomy=taxonomy_file(),
    output:
        "results/datasets/{dataset}/labels.json",
    log:
        "results/logs/datasets/{dataset}/labels.log",
    benchmark:
        "results/benchmarks/datasets/{dataset}/labels.tsv"
    wildcard_constraints:
        dataset=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    conda:
        "../envs/sample.yaml"
    params:
        labeller=LABELLING.output_params(),
    script:
        "../scripts/label_dataset.py"


rule dataset_difficulty:
    input:
        manifest="results/datasets/{dataset}/manifest.json",
        model=difficulty_model_dir,
        toolbox="results/images/toolbox.json",
    output:
        "results/datasets/{dataset}/difficulty.json",
    log:
        run="results/logs/datasets/{dataset}/difficulty.log",
        server="results/logs/datasets/{dataset}/difficulty.server.log",
    benchmark:
        "results/benchmarks/datasets/{dataset}/difficulty.tsv"
    wildcard_constraints:
        dataset=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    conda:
        "../envs/evaluate.yaml"
    threads: DIFFICULTY.concurrency
    params:
        difficulty=DIFFICULTY.output_params(),
    script:
        "../scripts/dataset_difficulty.py"


rule dataset_decontam_ngram:
    """The check at one n (as decontam_ngram for the generated tasks): a model trained
    on this dataset reads only remove_ngram's part."""
    input:
        manifest="results/datasets/{dataset}/manifest.json",
        texts=expand(
            "results/decontam/benchmarks/{benchmark}.parquet",
            benchmark=DECONTAMINATION["benchmarks"],
        ),
        manifests=expand(
            "results/decontam/benchmarks/{benchmark}.json",
            benchmark=DECONTAMINATION["benchmarks"],
        ),
    output:
        "results/datasets/{dataset}/decontam/{n}.json",
    log:
        "results/logs/datasets/{dataset}/decontam/{n}.log",
    benchmark:
        "results/benchmarks/datasets/{dataset}/decontam/{n}.tsv"
    wildcard_constraints:
        dataset=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    conda:
        "../envs/sample.yaml"
    threads: 8  # at most --cores locally; the slurm profile sets cpus_per_task
    params:
        benchmarks=DECONTAMINATION["benchmarks"],
        boilerplate_min_items=DECONTAMINATION["boilerplate_min_items"],
        self_test_leaks=DECONTAMINATION["self_test_leaks"],
        seed=config["seed"],
    script:
        "../scripts/dataset_decontam.py"


rule dataset_decontam:
    """The dataset's contamination report over every n (a merge)."""
    input:
        expand(
            "results/datasets/{{dataset}}/decontam/{n}.json",
            n=DECONTAMINATION["ngram_sizes"],
        ),
    output:
        json="results/datasets/{dataset}/decontam.json",
        markdown="results/datasets/{dataset}/decontam.md",
    log:
        "results/logs/datasets/{dataset}/decontam.log",
    wildcard_constraints:
        dataset=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    conda:
        "../envs/sample.yaml"
    script:
        "../scripts/decontam_report.py"


checkpoint dataset_filter:
    """The dataset's tasks the contamination rule removes, for a model trained on it
    (models[].rl_data); a checkpoint, as decontam_filter."""
    input:
        f"results/datasets/{{dataset}}/decontam/{DECONTAMINATION['remove_ngram']}.json",
    output:
        "results/datasets/{dataset}/removed.json",
    log:
        "results/logs/datasets/{dataset}/filter.log",
    wildcard_constraints:
        dataset=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    conda:
        "../envs/sample.yaml"
    params:
        ngram=DECONTAMINATION["remove_ngram"],
        rule=DECONTAMINATION["remove_rule"],
        threshold=DECONTAMINATION["remove_threshold"],
    script:
        "../scripts/dataset_filter.py"
