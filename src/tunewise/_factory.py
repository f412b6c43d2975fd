"""One ``create()`` for every extension point: a name or an instance in, a checked instance out."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from tunewise.errors import InputError


def arguments(cls: type) -> list[str]:
    """The keyword arguments ``cls`` takes, following ``**kwargs`` up to the base class that uses them.

    A TVM ``@derived_object`` class is read through the user class it wraps (its ``_cls``).
    """
    cls = getattr(cls, "_cls", cls)
    names: list[str] = []
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        params = list(inspect.signature(vars(klass)["__init__"]).parameters.values())[1:]
        names += [p.name for p in params
                  if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in names]
        if all(p.kind is not p.VAR_KEYWORD for p in params):
            break
    return names


def create(kind: str, registry: dict[str, Callable[[], type]], name, kwargs: dict, instance: type):
    """Build ``registry[name]()(**kwargs)``; ``name`` may already be an ``instance``, returned unchanged.

    ``registry`` maps names to functions returning the class, so heavy imports happen on use. Raises
    :class:`~tunewise.errors.InputError` on an unknown name, an argument the class does not take (the
    message lists the valid ones), or a bad value (``TypeError``/``ValueError`` from the constructor).
    """
    if isinstance(name, instance):
        if kwargs:
            raise InputError(f"arguments {sorted(kwargs)} given with a {kind} instance; pass a name")
        return name
    if not isinstance(name, str) or name not in registry:
        raise InputError(f"unknown {kind} {name!r}; valid names: {', '.join(registry)}")
    cls = registry[name]()
    valid = arguments(cls)
    unknown = sorted(set(kwargs) - set(valid))
    if unknown:
        takes = ", ".join(valid) if valid else "no arguments"
        raise InputError(f"{kind} {name!r} got unknown arguments {unknown}; it takes: {takes}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        raise InputError(f"{kind} {name!r}: {err}") from err
