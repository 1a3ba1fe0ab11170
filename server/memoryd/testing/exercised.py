"""Which functions of memoryd's storage a test run calls, in every process it starts.

`make test` runs on PostgreSQL only the tests that exercise storage; this is how it knows they
still call every function of it that PostgreSQL runs. With $STORAGE_EXERCISED naming a file,
`install()` (run at interpreter start by tests/exercised/sitecustomize.py, which the PostgreSQL
run puts on PYTHONPATH) wraps each function and method defined in a memoryd.storage module as
the module is imported, and at exit appends the names of those that were called to the file,
one "module:qualified.name" a line. A process killed with SIGKILL records nothing, which only
makes the check stricter. `functions()` lists what could have been called, for the check
(scripts/storage_exercised.py). The variable's name does not start with MEMORYD_: test servers
are started without those.

A wrapper is a plain function calling the original, so generators, context managers and
coroutines come back as they would; properties, static and class methods are wrapped inside.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import os
import pkgutil
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

VARIABLE = "STORAGE_EXERCISED"
PACKAGE = "memoryd.storage"

_called: set[str] = set()
_path = ""
_lock = threading.Lock()


def _wrap(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(function)
    def called(*args: Any, **kwargs: Any) -> Any:
        if name not in _called:
            with _lock:
                _called.add(name)
        return function(*args, **kwargs)

    return called


def _written_in(function: object, module: ModuleType) -> bool:
    """Whether `function` is written in `module`'s file (not made by dataclasses or the like;
    a function this module wrapped counts as its original)."""
    if not inspect.isfunction(function):  # a cache's or a class's own object stays as it is
        return False
    function = inspect.unwrap(function)
    code = getattr(function, "__code__", None)
    return (
        inspect.isfunction(function)
        and function.__module__ == module.__name__
        and code is not None
        and code.co_filename == getattr(module, "__file__", None)
    )


def _members(module: ModuleType) -> Iterator[tuple[str, Any, Any, str]]:
    """(owner's attribute, owner, value, qualified name) of each function written in the
    module, at its top and in its classes (not in a Protocol, which only declares them)."""
    for attribute, value in list(vars(module).items()):
        if _written_in(value, module):
            yield attribute, module, value, value.__qualname__
        elif (
            inspect.isclass(value)
            and value.__module__ == module.__name__
            and not getattr(value, "_is_protocol", False)
        ):
            for member, inner in list(vars(value).items()):
                target: Any = inner.fget if isinstance(inner, property) else inner
                target = getattr(target, "__func__", target)
                if _written_in(target, module):
                    yield member, value, inner, str(target.__qualname__)


def functions(module: ModuleType) -> list[str]:
    """The names under which `module`'s functions are recorded."""
    return sorted(f"{module.__name__}:{name}" for *_, name in _members(module))


def _instrument(module: ModuleType) -> None:
    for attribute, owner, value, name in list(_members(module)):
        key = f"{module.__name__}:{name}"
        if isinstance(value, property):
            wrapped: Any = property(
                _wrap(value.fget, key) if value.fget else None, value.fset, value.fdel
            )
        elif isinstance(value, staticmethod):
            wrapped = staticmethod(_wrap(value.__func__, key))
        elif isinstance(value, classmethod):
            wrapped = classmethod(_wrap(value.__func__, key))
        else:
            wrapped = _wrap(value, key)
        try:
            setattr(owner, attribute, wrapped)
        except (AttributeError, TypeError):  # a frozen or slotted class's own attribute
            continue


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        _instrument(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Any, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != PACKAGE and not fullname.startswith(f"{PACKAGE}."):
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            found = getattr(finder, "find_spec", None)
            spec: importlib.machinery.ModuleSpec | None = (
                found(fullname, path, target) if found else None
            )
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


def save() -> None:
    """Append what this process called so far to the file, and start again: at exit, and by
    the test session (pytest-xdist's workers end without running atexit)."""
    with _lock:
        names = sorted(_called)
        _called.clear()
    if names and _path:
        # One write in append mode: the lines of processes ending together stay whole.
        with Path(_path).open("a", encoding="utf-8") as file:
            file.write("".join(f"{name}\n" for name in names))


def install() -> None:
    """Record the storage functions this process calls, when $STORAGE_EXERCISED names a file."""
    global _path  # noqa: PLW0603 - set once, at the process's start
    path = os.environ.get(VARIABLE)
    if not path or any(isinstance(finder, _Finder) for finder in sys.meta_path):
        return
    _path = path
    sys.meta_path.insert(0, _Finder())
    atexit.register(save)


def every_function() -> list[str]:
    """Every function and method defined in memoryd.storage's modules (imported to be read)."""
    package = importlib.import_module(PACKAGE)
    names: list[str] = []
    for found in pkgutil.walk_packages(package.__path__, f"{PACKAGE}."):
        names.extend(functions(importlib.import_module(found.name)))
    return sorted(names)
