# Stage 7 (paper §5): the paper's tables and figures rebuilt from this run's outputs,
# the published numbers beside them, and the provenance of each; the trials and the RL
# steps behind them as tidy tables for pandas (evaluations.parquet, training.parquet).
# Tables recompute pass@1 from the trials themselves under report.statistics (default:
# the paper's).

from tmax.report.stage import figure_files, table_files  # noqa: E402
from tmax.report.tables import packaged_paper_values_path  # noqa: E402

REPORT_TABLES = table_files("results/report/tables", REPORT["formats"])
REPORT_FIGURES = figure_files("results/report/figures", "png")
REPORT_FIGURES_PDF = figure_files("results/report/figures", "pdf")


rule report_tables:
    input:
        runs=report_run_files(),
        tasks="results/tasks/report.json",
        decontam="results/decontam/report.json",
        removed="results/decontam/removed.json",
        paper=project_path(packaged_paper_values_path()),
        datasets=dataset_measure_files(),
    output:
        [
            (
                report(
                    path,
                    caption="report/tables.rst",
                    category="Tables",
                    labels={"table": Path(path).stem},
                )
                if path.endswith(".csv")
                else path
            )
            for path in REPORT_TABLES
        ],
        combined="results/report/tables.md",
        evaluations="results/report/evaluations.parquet",
    log:
        "results/logs/report/tables.log",
    conda:
        "../envs/report.yaml"
    params:
        formats=REPORT["formats"],
        reference_model=report_reference_model(),
        datasets=list(DATASET_SOURCES),
        ablations=rl_dataset_ablations(),
        statistics=REPORT["statistics"],
    script:
        "../scripts/report_tables.py"


rule report_figures:
    input:
        curves=expand("results/rl/{model}/curve.json", model=report_trained_models()),
        selections=expand(
            "results/rl/{model}/selection.json", model=report_trained_models()
        ),
        tasks="results/tasks/report.json",
        decontam="results/decontam/report.json",
    output:
        [
            report(
                path,
                caption="report/figures.rst",
                category="Figures",
                labels={"figure": Path(path).stem},
            )
            for path in REPORT_FIGURES
        ],
        REPORT_FIGURES_PDF,
        training="results/report/training.parquet",
    log:
        "results/logs/report/figures.log",
    conda:
        "../envs/report.yaml"
    params:
        models=report_trained_models(),
        rl={
            name: {
                "loss": rl_section(name).loss,
                "group_size": rl_section(name).group_size,
            }
            for name in report_trained_models()
        },
    script:
        "../scripts/report_figures.py"


rule report_provenance:
    """Digests of every table, figure and input, and the config as it is when this job
    runs. Its inputs change whenever a result does; a config edit that changes no
    result (concurrency, layout, timeouts) reruns nothing, this job included."""
    input:
        results=REPORT_TABLES
        + REPORT_FIGURES
        + REPORT_FIGURES_PDF
        + [
            rules.report_tables.output.evaluations,
            rules.report_figures.output.training,
        ],
        inputs=rules.report_tables.input.runs
        + rules.report_figures.input.curves
        + [
            "results/tasks/report.json",
            "results/decontam/report.json",
            "results/decontam/removed.json",
            project_path(packaged_paper_values_path()),
        ]
        + dataset_measure_files(),
    output:
        json=report(
            "results/report/provenance.json",
            caption="report/provenance.rst",
            category="Provenance",
        ),
        config=report(
            "results/report/config.yaml",
            caption="report/config.rst",
            category="Provenance",
        ),
    log:
        "results/logs/report/provenance.log",
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/report_provenance.py"
