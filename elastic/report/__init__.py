"""The comparison report: the ASA paper's experiment, its Table 1, figures, CSV and one HTML page.

Modules: :mod:`~elastic.report.scaling` (workflows at a peak core count), :mod:`~elastic.report.experiment`
(workflows x cores x strategies, repeated runs, one learner per strategy), :mod:`~elastic.report.records`
(what is kept of each run), :mod:`~elastic.report.tables` (Table 1), :mod:`~elastic.report.figures`
(breakdowns, Gantt charts, convergence), :mod:`~elastic.report.html` (the offline page) and
:mod:`~elastic.report.write` (everything into one directory). ``elastic compare --out DIR`` runs it.
"""

from __future__ import annotations

__all__: list[str] = []
