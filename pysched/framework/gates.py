"""Which pods a plugin has anything to do for, so the engine can leave it out for the others.

A PreFilter or PreScore plugin that returns Skip for every pod lacking certain features
(`pysched.api.features`) may say so with `acts_on`; the engine then treats it as having returned
Skip for such pods without calling it (its Filter or Score is left out too); the same holds at
PreEnqueue, Reserve, Permit and PreBind, for a plugin that does nothing there for such pods. The
answer may depend on cluster state (pod affinity must see every pod once a placed pod carries
anti-affinity): `acts_on` is read again whenever the node table's generation changes or the
plugin calls `PodGates.changed`. Saying too little is a bug that places pods against their
constraints, so each plugin's tests check that it skips every pod its gate leaves out.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pysched.api.features import EVERY_POD, PodFeatures


@runtime_checkable
class FeatureGated(Protocol):
    def acts_on(self) -> PodFeatures:
        """The features a pod needs at least one of for this plugin to do anything for it now."""
        ...


class PodGates:
    """The version of every gated plugin's answer in one profile: plugins bump it when their
    answer may have changed for a reason other than the nodes."""

    __slots__ = ("version",)

    def __init__(self) -> None:
        self.version = 0

    def changed(self) -> None:
        self.version += 1


def acts_on(plugin: object) -> PodFeatures:
    """What a plugin of any kind acts on (every pod, unless it says otherwise)."""
    return plugin.acts_on() if isinstance(plugin, FeatureGated) else EVERY_POD
