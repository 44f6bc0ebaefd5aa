"""Read downloaded pickles without running code from them.

`pickle.load` calls whatever callable a pickle names, so a malicious file runs code the
moment it is read. The BIRCO release files (and their rank files) are plain dicts, lists,
strings and numbers, plus numpy scalars: query ids are `numpy.str_`, written as
`numpy.core.multiarray.scalar(numpy.dtype('<U..'), b'...')`. `RestrictedUnpickler`
resolves exactly those two constructors and refuses every other name. The constructors
are wrapped so that they also refuse object and structured dtypes: what comes out is a
plain string, number or boolean scalar, never an arbitrary object.
"""
from __future__ import annotations

import io
import os
import pickle
from pathlib import Path

from boolcl.errors import DataError

# numpy < 2 writes `numpy.core.multiarray`, numpy >= 2 writes `numpy._core.multiarray`.
SCALAR_NAMES = {("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar")}
DTYPE_NAMES = {("numpy", "dtype")}
ALLOWED = SCALAR_NAMES | DTYPE_NAMES
SCALAR_KINDS = frozenset("biufcUS")  # bool, ints, floats, complex, str, bytes (no object, void, datetime)


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle names a class or function outside the allow-list."""

    def __init__(self, module: str, name: str, reason: str | None = None):
        allowed = ", ".join(sorted(f"{m}.{n}" for m, n in ALLOWED))
        reason = reason or f"it names {module}.{name}, which is not on the allow-list ({allowed})"
        super().__init__(f"refusing to unpickle: {reason}; a pickle can run arbitrary code, "
                         "so nothing outside the allow-list is ever loaded")
        self.module, self.name = module, name


def _checked_dtype(dtype):
    import numpy as np

    if not isinstance(dtype, np.dtype):
        raise UnsafePickleError("numpy", "dtype", f"a numpy dtype was expected, got {type(dtype).__name__}")
    if dtype.kind not in SCALAR_KINDS or dtype.hasobject or dtype.fields is not None:
        raise UnsafePickleError("numpy", "dtype", f"dtype {dtype!s} is not a plain string/number/bool dtype")
    return dtype


def _safe_dtype(spec, *flags):
    """`numpy.dtype(spec, align, copy)` for a string spec of a plain scalar type only."""
    import numpy as np

    if not isinstance(spec, str) or not all(isinstance(f, bool) for f in flags) or len(flags) > 2:
        raise UnsafePickleError("numpy", "dtype", f"unexpected dtype arguments {(spec, *flags)!r}")
    return _checked_dtype(np.dtype(spec, *flags))


def _safe_scalar(dtype, data=None):
    """`numpy.core.multiarray.scalar(dtype, bytes)` for plain scalar dtypes only."""
    try:
        from numpy._core.multiarray import scalar
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import scalar
    _checked_dtype(dtype)
    if not isinstance(data, bytes):
        raise UnsafePickleError("numpy.core.multiarray", "scalar",
                                f"scalar data must be bytes, got {type(data).__name__}")
    return scalar(dtype, data)


class RestrictedUnpickler(pickle.Unpickler):
    """An Unpickler that builds only builtin containers/values and numpy scalars and dtypes."""

    def find_class(self, module: str, name: str):
        if (module, name) in SCALAR_NAMES:
            return _safe_scalar
        if (module, name) in DTYPE_NAMES:
            return _safe_dtype
        raise UnsafePickleError(module, name)

    def persistent_load(self, pid):
        raise UnsafePickleError("<persistent id>", str(pid)[:40], "it uses persistent ids")


def loads(data: bytes):
    """Unpickle bytes with `RestrictedUnpickler`; raises UnsafePickleError on a forbidden name."""
    return RestrictedUnpickler(io.BytesIO(data)).load()


def load(path: str | os.PathLike):
    """Unpickle a file safely; any problem is a DataError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, None, "file not found")
    try:
        with path.open("rb") as fh:
            return RestrictedUnpickler(fh).load()
    except UnsafePickleError as e:
        raise DataError(path, None, str(e)) from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError,
            KeyError, MemoryError) as e:
        raise DataError(path, None, f"not a readable pickle ({type(e).__name__}: {e})") from None
