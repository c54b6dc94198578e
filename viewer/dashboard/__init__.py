"""The Dash dashboard over loaded runs: ``ringscope view RUN_DIR``. Every figure it shows is an analysis of a
``viewer.Run`` (the same values as ``ringscope summarize``), every table one the registry declares.

Modules: ``serve`` (command line), ``app`` (wiring), ``layout`` (page skeletons), ``overview`` and ``pages``
(each page's body), ``callbacks_*``, ``components`` (declared tables, cards, empty states), ``figures`` and
``fig_timeline`` (figures from analyses), ``timeline_agg`` (the timeline's server-side aggregation), ``registry``
(the runs held) and ``paths`` (the picker, confined to the trace root).
"""
