"""The Dash dashboard over a run's tables: ``ringscope view RUN_DIR``.

Modules: ``serve`` (command line, app factory entry), ``app`` (wiring), ``layout`` (page skeletons),
``callbacks_*`` (small callbacks), ``fig_*`` (plain figure builders from tables to plotly figures),
``derive`` (table reshaping for the views), ``timeline_agg`` (server-side aggregation of the timeline),
``registry`` and ``paths`` (loading runs, confined to the trace root).
"""
