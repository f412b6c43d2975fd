"""User-facing errors: each carries one line of text, and the command line exits with code 2 on them.

Anything else that escapes is a bug in tunewise and is shown as such.
"""


def message_line(err: BaseException | str, *, last: bool = False) -> str:
    """The first (or ``last``) line of an error or error text; an exception without text gives its type name.

    TVM and torch errors carry tracebacks and context in their text; a user sees one line of it.
    """
    text = str(err).strip()
    if not text:
        return "" if isinstance(err, str) else type(err).__name__
    return text.splitlines()[-1 if last else 0].strip()


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


class ImportMismatchError(VerificationError):
    """The model compiled without tuning records already differs from the reference: TVM computes an operator
    otherwise than the model's framework, and no tuning can mend that."""


class StoreError(InputError):
    """The store cannot be used: not a tunewise store, a corrupt file, a full disk, an unreachable server."""


class RunBusyError(TunewiseError):
    """Another live process owns the run (see :meth:`tunewise.stores.Store.claim_run`)."""


class ModelInputError(InputError):
    """A compiled model was called with inputs it cannot take: their number, shape, dtype, or indices out of
    range."""


class UnsupportedOperatorError(ModelImportError):
    """The model has an operator that TVM imports but cannot compile for the target at any graph level."""


class ClusterLostError(TunewiseError):
    """The Ray cluster a fleet tuned on lost a process or a node it needs; the fleet's runs keep every slot they
    stored, and the message says how to continue them."""
