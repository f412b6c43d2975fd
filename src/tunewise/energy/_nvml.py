"""GPU energy from NVIDIA's management library."""

from __future__ import annotations

from collections.abc import Sequence

from tunewise.energy._base import EnergyMeter, MeterUnavailable, Reading


class Nvml(EnergyMeter):
    """Sums the energy counters of the NVIDIA GPUs ``devices`` (indices; all when ``None``) through NVML
    (``nvmlDeviceGetTotalEnergyConsumption``: millijoules since the driver loaded, Volta and newer).

    Needs the ``nvidia-ml-py`` package (imported here, not when :mod:`tunewise.energy` is), which tunewise
    does not require; unavailable without it, without a GPU or driver, or on a GPU without an energy counter.
    """

    name = "nvml"

    def __init__(self, *, devices: Sequence[int] | None = None):
        self.devices = devices
        try:
            import pynvml
        except ImportError as err:
            raise MeterUnavailable("energy meter 'nvml' needs the nvidia-ml-py package "
                                   "(pip install nvidia-ml-py)") from err
        self._nvml = pynvml
        try:
            pynvml.nvmlInit()
            indices = range(pynvml.nvmlDeviceGetCount()) if devices is None else devices
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices]
            self._start = [pynvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self._handles]
        except pynvml.NVMLError as err:
            raise MeterUnavailable(f"energy meter 'nvml': {err}") from err
        if not self._handles:
            pynvml.nvmlShutdown()
            raise MeterUnavailable("energy meter 'nvml': no NVIDIA GPU")
        self._joules = 0.0

    def read(self) -> Reading:
        millijoules = sum(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h) - start
                          for h, start in zip(self._handles, self._start, strict=True))
        self._joules = max(self._joules, millijoules / 1e3)
        return Reading(self._joules, estimated=False)

    def close(self) -> None:
        self._nvml.nvmlShutdown()
