# Stage 5 (paper §4): per model size, an optional SFT warm-up on reference solutions,
# then DPPO on the clean, non-held-out generated tasks. Checkpoints and metrics live in
# results/rl/<model>/ beside the declared outputs: a failed or preempted job resumes.


rule sft_warmup:
    input:
        tasks="results/decontam/clean_tasks.parquet",
        model=model_dir,
    output:
        model=directory("results/models/{model}-sft"),
        curve="results/rl/{model}/sft_curve.json",
    log:
        "results/logs/rl/{model}/sft.log",
    benchmark:
        "results/benchmarks/rl/{model}/sft.tsv"
    conda:
        "../envs/evaluate.yaml"
    threads: 2  # torch CPU threads for the tiny model; at most --cores
    params:
        rl=lambda wildcards: sft_params(wildcards.model),
        heldout_fraction=EVALUATION["heldout_fraction"],
        seed=config["seed"],
    script:
        "../scripts/sft_warmup.py"


rule rl_train:
    input:
        tasks="results/decontam/clean_tasks.parquet",
        shards=task_shard_dirs(),
        model=rl_start_model,
        toolbox="results/images/toolbox.json",
        images=expand("results/images/domains/{domain}.json", domain=DOMAINS),
    output:
        model=directory("results/models/{model}-tmax"),
        curve="results/rl/{model}/curve.json",
    log:
        "results/logs/rl/{model}/train.log",
    benchmark:
        "results/benchmarks/rl/{model}/train.tsv"
    conda:
        "../envs/evaluate.yaml"
    threads: 8  # at most --cores locally; the slurm profile sets cpus_per_task
    params:
        rl=lambda wildcards: rl_config(wildcards.model),
        heldout_fraction=EVALUATION["heldout_fraction"],
        seed=config["seed"],
        backend=config["sandbox"]["backend"],
        run_dir=lambda wildcards: f"results/rl/{wildcards.model}/run",
    script:
        "../scripts/rl_train.py"
