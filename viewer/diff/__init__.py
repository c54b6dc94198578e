"""What changed between two runs (``ringscope diff``, docs/DIFF.md): pure functions over two ``viewer.Run``\\s,
one part per module, put together by :func:`viewer.diff.compare.diff_runs`."""
