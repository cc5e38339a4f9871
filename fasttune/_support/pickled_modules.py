"""The modules loading a pickle would import, read from its opcodes (nothing is loaded).

A pickled trainable names the modules its worker will import to load it: each class
or function pickled by reference (``STACK_GLOBAL module name``) and each module
cloudpickle refers to (``subimport("torch")``). A fork server that imports them first
gives every worker they are forked into a head start of the import's length (torch:
1-2 s per worker).
"""

from __future__ import annotations

import pickletools
import sys

# Beyond this, the pickle carries captured data rather than code: not worth the walk.
MAX_BLOB_BYTES = 16 << 20
_STRINGS = frozenset(
    {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING", "BINSTRING"}
)
_GETS = frozenset({"BINGET", "LONG_BINGET", "GET"})
_PUTS = frozenset({"BINPUT", "LONG_BINPUT", "PUT"})
# Calls whose first argument is a module's name.
_IMPORTERS = frozenset(
    {("cloudpickle.cloudpickle", "subimport"), ("cloudpickle.cloudpickle", "dynamic_subimport")}
)
# Never worth importing ahead: already in every worker, or not for a fork server.
_SKIPPED = frozenset({"__main__", "fasttune", "cloudpickle", "ray", "builtins", "copyreg"})


def modules_named_in(blob: bytes) -> list[str]:
    """Modules the pickle ``blob`` refers to, in order of first mention.

    Only third-party modules this process has imported count (the standard library
    is cheap, and a module this process never imported may not import here); none
    for a pickle over :data:`MAX_BLOB_BYTES` or one that cannot be read.
    """
    if len(blob) > MAX_BLOB_BYTES:
        return []
    try:
        named = _named_modules(blob)
    except Exception:  # not a pickle this walk understands: nothing to preload
        return []
    stdlib: frozenset[str] = getattr(sys, "stdlib_module_names", frozenset())
    return [
        name
        for name in dict.fromkeys(named)
        if name in sys.modules
        and name.partition(".")[0] not in _SKIPPED
        and name.partition(".")[0] not in stdlib
        and name not in sys.builtin_module_names
    ]


_IMPORTER = object()  # what a memo holds for cloudpickle's subimport, once pickled


def _named_modules(blob: bytes) -> list[str]:
    memo: dict[int, object] = {}
    pushed: list[object] = []  # what each opcode pushed: a string, _IMPORTER or None
    named: list[str] = []
    argument_is_module = False
    for opcode, argument, _ in pickletools.genops(blob):
        name = opcode.name
        if name in _STRINGS or name in _GETS:
            value = argument if name in _STRINGS else memo.get(int(argument))  # type: ignore[arg-type]
            if argument_is_module and isinstance(value, str):
                named.append(value)
            # subimport fetched again from the memo: its next string is a module too
            argument_is_module = value is _IMPORTER
            pushed.append(value)
        elif name == "MEMOIZE":
            memo[len(memo)] = pushed[-1] if pushed else None
        elif name in _PUTS:
            memo[int(argument)] = pushed[-1] if pushed else None  # type: ignore[arg-type]
        elif name in ("STACK_GLOBAL", "GLOBAL"):
            if name == "GLOBAL":  # protocols 0-3: "module qualname"
                module, _, qualname = str(argument).partition(" ")
            elif len(pushed) >= 2 and isinstance(pushed[-2], str) and isinstance(pushed[-1], str):
                module, qualname = pushed[-2], pushed[-1]
            else:
                module = qualname = ""
            importer = (module, qualname) in _IMPORTERS
            if module:
                named.append(module)
            argument_is_module = importer
            pushed.append(_IMPORTER if importer else None)
        else:
            pushed.append(None)
    return named
