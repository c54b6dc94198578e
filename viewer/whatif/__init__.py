"""What if: replay a traced run under other settings and predict its step time (docs/WHATIF.md).

``predict(run, Settings(fusion_threshold=0))["predicted_step_ms"]``; ``tune`` searches the settings.
"""
from viewer.whatif.predict import ModelError, fit, predict
from viewer.whatif.replay import Settings

__all__ = ["ModelError", "Settings", "fit", "predict"]
