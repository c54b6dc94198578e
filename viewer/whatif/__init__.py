"""What if: replay a traced run under other settings and predict its step time (docs/WHATIF.md)."""
from viewer.whatif.predict import ModelError, fit, predict
from viewer.whatif.replay import Settings

__all__ = ["ModelError", "Settings", "fit", "predict"]
