# Stage 2 (paper §3.1): one task directory per spec, written shard by shard.


rule generate_tasks:
    input:
        specs="results/specs/shards/{shard}.parquet",
    output:
        directory("results/tasks/shards/{shard}"),
    log:
        "results/logs/generate_tasks/{shard}.log",
    benchmark:
        "results/benchmarks/generate_tasks/{shard}.tsv"
    conda:
        "../envs/sample.yaml"
    params:
        seed=config["seed"],
        backend=config["generation"]["backend"],
        tier=config["generation"]["tier"],
        generator=generator_fingerprint(),
        llm=generation_params(config),
    script:
        "../scripts/generate_tasks.py"
