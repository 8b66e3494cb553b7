"""python -m kiln_models: the same command line as python -m kiln_models.llama."""

import sys

from .llama import main

sys.exit(main())
