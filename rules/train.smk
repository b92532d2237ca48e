# Stage 5 (paper §4): per model size, an optional SFT warm-up on reference solutions,
# then DPPO on the clean, non-held-out generated tasks, or, for a model with
# `rl_data: <dataset>` (the RL-dataset ablation), on that prior dataset's converted
# tasks that pass the same contamination rule. Checkpoints and metrics live in
# results/rl/<model>/ beside the declared outputs: a failed or preempted job resumes.
# The trained model is the snapshot that scores best on rl.select_benchmark (paper:
# TB-Lite, every 100 steps), or the last step's when rl.select_every is not set.


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


rule sft_control:
    """The control arm (evaluation variant control): the SFT model trained on by SFT
    for as many learner tokens as its RL run took, so that a held-out gain can be
    credited to RL rather than to more training."""
    input:
        unpack(training_task_files),
        model="results/models/{model}-sft",
        rl_curve="results/rl/{model}/curve.json",
    output:
        model=directory("results/models/{model}-control"),
        curve="results/rl/{model}/control_curve.json",
    log:
        "results/logs/rl/{model}/control.log",
    benchmark:
        "results/benchmarks/rl/{model}/control.tsv"
    priority: 10  # its evaluations wait for it; the RL model's do not
    conda:
        "../envs/evaluate.yaml"
    threads: 2
    params:
        rl=lambda wildcards: sft_params(wildcards.model),
        heldout_fraction=EVALUATION["heldout_fraction"],
        seed=config["seed"],
        source=training_task_params,
    script:
        "../scripts/sft_control.py"


rule rl_plan:
    """The memory plan of a model's layout (tmax.rl.launch.plan), on the submitting machine.
    rl_train needs it only when the plan does not fit (rl_plan_gate): then this job
    fails, naming the knob, before the training job asks Slurm for nodes."""
    output:
        "results/rl/{model}/plan.json",
    log:
        "results/logs/rl/{model}/plan.log",
    localrule: True
    conda:
        "../envs/evaluate.yaml"
    params:
        model=lambda wildcards: MODELS[wildcards.model],
        rl=lambda wildcards: rl_config(wildcards.model),
        hardware=config.get("hardware", {}),
    script:
        "../scripts/rl_plan.py"


rule rl_train:
    input:
        unpack(training_task_files),
        unpack(training_task_support),
        model=rl_start_model,
        toolbox="results/images/toolbox.json",
        plan=rl_plan_gate,
    output:
        # Servable weights every rl.select_every steps and at the last step.
        snapshots=directory("results/rl/{model}/snapshots"),
        curve="results/rl/{model}/curve.json",
    log:
        "results/logs/rl/{model}/train.log",
    benchmark:
        "results/benchmarks/rl/{model}/train.tsv"
    # The critical path: started before the evaluation jobs that became ready with it.
    priority: 10
    conda:
        "../envs/evaluate.yaml"
    # rl.threads, at most --cores locally; the slurm profile sets cpus_per_task
    threads: lambda wildcards: rl_section(wildcards.model).threads
    resources:
        # A Slurm job of rl.training_nodes + rl.inference_nodes nodes (ignored locally).
        nodes=lambda wildcards: training_job(wildcards.model)["nodes"],
        tasks=lambda wildcards: training_job(wildcards.model)["tasks"],
    params:
        recipe=rl_recipe_params,
        heldout_fraction=EVALUATION["heldout_fraction"],
        seed=config["seed"],
        backend=config["sandbox"]["backend"],
        run_dir=lambda wildcards: f"results/rl/{wildcards.model}/run",
        source=training_task_params,
    script:
        "../scripts/rl_train.py"


rule evaluate_snapshot:
    input:
        tasks=lambda wildcards: benchmark_manifest(
            rl_section(wildcards.model).select_benchmark
        ),
        snapshots="results/rl/{model}/snapshots",
        gate=trained_model_gate,
        toolbox="results/images/toolbox.json",
        images=lambda wildcards: benchmark_images(
            rl_section(wildcards.model).select_benchmark
        ),
    output:
        "results/rl/{model}/selection/step{step}/run{run}.json",
    log:
        run="results/logs/rl/{model}/selection/step{step}/run{run}.log",
        server="results/logs/rl/{model}/selection/step{step}/run{run}.server.log",
    benchmark:
        "results/benchmarks/rl/{model}/selection/step{step}/run{run}.tsv"
    conda:
        "../envs/evaluate.yaml"
    threads: eval_concurrency()
    params:
        model=lambda wildcards: {"name": f"{wildcards.model}-tmax-step{wildcards.step}"},
        harness=lambda wildcards: rl_section(wildcards.model).select_harness,
        evaluation=lambda wildcards: eval_run_settings(
            rl_section(wildcards.model).select_harness
        ),
        backend=config["sandbox"]["backend"],
    script:
        "../scripts/evaluate.py"


checkpoint select_checkpoint:
    input:
        snapshots="results/rl/{model}/snapshots",
        gate=trained_model_gate,
        runs=selection_run_files,
    output:
        model=directory("results/models/{model}-tmax"),
        selection="results/rl/{model}/selection.json",
        # What evaluations of the model read: the chosen weights' sha256. A rerun that
        # picks the same snapshot (more selection runs, say) writes it unchanged.
        pointer="results/rl/{model}/model.json",
    log:
        "results/logs/rl/{model}/select.log",
    localrule: True
    conda:
        "../envs/evaluate.yaml"
    params:
        steps=lambda wildcards: selection_steps(wildcards.model),
        selected=lambda wildcards: selection_runs(wildcards.model),
        on=lambda wildcards: selection_settings(wildcards.model),
    script:
        "../scripts/select_checkpoint.py"
