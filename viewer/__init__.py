"""ringscope's viewer: loaders, merge, analyses, the CLI and the dashboard; ``from viewer import Run`` (lazily)."""


def __getattr__(name):
    if name == "Run":
        from viewer.run import Run

        return Run
    raise AttributeError(f"module 'viewer' has no attribute {name!r}")
