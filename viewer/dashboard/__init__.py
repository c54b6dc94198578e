"""The Dash dashboard over loaded runs: ``ringscope view RUN_DIR``. Every figure it shows is an analysis of a
``viewer.Run`` (the same values as ``ringscope summarize``), every table one the registry declares.

Modules: ``serve`` (command line, app factory entry), ``app`` (wiring), ``layout`` (page skeletons),
``overview`` and ``pages`` (each page's body), ``callbacks_*`` (small callbacks), ``components`` (declared
tables, cards, written empty states), ``fig_*`` (figures from analyses), ``timeline_agg`` (server-side
aggregation of the timeline), ``registry`` (the runs held) and ``paths`` (the picker, confined to the trace root).
"""
