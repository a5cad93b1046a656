"""Every test process logs as the commands other than `run` do: structlog at warning, so the
engine's per-cycle debug lines print nothing (a test that looks at logs captures them)."""

import logging

import structlog

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
