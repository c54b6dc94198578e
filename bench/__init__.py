"""ringscope's benchmarks: every performance goal of issue 8 measured side by side in one run.

Run ``.venv/bin/python -m bench`` (or ``ringscope bench``) from the repository root; see
``bench/README.md`` for the groups, the targets and the latest results. Not part of the test suite.
"""
