# Stage 3 (paper §3.2): every task in a sandbox; the reference solution must score 1
# and a no-op 0. Failures are quarantined with the reason. Then export and report.


rule validate_tasks:
    input:
        tasks="results/tasks/shards/{shard}",
        toolbox="results/images/toolbox.json",
        images=expand("results/images/domains/{domain}.json", domain=DOMAINS),
    output:
        "results/tasks/validation/{shard}.json",
    log:
        "results/logs/validate_tasks/{shard}.log",
    benchmark:
        "results/benchmarks/validate_tasks/{shard}.tsv"
    conda:
        "../envs/sandbox.yaml"
    params:
        backend=config["sandbox"]["backend"],
        validator=validator_fingerprint(),
    script:
        "../scripts/validate_tasks.py"


rule collect_tasks:
    input:
        tasks=task_shard_dirs(),
        validations=validation_files(),
        taxonomy=taxonomy_file(),
    output:
        export="results/tasks/tasks.parquet",
        json="results/tasks/report.json",
        markdown="results/tasks/report.md",
    log:
        "results/logs/collect_tasks.log",
    benchmark:
        "results/benchmarks/collect_tasks.tsv"
    conda:
        "../envs/sample.yaml"
    script:
        "../scripts/collect_tasks.py"
