"""CPU package energy from the Linux powercap interface to Intel/AMD RAPL counters."""

from __future__ import annotations

import re
from pathlib import Path

from tunewise.energy._base import EnergyMeter, MeterUnavailable, Reading

_PACKAGE_ZONE = re.compile(r"intel-rapl:(\d+)")


class Rapl(EnergyMeter):
    """Sums the energy counters of the CPU packages under ``root`` (``/sys/class/powercap``): the top-level
    zones ``intel-rapl:<n>`` (AMD processors are named so too), each with ``energy_uj``, a microjoule counter
    that wraps to 0 after ``max_energy_range_uj``. A reading lower than the one before it has wrapped once,
    and ``max_energy_range_uj`` is added to it, so the meter must be read at least once per wrap period (tens
    of minutes at full load). The platform zone ``psys`` (which contains the packages) and the sub-zones
    (cores, uncore, DRAM) are left out: the packages are counted once.

    Unavailable where no package zone is there, or its counters cannot be read (recent kernels let only root
    read ``energy_uj``).
    """

    name = "rapl"

    def __init__(self, *, root: str = "/sys/class/powercap"):
        self.root = root
        zones = []
        base = Path(root)
        for path in base.iterdir() if base.is_dir() else ():
            match = _PACKAGE_ZONE.fullmatch(path.name)
            if match and _name(path) != "psys":
                zones.append((int(match[1]), path))
        if not zones:
            raise MeterUnavailable(f"energy meter 'rapl': no RAPL package zone under {root}")
        self._zones = [path for _, path in sorted(zones)]
        try:
            self._ranges = [_number(path / "max_energy_range_uj") for path in self._zones]
            self._last = [_number(path / "energy_uj") for path in self._zones]
        except OSError as err:
            raise MeterUnavailable(f"energy meter 'rapl': cannot read {err.filename}: {err.strerror}") from err
        except ValueError as err:
            raise MeterUnavailable(f"energy meter 'rapl': {err}") from err
        self._microjoules = 0

    def read(self) -> Reading:
        for i, path in enumerate(self._zones):
            now = _number(path / "energy_uj")
            delta = now - self._last[i]
            if delta < 0:
                delta += self._ranges[i]
            self._microjoules += delta
            self._last[i] = now
        return Reading(self._microjoules / 1e6, estimated=False)


def _number(path: Path) -> int:
    text = path.read_text().strip()
    if not text.isdigit():
        raise ValueError(f"{path} holds {text!r}, not a counter")
    return int(text)


def _name(zone: Path) -> str:
    try:
        return (zone / "name").read_text().strip()
    except OSError:
        return ""
