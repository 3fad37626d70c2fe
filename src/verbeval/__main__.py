"""``python -m verbeval``: the ``verbeval`` command."""

import sys

from verbeval.cli import main

if __name__ == "__main__":
    sys.exit(main())
