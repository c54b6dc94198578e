"""Nsight Systems overlay: GPU kernels from ``nsys export --type sqlite`` under each rank's phases.

:mod:`reader` reads an export, :mod:`mapping` tells which process is which rank, :mod:`align` puts its
clock on the run's axis, :mod:`overlay` makes the GPU lanes; :mod:`attach` does all of it.
"""
