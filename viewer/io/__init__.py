"""What every trace reader shares: JSON trace files, the C event scanner (``_eventscan``), column helpers."""
