"""No import cycles, module by module, imports inside functions included (grimp's graph, the one
import-linter checks the contracts in pyproject.toml on). import-linter's own acyclic_siblings
contract misses a cycle through a package's ``__init__`` (``collectives`` -> ``collectives.elastic``
-> ``collectives.elastic.run`` -> ``collectives`` was one), hence this test."""
from __future__ import annotations

import grimp

ACYCLIC = ("collectives", "tracer", "viewer")   # the packages held to it


def import_cycles(graph: grimp.ImportGraph, packages) -> list[tuple[str, ...]]:
    """One shortest cycle per set of modules that import each other in a circle, as
    ``(a, b, ..., a)``, starting from the modules of ``packages``."""
    found: dict[frozenset, tuple[str, ...]] = {}
    for a in sorted(m for m in graph.modules if m.split(".")[0] in packages):
        for b in sorted(graph.find_modules_directly_imported_by(a)):
            back = graph.find_shortest_chain(importer=b, imported=a)
            if back:
                cycle = (a, *back)
                found.setdefault(frozenset(cycle), cycle)
    return sorted(found.values())


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph("collectives", "tracer", "viewer", cache_dir=None)


def test_no_import_cycles():
    cycles = import_cycles(_graph(), ACYCLIC)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_imports_inside_functions_count_and_a_cycle_is_reported():
    graph = _graph()
    # the registry imports the ring backend inside a function: it is an edge all the same
    assert graph.direct_import_exists(importer="collectives.backends.registry",
                                      imported="collectives.backends.ring")
    graph.add_import(importer="tracer.vocab", imported="collectives.engine")
    cycles = import_cycles(graph, ACYCLIC)
    assert ("collectives.engine", "tracer.vocab", "collectives.engine") in cycles
    assert all(c[0] == c[-1] for c in cycles)
