"""Results of plugin calls. Expected rejections are values, never exceptions."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def ok(self) -> bool:
        code = self.code
        return code is Code.SUCCESS or code is Code.SKIP  # identity: no enum hashing per call

    @property
    def rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        if self.plugin or self.code is Code.SUCCESS:
            return self
        return Status(self.code, self.reasons, plugin)


SUCCESS = Status()
SKIP = Status(Code.SKIP)


def unschedulable(*reasons: str, plugin: str = "") -> Status:
    return Status(Code.UNSCHEDULABLE, reasons, plugin)


def unresolvable(*reasons: str, plugin: str = "") -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons, plugin)


def error(*reasons: str, plugin: str = "") -> Status:
    return Status(Code.ERROR, reasons, plugin)
