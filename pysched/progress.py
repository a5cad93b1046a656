"""The training-side progress helper, `pysched_progress` (its own small distribution,
`pysched-progress`, standard library only), under pysched's name for code that imports it so."""

from pysched_progress import *  # noqa: F403
from pysched_progress import __all__ as __all__
