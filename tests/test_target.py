import re

import pytest

from tunewise import target
from tunewise.errors import TargetError


def test_default_target_is_this_cpu_with_its_mcpu():
    import tvm

    t = target.resolve(None)
    assert t.kind.name == "llvm"
    assert str(t.attrs["mcpu"]) == tvm.target.codegen.llvm_get_system_cpu()
    assert target.resolve("llvm").attrs["mcpu"] == t.attrs["mcpu"]


def test_the_host_target_has_every_vector_instruction_set_the_cpu_reports():
    # a virtual machine may present a CPU under an older model number than its features: the target adds them
    import tvm
    import tvm_ffi
    from tvm.target import codegen

    reported = tvm_ffi.get_global_func("tvm.codegen.llvm.GetHostCPUFeatures")()
    vector = {f for f, on in reported.items() if on and re.match(r"(avx|amx|fma)", f)}
    assert vector <= set(codegen.llvm_get_cpu_features(tvm.target.Target(target.host_cpu())))


def test_json_target_is_taken_as_given():
    t = target.resolve('{"kind": "llvm", "num-cores": 1}')
    assert "mcpu" not in t.attrs and int(t.attrs["num-cores"]) == 1
    assert target.resolve(t) is t  # a resolved target passes through (prepare.load_model takes either)


@pytest.mark.parametrize("bad,message", [
    ("llvm -mcpu=znver3", "option strings like 'llvm -mcpu=znver3' are not accepted by TVM 0.27: give a JSON object"),
    ("{not json", "target is not valid JSON: Expecting property name enclosed in double quotes at column 2"),
    ("no-such-kind", 'bad target \'no-such-kind\': Target kind "no-such-kind" is not defined'),
    ('{"kind": "llvm", "bogus": 1}', 'bad target \'{"kind": "llvm", "bogus": 1}\': Unknown config option \'bogus\''),
    ('{"kind": "llvm", "mcpu": "znver9"}', "unknown mcpu 'znver9': LLVM knows "),  # else: generic code, silently
])
def test_bad_targets_raise_one_line_errors(bad, message):
    with pytest.raises(TargetError, match=re.escape(message)) as err:
        target.resolve(bad)
    assert "\n" not in str(err.value)


def test_a_target_with_more_cores_than_this_process_may_use_is_refused():
    usable = target.usable_cores()
    target.check_cores(target.resolve(f'{{"kind": "llvm", "num-cores": {usable}}}'))
    with pytest.raises(TargetError, match=re.escape(f"asks for {usable + 1} cores (num-cores), and this process "
                                                    f"may use {usable}: tunewise measures where it runs")):
        target.check_cores(target.resolve(f'{{"kind": "llvm", "num-cores": {usable + 1}}}'))


def test_device_type_is_not_the_target_kind():
    assert target.device_type(target.resolve(None)) == "cpu"


@pytest.mark.parametrize("mcpu, expected", [("sapphirerapids", "amx"), ("znver4", "avx512-vnni"),
                                            ("skylake-avx512", "avx512"), ("znver2", "avx2"),
                                            ("core2", None)])
def test_isa_class_follows_the_cpus_features(mcpu, expected):
    import tvm

    assert target.isa_class(tvm.target.Target({"kind": "llvm", "mcpu": mcpu})) == expected


def test_isa_class_of_a_gpu_is_none():
    import tvm

    assert target.isa_class(tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})) is None
