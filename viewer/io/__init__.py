"""What every trace reader shares: Chrome-trace JSON files (:mod:`chrome_json`), the C scanner of an
event array (``_eventscan``) and column helpers (:mod:`columns`). Each format's reader lives with it:
:mod:`viewer.ringscope`, :mod:`viewer.kineto`, :mod:`viewer.horovod`, :mod:`viewer.nsys`."""
