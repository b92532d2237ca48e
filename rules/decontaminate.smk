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


rule decontaminate:
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
        json="results/decontam/report.json",
        markdown="results/decontam/report.md",
    log:
        "results/logs/decontam/decontaminate.log",
    benchmark:
        "results/benchmarks/decontam/decontaminate.tsv"
    conda:
        "../envs/sample.yaml"
    threads: 8  # at most --cores locally; the slurm profile sets cpus_per_task
    params:
        benchmarks=DECONTAMINATION["benchmarks"],
        ngram_sizes=DECONTAMINATION["ngram_sizes"],
        boilerplate_min_items=DECONTAMINATION["boilerplate_min_items"],
        self_test_leaks=DECONTAMINATION["self_test_leaks"],
        seed=config["seed"],
    script:
        "../scripts/decontaminate.py"


rule decontam_filter:
    input:
        tasks="results/tasks/tasks.parquet",
        report="results/decontam/report.json",
    output:
        clean="results/decontam/clean_tasks.parquet",
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
