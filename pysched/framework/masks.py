"""Helpers for filters whose verdict is a per-node mask (labels, taints, flags)."""

from __future__ import annotations

from pysched.framework.interfaces import FilterResult
from pysched.framework.nodetable import Bools


def mask_result(mask: Bools, reason: str, *, unresolvable: bool) -> FilterResult:
    return FilterResult(mask, {reason: ~mask}, unresolvable)
