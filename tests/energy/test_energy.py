"""Energy meters: RAPL on a fake powercap tree, the CPU-time estimate on real work, NVML's absence, create()."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tunewise import energy
from tunewise.energy import CpuTimeEstimate, MeterUnavailable, Rapl
from tunewise.errors import InputError


def zone(root, name, label, energy_uj, max_uj=1_000_000):
    path = root / name
    path.mkdir()
    (path / "name").write_text(label + "\n")
    (path / "energy_uj").write_text(f"{energy_uj}\n")
    (path / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return path


def set_counter(path, energy_uj):
    (path / "energy_uj").write_text(f"{energy_uj}\n")


def test_rapl_sums_the_packages_and_survives_a_counter_wrap(tmp_path):
    package0 = zone(tmp_path, "intel-rapl:0", "package-0", 900_000)
    package1 = zone(tmp_path, "intel-rapl:1", "package-1", 10_000)
    core = zone(tmp_path, "intel-rapl:0:0", "core", 5_000)  # inside package 0: not counted again
    psys = zone(tmp_path, "intel-rapl:2", "psys", 0)  # the whole platform: not counted
    meter = energy.create("rapl", root=str(tmp_path))
    assert meter.read() == energy.Reading(0.0, estimated=False)
    set_counter(package0, 950_000)
    set_counter(package1, 30_000)
    set_counter(core, 900_000)
    set_counter(psys, 900_000)
    assert meter.read().joules == pytest.approx(0.07)  # 50 000 + 20 000 uJ
    set_counter(package0, 150_000)  # wrapped at 1 000 000: 50 000 + 150 000 uJ more
    assert meter.read().joules == pytest.approx(0.27)
    set_counter(package0, 200_000)
    assert meter.read().joules == pytest.approx(0.32)


def test_rapl_is_unavailable_without_package_zones_or_readable_counters(tmp_path):
    with pytest.raises(MeterUnavailable, match="no RAPL package zone"):
        Rapl(root=str(tmp_path))
    with pytest.raises(MeterUnavailable, match="no RAPL package zone"):
        Rapl(root=str(tmp_path / "absent"))
    package = zone(tmp_path, "intel-rapl:0", "package-0", 0)
    (package / "energy_uj").unlink()
    with pytest.raises(MeterUnavailable) as err:
        Rapl(root=str(tmp_path))
    assert "cannot read" in str(err.value) and "energy_uj" in str(err.value) and "\n" not in str(err.value)


def burn(cpu_seconds):
    """Keep this process's CPU busy for ``cpu_seconds`` of its own CPU time."""
    end = time.process_time() + cpu_seconds
    while time.process_time() < end:
        pass


@pytest.mark.timing  # it bounds the process's CPU time: threads left busy by earlier tests in a worker add to it
def test_the_estimate_is_labelled_and_grows_with_the_cpu_work_of_the_process_and_its_children():
    meter = CpuTimeEstimate(watts_per_core=20.0)
    first = meter.read()
    assert first.estimated
    burn(0.3)
    own = meter.read()
    # psutil counts CPU time in clock ticks (10 ms): allow a tick or two either way
    assert 0.28 * 20.0 <= own.joules - first.joules <= 0.4 * 20.0
    code = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", code], check=True)  # a child, ended and waited for
    child = meter.read()
    assert 0.28 * 20.0 <= child.joules - own.joules <= 2.0 * 20.0 and child.estimated  # its start-up included


def test_nvml_without_its_package_is_unavailable_in_one_line():
    try:
        import pynvml  # noqa: F401
    except ImportError:
        with pytest.raises(MeterUnavailable) as err:
            energy.create("nvml")
        assert str(err.value) == "energy meter 'nvml' needs the nvidia-ml-py package (pip install nvidia-ml-py)"
    else:
        pytest.skip("nvidia-ml-py is installed")


def test_auto_takes_the_first_meter_that_can_be_read(tmp_path):
    assert isinstance(energy.create("auto", root=str(tmp_path)), CpuTimeEstimate)
    zone(tmp_path, "intel-rapl:0", "package-0", 0)
    assert isinstance(energy.create("auto", root=str(tmp_path)), Rapl)
    assert energy.create("auto", root=str(tmp_path / "none"), watts_per_core=3.0).watts_per_core == 3.0


@pytest.mark.parametrize(("name", "kwargs", "message"), [
    ("nope", {}, "unknown energy meter 'nope'; valid names: auto, rapl, nvml, estimate"),
    ("estimate", {"watts_per_core": 0}, "watts_per_core must be a positive number"),
    ("estimate", {"watts": 5}, "it takes: watts_per_core, pid"),
    ("auto", {"watts": 5}, "energy meter 'auto' got unknown arguments ['watts']"),
])
def test_create_rejects_bad_input_in_one_line(name, kwargs, message):
    with pytest.raises(InputError) as err:
        energy.create(name, **kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_gpu_and_its_host_are_metered_side_by_side_and_labelled(tmp_path):
    package = zone(tmp_path, "intel-rapl:0", "package-0", 0)
    gpu_side, host = energy.create("rapl", root=str(tmp_path)), energy.create("estimate")
    meter = energy.Combined(meters=[gpu_side, host])
    assert meter.name == "rapl+estimate" and energy.is_valid(meter.name) and not energy.is_valid("rapl+wattmeter")
    set_counter(package, 2_000_000)
    time.sleep(0.01)
    sum(i * i for i in range(300_000))  # CPU work the estimate sees
    parts = meter.parts()
    assert parts["rapl"] == energy.Reading(2.0, estimated=False) and parts["estimate"].estimated
    reading = meter.read()
    assert reading.estimated and reading.joules == pytest.approx(2.0 + host.read().joules, abs=0.5)
    assert energy.describe(meter.name) == "CPU packages, RAPL + CPU, estimated from CPU time"
    with pytest.raises(ValueError, match="two meters or more"):
        energy.Combined(meters=[host])


def test_a_gpu_run_meters_its_host_where_nvml_cannot_be_read():
    try:
        energy.create("nvml")
    except MeterUnavailable:
        assert energy.for_device("auto", gpu=True).name == energy.create("auto").name
        with pytest.raises(MeterUnavailable, match="nvml"):
            energy.create("nvml+estimate")
    else:
        assert energy.for_device("auto", gpu=True).name in ("nvml+rapl", "nvml+estimate")
    assert energy.for_device("estimate", gpu=True).name == "estimate"


class _Counter(energy.EnergyMeter):
    """An NVML stand-in that can always be read."""

    name = "nvml"

    def read(self):
        return energy.Reading(1.0, estimated=False)


def test_a_cpu_run_is_never_metered_by_a_gpus_nvml(monkeypatch):
    monkeypatch.setitem(energy._REGISTRY, "nvml", _Counter)
    assert energy.for_device("auto", gpu=False).name in ("rapl", "estimate")  # "auto" alone could pick NVML
    assert energy.for_device("nvml", gpu=False).name == "nvml"  # asked for by name


def test_a_gpu_runs_host_is_its_cpu_never_the_gpu_again(monkeypatch):
    monkeypatch.setitem(energy._REGISTRY, "nvml", _Counter)
    meter = energy.for_device("auto", gpu=True)
    assert meter.name in ("nvml+rapl", "nvml+estimate")  # the host's CPU, where "auto" alone could pick NVML
    assert meter.parts()["nvml"] == energy.Reading(1.0, estimated=False)


class WallClock(energy.EnergyMeter):
    """A device drawing 100 W whenever the clock runs: a stand-in for a GPU's NVML counter."""

    name = "wall"

    def __init__(self):
        self._start = time.perf_counter()

    def read(self):
        return energy.Reading(100.0 * (time.perf_counter() - self._start), estimated=False)


@pytest.mark.tvm
def test_a_runs_energy_by_device_covers_its_tuning_as_its_total_does(monkeypatch, tmp_path):
    """The parts of a combined meter's total (a GPU's and its host's) are read over the tuning, as the total
    is, not over the compilation and timing after it."""
    import tunewise
    from tunewise.budget import Budget

    monkeypatch.setitem(energy._REGISTRY, "wall", WallClock)
    tuned = tunewise.tune("tiny-mlp", budget=Budget(max_trials=4), trials_per_slot=2, compare_torch=False,
                          timing_rounds=3, progress=False, energy_meter="wall+estimate",
                          store=f"sqlite:///{tmp_path}/tunewise.db", output=str(tmp_path / "out"))
    assert set(tuned.joules_parts) == {"wall", "estimate"}
    assert sum(tuned.joules_parts.values()) == pytest.approx(tuned.joules, rel=0.1)
    # the wall meter's 100 W over the tuning phase, not over the compilation and timing after it
    assert tuned.joules_parts["wall"] == pytest.approx(100.0 * tuned.phase_seconds["tune"], rel=0.05)
    assert tuned.phase_seconds["compile"] > 0.05 * tuned.phase_seconds["tune"]  # what the check tells apart
