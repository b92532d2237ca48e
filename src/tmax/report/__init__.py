"""The paper's tables and figures rebuilt from this workflow's results (paper §5),
with the published numbers beside them: :mod:`tmax.report.tables` (cells and their
renderings), :mod:`tmax.report.ingest` (trials in), :mod:`tmax.report.labels`
(released runs' names onto the paper's), :mod:`tmax.report.build` (the paper's
tables), :mod:`tmax.report.figures`, :mod:`tmax.report.provenance` and
:mod:`tmax.report.stage` (what the workflow and ``tmax report`` call); and the trials
and RL steps behind them as tidy tables for pandas, :mod:`tmax.report.tidy`."""
