import numpy as np
import pytest
import torch

from tunewise import zoo
from tunewise.errors import InputError, ModelImportError
from tunewise.importing import frontend


def _onnx_matmul(path, batch_dim=1):
    import onnx
    from onnx import TensorProto, helper

    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 4], np.arange(32, dtype=np.float32).tolist())
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
        "mm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch_dim, 8])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [batch_dim, 4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.save(model, path)
    return path


def test_zoo_models_build_with_seeded_weights():
    a, (x,) = zoo.get("tiny-cnn", seed=3)
    b, (y,) = zoo.get("tiny-cnn", seed=3)
    assert torch.equal(x, y)
    assert torch.equal(a(x), b(y))
    c, _ = zoo.get("tiny-cnn", seed=4)
    assert not torch.equal(a(x), c(x))


def test_unknown_zoo_name_lists_the_choices():
    with pytest.raises(InputError, match="resnet18"):
        frontend.load("resnet19")


def test_torch_module_import_keeps_reference_outputs():
    model, inputs = zoo.get("tiny-mlp")
    imported = frontend.load(model, example_inputs=inputs)
    assert imported.input_shapes == ((1, 64),)
    np.testing.assert_allclose(imported.reference_outputs[0], model(*inputs).detach().numpy())
    assert "main" in [gv.name_hint for gv in imported.mod.get_global_vars()]


def _check_samples(imported, run):
    """Each sample's inputs are new draws shaped like the example's, and its outputs ``run`` of them."""
    assert len(imported.samples) == frontend.SAMPLES
    drawn = [inputs[0] for inputs, _ in imported.samples]
    assert all(x.shape == imported.inputs[0].shape and x.dtype == imported.inputs[0].dtype for x in drawn)
    assert len({x.tobytes() for x in [imported.inputs[0], *drawn]}) == 1 + frontend.SAMPLES
    for inputs, outputs in imported.samples:
        np.testing.assert_allclose(outputs[0], run(inputs[0]), rtol=1e-5, atol=1e-6)


def test_every_import_draws_further_samples_with_the_framework_s_outputs(tmp_path):
    model, inputs = zoo.get("tiny-mlp")
    torch_run = lambda x: model(torch.from_numpy(x)).detach().numpy()  # noqa: E731
    _check_samples(frontend.load(model, example_inputs=inputs), torch_run)
    path = str(tmp_path / "mlp.pt2")
    torch.export.save(torch.export.export(model, inputs), path)
    _check_samples(frontend.load(path), torch_run)
    weight = np.arange(32, dtype=np.float32).reshape(8, 4)
    _check_samples(frontend.load(_onnx_matmul(str(tmp_path / "mm.onnx"))), lambda x: np.maximum(x @ weight, 0))


def test_pt2_file_import(tmp_path):
    model, inputs = zoo.get("tiny-mlp")
    path = str(tmp_path / "mlp.pt2")
    torch.export.save(torch.export.export(model, inputs), path)
    imported = frontend.load(path)
    assert imported.name == "mlp" and imported.input_shapes == ((1, 64),)
    np.testing.assert_allclose(imported.reference_outputs[0], model(torch.from_numpy(imported.inputs[0]))
                               .detach().numpy(), rtol=1e-6)


def test_onnx_import_uses_onnxruntime_reference(tmp_path):
    imported = frontend.load(_onnx_matmul(str(tmp_path / "mm.onnx")))
    x = imported.inputs[0]
    expected = np.maximum(x @ np.arange(32, dtype=np.float32).reshape(8, 4), 0)
    np.testing.assert_allclose(imported.reference_outputs[0], expected, rtol=1e-5)


def test_onnx_dynamic_shape_needs_input_shape(tmp_path):
    path = _onnx_matmul(str(tmp_path / "dyn.onnx"), batch_dim="N")
    with pytest.raises(ModelImportError, match=r"^ONNX input 'x' has dynamic shape \['N', 8\]; give it with "
                                               r"--input-shape x=1,8 \(its dynamic dimensions set to 1 here"):
        frontend.load(path)
    assert frontend.load(path, input_shapes={"x": (3, 8)}).input_shapes == ((3, 8),)
    with pytest.raises(InputError, match="unknown ONNX inputs"):
        frontend.load(path, input_shapes={"y": (3, 8)})


def test_corrupt_and_missing_files(tmp_path):
    corrupt = tmp_path / "broken.onnx"
    corrupt.write_bytes(b"\x00\x01 definitely not protobuf")
    with pytest.raises(ModelImportError, match="not a valid ONNX model"):
        frontend.load(str(corrupt))
    with pytest.raises(InputError, match="no such model file"):
        frontend.load(str(tmp_path / "absent.onnx"))
    (tmp_path / "model.h5").write_text("x")
    with pytest.raises(InputError, match="unsupported model file"):
        frontend.load(str(tmp_path / "model.h5"))


def test_unsupported_operator_is_named():
    class Odd(torch.nn.Module):
        def forward(self, x):
            return torch.special.bessel_j0(x)

    with pytest.raises(ModelImportError, match="bessel_j0"):
        frontend.load(Odd(), example_inputs=(torch.randn(4),))


@pytest.mark.parametrize("spec,shape", [("x=1,3,8,8", (1, 3, 8, 8))])
def test_parse_input_shapes(spec, shape):
    assert frontend.parse_input_shapes([spec]) == {"x": shape}
    for bad in ["x", "x=1,a", "=1,2", "x=0,3"]:
        with pytest.raises(InputError, match=f"bad --input-shape '{bad}': expected NAME=D1,D2,..."):
            frontend.parse_input_shapes([bad])


def test_input_shape_cannot_change_a_static_shape(tmp_path):
    path = _onnx_matmul(str(tmp_path / "static.onnx"))
    with pytest.raises(InputError, match=r"^ONNX input 'x' has the static shape \(1, 8\); --input-shape x=3,8 "
                                         r"cannot change it$"):
        frontend.load(path, input_shapes={"x": (3, 8)})
    assert frontend.load(path, input_shapes={"x": (1, 8)}).input_shapes == ((1, 8),)
    dynamic = _onnx_matmul(str(tmp_path / "dyn.onnx"), batch_dim="N")
    with pytest.raises(InputError, match=r"^ONNX input 'x' has shape \['N', 8\]; .* got \[3, 9\]$"):
        frontend.load(dynamic, input_shapes={"x": (3, 9)})

    model, inputs = zoo.get("tiny-mlp")
    pt2 = str(tmp_path / "mlp.pt2")
    torch.export.save(torch.export.export(model, inputs), pt2)
    with pytest.raises(InputError, match=r"mlp.pt2 has a fixed shape for input 'x' \(it takes x \(1, 64\)\); "
                                         r"--input-shape applies to dynamic ONNX inputs only"):
        frontend.load(pt2, input_shapes={"x": (4, 64)})
    with pytest.raises(InputError, match=r"mlp.pt2 has no input 'y' \(it takes x \(1, 64\)\)"):
        frontend.load(pt2, input_shapes={"y": (1, 64)})
    assert frontend.load(pt2, input_shapes={"x": (1, 64)}).input_shapes == ((1, 64),)
    with pytest.raises(InputError, match=r"^tiny-mlp has a fixed shape for input 'x'"):
        frontend.load("tiny-mlp", input_shapes={"x": (2, 64)})


def test_onnx_pads_computed_from_constants_are_folded_before_import(causal_onnx):
    import onnx

    path = causal_onnx
    pad = next(n for n in onnx.load(path).graph.node if n.op_type == "Pad")
    initializers = {i.name for i in onnx.load(path).graph.initializer}
    assert pad.input[1] not in initializers  # the pads are a node's output, which TVM's importer refuses
    imported = frontend.load(str(path))
    assert imported.reference_outputs[0].shape == (1, 4, 32)


@pytest.mark.tvm
def test_what_the_torch_importer_gets_wrong_computes_what_torch_does(tmp_path):
    import tvm
    from tvm import relax

    class Repaired(torch.nn.Module):  # see tunewise.importing.repairs
        def forward(self, x):
            upsampled = torch.nn.functional.interpolate(x, scale_factor=3, mode="linear")
            extrema = x.amax(-1), x.amin((0, 2), keepdim=True), x.amax(), torch.logsumexp(x, 1), *x.min(1)
            spreads = *torch.var_mean(x, 1), *torch.var_mean(x, (0, 2), correction=0, keepdim=True)
            return (x[:, -1] * 2, x[-1], x[..., -3], x[:, [-1, 0, -2]], upsampled, *extrema, *spreads,
                    x + torch.arange(4) / 8)

    x = torch.randn(3, 5, 4)
    path = str(tmp_path / "repaired.pt2")
    torch.export.save(torch.export.export(Repaired(), (x,)), path)
    for imported in (frontend.load(Repaired(), example_inputs=(x,)), frontend.load(path)):
        vm = relax.VirtualMachine(relax.build(imported.mod, target="llvm"), tvm.cpu())
        outputs = vm["main"](*(tvm.runtime.tensor(a) for a in imported.inputs))
        assert len(outputs) == len(imported.reference_outputs) == 16
        for got, want in zip(outputs, imported.reference_outputs, strict=True):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.tvm
def test_outputs_in_dicts_are_checked_in_the_order_export_flattens_them():
    import tvm
    from tvm import relax

    class Named(torch.nn.Module):
        def forward(self, x):
            return {"logits": x * 2, "extra": {"mean": x.mean(), "rows": [x[0], x[1] + 1]}}

    imported = frontend.load(Named(), example_inputs=(torch.randn(2, 3),))
    x = imported.inputs[0]
    wanted = (x * 2, x.mean(), x[0], x[1] + 1)
    assert len(imported.reference_outputs) == 4
    vm = relax.VirtualMachine(relax.build(imported.mod, target="llvm"), tvm.cpu())
    for got, reference, want in zip(vm["main"](tvm.runtime.tensor(x)), imported.reference_outputs, wanted,
                                    strict=True):
        np.testing.assert_allclose(reference, want, rtol=1e-6)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_tensors_numpy_cannot_hold_are_one_line():
    model = torch.nn.Linear(4, 2).to(torch.bfloat16)
    with pytest.raises(ModelImportError, match="output 0 is bfloat16, which numpy, and so the output check, cannot"):
        frontend.load(model, example_inputs=(torch.randn(1, 4, dtype=torch.bfloat16),))
