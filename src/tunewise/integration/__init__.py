"""Integrations with other frameworks, each a thin driver of tunewise's public API.

- :mod:`tunewise.integration.torch_compile`: ``torch.compile(model, backend="tunewise", options={...})``.
"""
