"""`python -m pysched`, the same as the `pysched` command."""

import sys

from pysched.cmd.cli import main

sys.exit(main())
