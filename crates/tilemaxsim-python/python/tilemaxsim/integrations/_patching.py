"""Monkeypatching by identity: every reference an installed package holds to one of its
functions (module attributes, and default arguments such as `score_metric=colbert_kd_scores`)
is pointed at our function, and remembered so `unpatch` can restore it exactly."""

from __future__ import annotations

import inspect
import sys


class Patcher:
    def __init__(self, package: str):
        self.package = package
        self._undo: list = []

    @property
    def active(self) -> bool:
        return bool(self._undo)

    def patch(self, replacements: dict) -> None:
        """`replacements`: original function object -> ours."""
        if self._undo:
            return
        for name, module in list(sys.modules.items()):
            if module is None or not (name == self.package or name.startswith(self.package + ".")):
                continue
            for attr, value in list(vars(module).items()):
                if _is_one_of(value, replacements):
                    setattr(module, attr, replacements[value])
                    self._undo.append((setattr, module, attr, value))
                for fn in _functions_of(value, module):
                    self._patch_defaults(fn, replacements)

    def _patch_defaults(self, fn, replacements) -> None:
        if fn.__defaults__ and any(_is_one_of(d, replacements) for d in fn.__defaults__):
            old = fn.__defaults__
            fn.__defaults__ = tuple(replacements[d] if _is_one_of(d, replacements) else d for d in old)
            self._undo.append((setattr, fn, "__defaults__", old))
        if fn.__kwdefaults__ and any(_is_one_of(d, replacements) for d in fn.__kwdefaults__.values()):
            old = dict(fn.__kwdefaults__)
            fn.__kwdefaults__ = {k: replacements[d] if _is_one_of(d, replacements) else d for k, d in old.items()}
            self._undo.append((setattr, fn, "__kwdefaults__", old))

    def unpatch(self) -> None:
        for op, target, attr, value in reversed(self._undo):
            op(target, attr, value)
        self._undo.clear()


def _is_one_of(value, replacements) -> bool:
    try:
        return value in replacements
    except TypeError:  # unhashable
        return False


def _functions_of(value, module):
    """Functions defined in `module`, and the methods of its classes."""
    if inspect.isfunction(value) and value.__module__ == module.__name__:
        yield value
    elif inspect.isclass(value) and value.__module__ == module.__name__:
        for member in vars(value).values():
            if inspect.isfunction(member):
                yield member
