"""``python -m viewer.cli ARGS``: the ``ringscope`` command."""
import sys

from viewer.cli import main

sys.exit(main())
