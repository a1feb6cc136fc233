"""``python -m ctxlab``: the ``ctxlab`` command (`ctxlab.cli.main`)."""

import sys

from ctxlab.cli import main

if __name__ == "__main__":
    sys.exit(main())
