"""Task families of the data_science domain, one folder each, shaped like the Harbor task
it renders (``instruction.md``, ``solution/``, ``tests/``; tmax.generate.templates):
:mod:`classifier` (a classifier judged by held-out accuracy), :mod:`eval_metrics`
(confusion matrix, per-class scores, summary and ROC AUC of a prediction file),
:mod:`slide_stats` (statistics and blob counting on PNG slides) and :mod:`feature_prep`
(leakage-free feature preparation). They register in this order, which decides which
family renders a spec."""

from tmax.generate.families.data_science import (  # noqa: F401, I001  (registers them, in this order)
    classifier,
    eval_metrics,
    slide_stats,
    feature_prep,
)
