"""Args shared by LeastAllocated and MostAllocated: how cpu and memory weigh in the mean."""

from __future__ import annotations

from dataclasses import dataclass

from pysched.framework.registry import ArgsError


@dataclass(frozen=True, slots=True)
class ResourceWeightArgs:
    cpu_weight: int = 1
    memory_weight: int = 1

    def validate(self) -> None:
        for field, value in (("cpuWeight", self.cpu_weight), ("memoryWeight", self.memory_weight)):
            if not 0 <= value <= 100:
                raise ArgsError(field, f"must be an integer from 0 to 100, got {value}")
        if self.cpu_weight == 0 and self.memory_weight == 0:
            raise ArgsError("cpuWeight", "cpuWeight and memoryWeight cannot both be 0")
