"""`python -m bench`: the whole suite (see bench/run.py)."""

import sys

from .run import main

sys.exit(main())
