# Stage 1 (paper §3.1): draw task specs over the 9 axes, then report their balance.


rule sample_specs:
    input:
        taxonomy=taxonomy_file(),
    output:
        "results/specs/shards/{shard}.parquet",
    log:
        "results/logs/sample_specs/{shard}.log",
    benchmark:
        "results/benchmarks/sample_specs/{shard}.tsv"
    conda:
        "../envs/sample.yaml"
    params:
        sampler=sampler_params(),
        bounds=shard_range,
    script:
        "../scripts/sample_specs.py"


rule merge_specs:
    input:
        spec_shard_files(),
    output:
        "results/specs/specs.parquet",
    log:
        "results/logs/merge_specs.log",
    benchmark:
        "results/benchmarks/merge_specs.tsv"
    conda:
        "../envs/sample.yaml"
    script:
        "../scripts/merge_specs.py"


rule balance_report:
    input:
        specs="results/specs/specs.parquet",
        taxonomy=taxonomy_file(),
    output:
        json="results/specs/balance.json",
        markdown="results/specs/balance.md",
    log:
        "results/logs/balance_report.log",
    benchmark:
        "results/benchmarks/balance_report.tsv"
    conda:
        "../envs/sample.yaml"
    script:
        "../scripts/balance_report.py"
