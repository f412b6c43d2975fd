"""Importing a model: a ``torch.nn.Module``, a ``.pt2`` file or an ONNX file into Relax, with its reference outputs.

:mod:`~tunewise.importing.frontend` reads the model, :mod:`~tunewise.importing.repairs` rewrites what TVM's torch
importer gets wrong, and :mod:`~tunewise.importing.import_cache` keeps imported models on disk.
"""
