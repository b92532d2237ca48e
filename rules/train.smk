# Stage 5 (paper §4): per model size, an optional SFT warm-up on reference solutions,
# then DPPO on the clean, non-held-out generated tasks, or, for a model with
# `rl_data: <dataset>` (the RL-dataset ablation), on that prior dataset's converted
# tasks that pass the same contamination rule. Checkpoints and metrics live in
# results/rl/<model>/ beside the declared outputs: a failed or preempted job resumes.


rule sft_warmup:
    input:
        unpack(training_task_files),
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
        source=training_task_params,
    script:
        "../scripts/sft_warmup.py"


rule rl_train:
    input:
        unpack(training_task_source),
        model=rl_start_model,
        toolbox="results/images/toolbox.json",
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
        source=training_task_params,
    script:
        "../scripts/rl_train.py"
