import sys

from perf.harness.command import main

sys.exit(main())
