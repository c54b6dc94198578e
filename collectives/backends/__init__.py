"""Collective backends: ``ring`` and ``mpi`` built in; others register through :mod:`.registry`."""
