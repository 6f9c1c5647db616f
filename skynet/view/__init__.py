"""The run viewer: every item, every candidate, cost by role, two runs side by side.

`skynet view` serves these pages on 127.0.0.1 from runs.db as it is written
(skynet.view.server); `skynet show RUN --html FILE` writes the same pages as one self-contained
file (skynet.view.pages.render_document); `skynet show RUN_A RUN_B` compares two runs
(skynet.view.compare). Plots are matplotlib's, inline SVG (skynet.view.plots).

Nothing is imported here: skynet.runs.report draws its curve with skynet.view.plots, and the
pages read the report.
"""

DEFAULT_PORT = 7575  # `skynet view`'s port on 127.0.0.1 (inspect view's too)
