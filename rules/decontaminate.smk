# Stage 4 (paper §3.3): word n-gram overlap between the generated tasks and the
# evaluation benchmarks, field by field, exact and explained; training reads only
# the clean set the filter writes.


rule decontam_benchmark:
    output:
        texts="results/decontam/benchmarks/{benchmark}.parquet",
        manifest="results/decontam/benchmarks/{benchmark}.json",
    log:
        "results/logs/decontam/benchmarks/{benchmark}.log",
    benchmark:
        "results/benchmarks/decontam/benchmarks/{benchmark}.tsv"
    conda:
        "../envs/evaluate.yaml"
    params:
        sources=lambda wildcards: {
            k: v for k, v in EVALUATION["sources"].items() if k == wildcards.benchmark
        },
        on_missing=DECONTAMINATION["on_missing_benchmark"],
    script:
        "../scripts/decontam_benchmark.py"


rule decontam_ngram:
    """The check at one n: its own job, so that the n the removal reads
    (remove_ngram) and the n that are only reported change independently."""
    input:
        tasks="results/tasks/tasks.parquet",
        texts=expand(
            "results/decontam/benchmarks/{benchmark}.parquet",
            benchmark=DECONTAMINATION["benchmarks"],
        ),
        manifests=expand(
            "results/decontam/benchmarks/{benchmark}.json",
            benchmark=DECONTAMINATION["benchmarks"],
        ),
    output:
        "results/decontam/ngram/{n}.json",
    log:
        "results/logs/decontam/ngram/{n}.log",
    benchmark:
        "results/benchmarks/decontam/ngram/{n}.tsv"
    conda:
        "../envs/sample.yaml"
    threads: 8  # at most --cores locally; the slurm profile sets cpus_per_task
    params:
        benchmarks=DECONTAMINATION["benchmarks"],
        boilerplate_min_items=DECONTAMINATION["boilerplate_min_items"],
        self_test_leaks=DECONTAMINATION["self_test_leaks"],
        seed=config["seed"],
    script:
        "../scripts/decontaminate.py"


rule decontaminate:
    """The report over every n of ngram_sizes (a merge: no check runs here)."""
    input:
        expand("results/decontam/ngram/{n}.json", n=DECONTAMINATION["ngram_sizes"]),
    output:
        json="results/decontam/report.json",
        markdown="results/decontam/report.md",
    log:
        "results/logs/decontam/decontaminate.log",
    conda:
        "../envs/sample.yaml"
    script:
        "../scripts/decontam_report.py"


checkpoint decontam_filter:
    """A checkpoint: when it reruns and writes the same clean set, the training jobs
    that read it (through clean_tasks.json, which names the set's content hash) are
    dropped from the plan (see training_task_files)."""
    input:
        tasks="results/tasks/tasks.parquet",
        report=f"results/decontam/ngram/{DECONTAMINATION['remove_ngram']}.json",
    output:
        clean="results/decontam/clean_tasks.parquet",
        pointer="results/decontam/clean_tasks.json",
        removed="results/decontam/removed.json",
    log:
        "results/logs/decontam/filter.log",
    conda:
        "../envs/sample.yaml"
    params:
        ngram=DECONTAMINATION["remove_ngram"],
        rule=DECONTAMINATION["remove_rule"],
        threshold=DECONTAMINATION["remove_threshold"],
    script:
        "../scripts/decontam_filter.py"
