"""What if: replay a traced run under other settings and predict its step time (issue 30).

    from viewer.whatif import Settings, predict
    result = predict(run.tables, Settings(fusion_threshold=0))
    result["predicted_step_ms"], result["timeline"]     # a DataFrame that can be drawn

Modules: :mod:`.rebuild` (the run's steps from its tables), :mod:`.costs` (alpha-beta fit),
:mod:`.policy` (the coordinator's policy, with :mod:`tracer.fusion_rules`), :mod:`.replay`
(the fixed point per step), :mod:`.predict` (results and timelines), :mod:`.tune` (grid search).
"""
from viewer.whatif.predict import ModelError, fit, predict
from viewer.whatif.replay import Settings

__all__ = ["ModelError", "Settings", "fit", "predict"]
