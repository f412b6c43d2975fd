"""Energy of a GPU and its host together: one meter per device, read side by side."""

from __future__ import annotations

from collections.abc import Sequence

from tunewise.energy._base import EnergyMeter, Reading

SEPARATOR = "+"


class Combined(EnergyMeter):
    """The sum of ``meters`` (one per device: NVML for the GPU, RAPL or the CPU-time estimate for the host),
    named after them joined by ``+`` (``"nvml+estimate"``). A reading is estimated when any part is, and
    :meth:`parts` says what each part measured and how."""

    def __init__(self, *, meters: Sequence[EnergyMeter]):
        if len(meters) < 2:
            raise ValueError(f"a combined meter needs two meters or more, got {len(meters)}")
        self.meters = tuple(meters)
        self.name = SEPARATOR.join(meter.name for meter in self.meters)

    def parts(self) -> dict[str, Reading]:
        """Each meter's reading, by its name (meters of one name are summed)."""
        parts: dict[str, Reading] = {}
        for meter in self.meters:
            reading, before = meter.read(), parts.get(meter.name)
            parts[meter.name] = reading if before is None else Reading(before.joules + reading.joules,
                                                                        before.estimated or reading.estimated)
        return parts

    def read(self) -> Reading:
        readings = self.parts().values()
        return Reading(sum(r.joules for r in readings), estimated=any(r.estimated for r in readings))

    def close(self) -> None:
        for meter in self.meters:
            meter.close()
