"""Find out why a trainable cannot be pickled (as ``ray.tune.utils.diagnose_serialization``).

fasttune ships a trainable to its worker processes with cloudpickle. A function
defined in a script or notebook is pickled *by value*, together with every
global it reads and every variable its closure holds; one lock, open file or
database connection among them makes the whole trainable unpicklable. The
helpers here pickle each captured variable on its own and name the culprits.
"""

from __future__ import annotations

import dis
import functools
import inspect
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import cloudpickle

__all__ = ["captured_variables", "diagnose_serialization", "find_unserializable"]

_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL"})
# How deep diagnose_serialization follows a failing helper function or class
# to the variable that actually breaks it.
_MAX_DEPTH = 4

# (kind, name, value): kind is e.g. "global variable"; name is what the user wrote.
Captured = tuple[str, str, Any]


def _pickle_error(value: Any) -> str | None:
    """Pickle ``value`` with cloudpickle; return None if it works, else the error text."""
    try:
        cloudpickle.dumps(value)
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    """``code`` and every code object nested in it (lambdas, inner functions, ...)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _function_captures(func: types.FunctionType) -> list[Captured]:
    """Globals, closure variables and argument defaults that pickling ``func`` takes along."""
    out: list[Captured] = []
    # Globals: names the bytecode reads or writes as globals, nested code included
    # (inspect.getclosurevars only looks at the outermost code object).
    seen: set[str] = set()
    for code in _code_objects(func.__code__):
        for ins in dis.get_instructions(code):
            name = ins.argval
            if ins.opname in _GLOBAL_OPS and isinstance(name, str) and name not in seen:
                seen.add(name)
                if name in func.__globals__:
                    out.append(("global variable", name, func.__globals__[name]))
    # Closure variables, skipping cells that are not filled yet.
    for name, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
        try:
            out.append(("closure variable", name, cell.cell_contents))
        except ValueError:
            continue
    params = list(inspect.signature(func).parameters.values())
    for param in params:
        if param.default is not inspect.Parameter.empty:
            out.append(("argument default", param.name, param.default))
    # Attributes set on the function object (``train.data = ...``) travel too.
    out += [("function attribute", k, v) for k, v in vars(func).items()]
    return out


def _pickled_by_reference(cls: type) -> bool:
    """True if cloudpickle stores ``cls`` as an import path rather than by value."""
    module_name = getattr(cls, "__module__", None)
    by_value = getattr(cloudpickle.cloudpickle, "_PICKLE_BY_VALUE_MODULES", ())
    if module_name is None or module_name == "__main__" or module_name in by_value:
        return False
    target: Any = sys.modules.get(module_name)
    for part in cls.__qualname__.split("."):
        target = getattr(target, part, None)  # "<locals>" ends the walk with None
    return target is cls


def _class_captures(cls: type) -> list[Captured]:
    """What pickling the class ``cls`` by value takes along: methods' captures and attributes.

    Base classes that cloudpickle stores by import path (``fasttune.Trainable``,
    library classes) are skipped: nothing of theirs travels with the pickle.
    """
    out: list[Captured] = []
    for klass in cls.__mro__:
        if _pickled_by_reference(klass):
            continue
        for attr_name, attr in vars(klass).items():
            funcs: list[Any] = []
            if isinstance(attr, (staticmethod, classmethod)):
                funcs = [attr.__func__]
            elif isinstance(attr, property):
                funcs = [f for f in (attr.fget, attr.fset, attr.fdel) if f is not None]
            elif inspect.isfunction(attr):
                funcs = [attr]
            elif attr_name.startswith("__") and attr_name.endswith("__"):
                continue  # __module__, __doc__, __dict__, __weakref__, ...
            else:
                out.append(("class attribute", f"{klass.__name__}.{attr_name}", attr))
            for func in funcs:
                if inspect.isfunction(func):
                    out.extend(_function_captures(func))
    return out


def captured_variables(obj: Any) -> list[Captured]:
    """List what pickling ``obj`` by value also pickles, one entry per variable.

    Covers the globals a function reads (also from nested lambdas and inner
    functions), its closure variables, argument defaults and attributes, the arguments of a
    ``functools.partial``, the instance of a bound method, and for classes the
    class attributes and what their methods capture.

    Args:
        obj: A function, method, partial, class or callable object.

    Returns:
        ``(kind, name, value)`` triples, without repeats, in discovery order.

    Example:
        >>> scale = 2.0
        >>> def train(config):
        ...     return config["x"] * scale
        >>> [(kind, name) for kind, name, _ in captured_variables(train)]
        [('global variable', 'scale')]
    """
    found: list[Captured] = []
    if isinstance(obj, functools.partial):
        found += captured_variables(obj.func)
        found += [("partial argument", f"args[{i}]", a) for i, a in enumerate(obj.args)]
        found += [("partial argument", k, v) for k, v in obj.keywords.items()]
    elif inspect.ismethod(obj):
        found.append(("bound instance", "self", obj.__self__))
        found += captured_variables(obj.__func__)
    elif inspect.isfunction(obj):
        found += _function_captures(obj)
    elif inspect.isclass(obj):
        found += _class_captures(obj)
    else:
        found += [("attribute", k, v) for k, v in getattr(obj, "__dict__", {}).items()]
        found += _class_captures(type(obj))
    unique: dict[tuple[str, str], Captured] = {}
    for kind, name, value in found:
        unique.setdefault((kind, name), (kind, name, value))
    return list(unique.values())


def _root_causes(value: Any, depth: int, visiting: set[int]) -> list[str]:
    """Paths such as ``"helper -> lock"`` from a failing helper to what breaks it."""
    if depth >= _MAX_DEPTH or id(value) in visiting:
        return []
    is_code = isinstance(value, (types.FunctionType, types.MethodType, functools.partial))
    if not (is_code or inspect.isclass(value)):
        return []  # a plain object that fails is itself the culprit
    visiting = visiting | {id(value)}
    paths: list[str] = []
    for _, name, inner in captured_variables(value):
        if _pickle_error(inner) is None:
            continue
        deeper = _root_causes(inner, depth + 1, visiting)
        paths += [f"{name} -> {p}" for p in deeper] or [name]
    return paths


def find_unserializable(obj: Any) -> dict[str, str]:
    """Name each variable captured by ``obj`` that cloudpickle cannot pickle.

    Args:
        obj: A trainable function or class, or any callable.

    Returns:
        Variable name to the pickling error, e.g.
        ``{"lock": "TypeError: cannot pickle '_thread.lock' object"}``; empty if
        every captured variable pickles on its own.

    Example:
        >>> import threading
        >>> lock = threading.Lock()
        >>> def train(config):
        ...     with lock:
        ...         pass
        >>> list(find_unserializable(train))
        ['lock']
    """
    failures: dict[str, str] = {}
    for _, name, value in captured_variables(obj):
        error = _pickle_error(value)
        if error is not None and name not in failures:
            failures[name] = error
    return failures


def diagnose_serialization(trainable: Callable[..., Any] | type) -> bool | set[str]:
    """Explain why a trainable cannot be pickled for the worker processes.

    Pickles ``trainable`` with cloudpickle. If that fails, pickles each variable
    it captures (globals it reads, closure variables, argument defaults, and for
    class trainables their attributes and methods' globals) and prints which
    fail and what to do about them.

    Args:
        trainable: The function or ``Trainable`` class given to ``Tuner``.

    Returns:
        True if the trainable pickles. Otherwise the set of names of the captured
        variables that do not pickle (empty if none of them alone is the cause).

    Example:
        >>> import threading
        >>> event = threading.Event()
        >>> def train(config):
        ...     event.wait(0)
        >>> diagnose_serialization(train)  # doctest: +ELLIPSIS
        Trying to serialize <function train at ...>...
        ...
        {'event'}
    """
    print(f"Trying to serialize {trainable!r}...")
    error = _pickle_error(trainable)
    if error is None:
        print("Serialization succeeded!")
        return True
    print(f"Serialization failed: {error}")
    name = getattr(trainable, "__qualname__", None) or type(trainable).__name__
    print(f"Checking each variable that `{name}` captures (globals, closure variables, ...):")

    by_kind: dict[str, list[tuple[str, Any]]] = {}
    for kind, var_name, value in captured_variables(trainable):
        by_kind.setdefault(kind, []).append((var_name, value))
    failed: set[str] = set()
    for kind, entries in by_kind.items():
        print(f"  {len(entries)} {kind}(s):")
        for var_name, value in entries:
            var_error = _pickle_error(value)
            if var_error is None:
                print(f"    {var_name} ({type(value).__name__}) ... PASSED")
                continue
            failed.add(var_name)
            print(f"    {var_name} ({type(value).__name__}) ... FAILED")
            print(f"      {var_error}")
            for path in _root_causes(value, 1, {id(trainable)}):
                print(f"      caused by: {var_name} -> {path}")

    if not failed:
        print(
            "Each captured variable pickles on its own, so the cause is elsewhere (for example "
            "an object whose class defines a failing __reduce__). Try "
            f"`cloudpickle.dumps(...)` on parts of `{name}` to narrow it down."
        )
        return failed
    print(
        f"Variable(s) {sorted(failed)} cannot be serialized, so `{name}` cannot be sent to "
        "the worker processes. Create these objects inside the trainable instead of capturing "
        "them (at the top of the function, or in Trainable.setup()). For large data that does "
        "pickle, pass it with `fasttune.with_parameters(trainable, name=value)`."
    )
    return failed
