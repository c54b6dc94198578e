"""The Kineto (torch.profiler) part of ``ringscope summarize``: its analyses and its JSON block."""
from __future__ import annotations

from viewer.kineto import collectives, overlap, steps, stragglers, streams, temporal
from viewer.summary import records


def is_kineto(run) -> bool:
    """The run holds at least one Kineto trace (alone, or joined to our trace of its rank)."""
    return has_kineto(run.tables)


def has_kineto(tables) -> bool:
    """Kineto events are in these tables (only they carry ``launch_ns``)."""
    return bool((tables.ranks["format"] == "kineto").any()) or "launch_ns" in tables.events.columns


def analyses(tables) -> dict:
    """Every Kineto analysis of a run, keyed ``kineto_<name>`` (docs/KINETO.md)."""
    coll = collectives.collectives_table(tables)
    launches = stragglers.collective_launches(tables)
    return {
        "kineto_temporal": temporal.temporal_breakdown(tables),
        "kineto_overlap": overlap.comm_comp_overlap(tables),
        "kineto_collectives": coll,
        "kineto_collectives_summary": collectives.collectives_summary(coll),
        "kineto_steps": steps.step_breakdown(tables),
        "kineto_streams": streams.stream_table(tables),
        "kineto_stragglers": stragglers.collective_stragglers(tables, launches),
        "kineto_rank_stragglers": stragglers.rank_summary(tables, launches),
    }


def summary(tables: dict, top: int = 10) -> dict:
    """The ``kineto`` block of ``summarize --json``."""
    return {
        "temporal_breakdown": records(tables["kineto_temporal"]),
        "overlap": records(tables["kineto_overlap"]),
        "collectives": records(tables["kineto_collectives_summary"]),
        "steps": records(tables["kineto_steps"]),
        "streams": records(tables["kineto_streams"]),
        "stragglers": records(tables["kineto_stragglers"], top),
        "rank_stragglers": records(tables["kineto_rank_stragglers"]),
    }
