"""User-facing errors: each carries one line of text, and the command line exits with code 2 on them.

Anything else that escapes is a bug in tunewise and is shown as such.
"""


class TunewiseError(Exception):
    """Base class of the errors a user can cause and fix; ``str(err)`` is the whole message."""

    exit_code = 2


class InputError(TunewiseError):
    """A bad argument: unknown model or scheduler name, missing file, bad shape, bad budget."""


class ModelImportError(TunewiseError):
    """The model could not be imported: corrupt file, unsupported operators, dynamic shapes."""


class TargetError(TunewiseError):
    """The compilation target is malformed or not supported on this machine."""


class VerificationError(TunewiseError):
    """The compiled model's outputs differ from the reference's beyond tolerance."""
