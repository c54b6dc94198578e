"""What if: replay a traced run under other settings and predict its step time (issue 30).

    from viewer.whatif import Settings, predict
    result = predict(run, Settings(fusion_threshold=0))  # run: a viewer.Run
    result["predicted_step_ms"], result["timeline"]     # a DataFrame that can be drawn

Modules: :mod:`.rebuild` (the run's steps from its tables), :mod:`.costs` (a fused response's cost),
:mod:`.policy` (the coordinator's policy, with :mod:`tracer.fusion_rules`), :mod:`.replay`
(the fixed point per step), :mod:`.predict` (results and timelines), :mod:`.tune` (grid search).
"""
from viewer.whatif.predict import ModelError, fit, predict
from viewer.whatif.replay import Settings

__all__ = ["ModelError", "Settings", "fit", "predict"]
