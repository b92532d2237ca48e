"""Task families of the data_querying domain, one folder each, shaped like the task it
renders (``instruction.md``, ``solution/``, ``tests/``): a shop's sales reports over a
sqlite database (``sales_report``), graph questions over an edge list
(``graph_queries``), stock queries answered by a tool and a service (``stock_lookup``)
and clickstream reports (``event_funnel``)."""

# the families register in the order of their classes in the module they came from
# isort: off
from tmax.generate.families.data_querying import sales_report  # noqa: F401  (registers it)
from tmax.generate.families.data_querying import graph_queries  # noqa: F401
from tmax.generate.families.data_querying import stock_lookup  # noqa: F401
from tmax.generate.families.data_querying import event_funnel  # noqa: F401

# isort: on
