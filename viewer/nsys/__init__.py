"""Nsight Systems overlay: GPU kernels from ``nsys export --type sqlite`` under each rank's phases."""
