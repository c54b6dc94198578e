"""ringscope's viewer: loaders, merge, analyses, the summarizer CLI and the dashboard.

``from viewer import Run`` is the notebook entry point (imported lazily so that light commands stay
light).
"""


def __getattr__(name):
    if name == "Run":
        from viewer.run import Run

        return Run
    raise AttributeError(f"module 'viewer' has no attribute {name!r}")
