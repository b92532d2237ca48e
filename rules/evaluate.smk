# Stage 6 (paper §5): every model under every harness on every benchmark, several
# runs; pass@1 is the mean ± std of per-run accuracy. Trials live beside the
# declared outputs (results/eval/.../trials-*/), so a killed job resumes them.


rule tiny_model:
    output:
        directory("results/models/{tiny}"),
    log:
        "results/logs/models/{tiny}.log",
    benchmark:
        "results/benchmarks/models/{tiny}.tsv"
    conda:
        "../envs/evaluate.yaml"
    params:
        seed=config["seed"],
    script:
        "../scripts/build_tiny_model.py"


checkpoint benchmark_tasks:
    input:
        unpack(benchmark_inputs),
    output:
        "results/eval/benchmarks/{benchmark}.json",
    log:
        "results/logs/eval/benchmarks/{benchmark}.log",
    benchmark:
        "results/benchmarks/eval/benchmarks/{benchmark}.tsv"
    conda:
        "../envs/evaluate.yaml"
    params:
        benchmark=benchmark_params,
    script:
        "../scripts/benchmark_tasks.py"


rule evaluate:
    input:
        unpack(eval_model_input),
        tasks=lambda wildcards: benchmark_manifest(wildcards.benchmark),
        gate=eval_model_gate,
        toolbox="results/images/toolbox.json",
        images=lambda wildcards: benchmark_images(wildcards.benchmark),
    output:
        "results/eval/{eval_model}/{benchmark}/{harness}/run{run}.json",
    log:
        run="results/logs/eval/{eval_model}/{benchmark}/{harness}/run{run}.log",
        server="results/logs/eval/{eval_model}/{benchmark}/{harness}/run{run}.server.log",
    benchmark:
        "results/benchmarks/eval/{eval_model}/{benchmark}/{harness}/run{run}.tsv"
    conda:
        "../envs/evaluate.yaml"
    threads: eval_concurrency()
    params:
        model=eval_model_entry,
        evaluation=lambda wildcards: eval_run_settings(wildcards.harness),
        backend=config["sandbox"]["backend"],
    script:
        "../scripts/evaluate.py"


rule eval_metrics:
    input:
        eval_run_files,
    output:
        json="results/eval/{eval_model}/{benchmark}/{harness}/metrics.json",
        markdown="results/eval/{eval_model}/{benchmark}/{harness}/metrics.md",
    log:
        "results/logs/eval/{eval_model}/{benchmark}/{harness}/metrics.log",
    conda:
        "../envs/evaluate.yaml"
    params:
        statistics=config["report"]["statistics"],
    script:
        "../scripts/eval_metrics.py"


rule eval_summary:
    input:
        eval_metric_files(),
    output:
        json="results/eval/summary.json",
        markdown="results/eval/summary.md",
    log:
        "results/logs/eval/summary.log",
    conda:
        "../envs/evaluate.yaml"
    script:
        "../scripts/eval_summary.py"
