"""A task function's signature as the typed layer uses it: bind, check, encode, call. Pure.

At admission the caller's arguments are bound to the parameters (defaults filled in),
each checked against its annotation, and the values encoded as one array in parameter
order; nothing is sent if any of that fails (:class:`~echomq.core.errors.InvalidArgument`).
At the worker the array is decoded in one typed pass (a ``tuple`` of the annotations)
and the function called with it. A parameter annotated :class:`TaskContext` is not an
argument: the worker passes the attempt's context there.

The checks: a parameter annotated ``int``, ``str``, ``float``, ``bool`` or ``bytes``
takes a value of exactly that type (an ``int`` for a ``float`` too; never a ``bool`` for
an ``int``); an unannotated or ``Any`` parameter takes anything the serializer encodes;
any other annotation is checked by the serializer (``msgspec.convert``, strict: a
dataclass, ``TypedDict``, Struct, ``list[int]``, ``Literal``, ``X | None``, a pydantic
model...). ``*args`` and ``**kwargs`` are refused when the task is declared.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from echomq.core.errors import InvalidArgument
from echomq.tasks.serializer import Serializer

__all__ = ["TaskSignature"]

_EXACT: dict[Any, tuple[type, ...]] = {int: (int,), str: (str,), bytes: (bytes,), bool: (bool,),
                                       float: (float, int)}
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
Check = Callable[[Any], Any] | None
_LATER = object()  # the first parameter's place while binding the rest (bind_rest)


class TaskSignature:
    """The parameters of ``fn`` (less the context one), their types and the return type."""

    def __init__(self, fn: Callable[..., Any], *, context_type: type, serializer: Serializer,
                 who: str) -> None:
        self.fn, self.who, self.serializer = fn, who, serializer
        sig = inspect.signature(fn)
        try:
            hints = typing.get_type_hints(fn)
        except Exception as exc:  # a name the annotations use is not importable here
            raise InvalidArgument(f"task {who}: cannot resolve its annotations ({exc})") from None
        self.context_name: str | None = None
        self.context_at: int | None = None  # its place among the positional parameters
        params: list[inspect.Parameter] = []
        positional = 0
        for p in sig.parameters.values():
            if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                raise InvalidArgument(f"task {who}: *args/**kwargs cannot be typed; name the parameters")
            if hints.get(p.name) is context_type:
                self.context_name = p.name
                self.context_at = positional if p.kind in _POSITIONAL else None
            else:
                params.append(p)
            if p.kind in _POSITIONAL:
                positional += 1
        self.names = [p.name for p in params]
        self.kwonly = [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
        self.n, self.npos = len(params), len(params) - len(self.kwonly)
        self.types = [hints.get(name, Any) for name in self.names]
        # Trailing defaults: a job admitted before its task gained these parameters
        # (a shorter array) is read with them filled in (Task.decode_values).
        self.defaults = [p.default for p in params]
        self.returns = hints.get("return", Any)
        self._bind_sig = sig.replace(parameters=params)
        self._checks: list[Check] = [self._check_for(t) for t in self.types]
        self._checked = any(c is not None for c in self._checks)
        self.args_type: Any = tuple[tuple(self.types)] if self.types else tuple[()]  # type: ignore[misc]
        self._plain_call = self.context_name is None and not self.kwonly

    def _check_for(self, type_: Any) -> Check:
        if type_ is Any or type_ is object:
            return None
        exact = _EXACT.get(type_)
        check = self.serializer.check
        if exact is not None:  # the common case, without a call into the serializer
            if type_ is float:
                return lambda v: v if type(v) in exact else check(v, type_)
            return lambda v: v if type(v) is exact[0] else check(v, type_)
        return lambda v: check(v, type_)

    # ------------------------------------------------------------ admission
    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any], *, start: int = 0) -> list[Any]:
        """The arguments as values in parameter order, each checked (from parameter
        ``start`` on); InvalidArgument if they do not fit (nothing has been sent)."""
        if not kwargs and len(args) == self.n:
            values = list(args)
        else:
            try:
                bound = self._bind_sig.bind(*args, **kwargs)
            except TypeError as exc:
                raise InvalidArgument(f"task {self.who}: {exc}") from None
            bound.apply_defaults()
            arguments = bound.arguments
            values = [arguments[name] for name in self.names]
        if self._checked:
            for i, check in enumerate(self._checks):
                if check is not None and i >= start:
                    try:
                        values[i] = check(values[i])
                    except (ValueError, TypeError) as exc:
                        raise InvalidArgument(
                            f"task {self.who}: argument {self.names[i]!r}: {exc}") from None
        return values

    def bind_rest(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        """The values of every parameter but the first, checked: the first is left for what
        the worker passes there (a canvas step's previous result, a batch's status)."""
        if self.npos == 0:
            raise InvalidArgument(f"task {self.who} has no positional parameter to receive the "
                                  "previous step's result (make its signature immutable: .si())")
        return self.bind((_LATER, *args), kwargs, start=1)[1:]

    # ------------------------------------------------------------ the worker
    def call(self, values: Any, context: Any) -> Any:
        """Call the function with decoded ``values`` (and ``context`` where it asks)."""
        if self._plain_call:
            return self.fn(*values)
        pos = list(values[: self.npos])
        kw = dict(zip(self.kwonly, values[self.npos :], strict=True))
        if self.context_name is not None:
            if self.context_at is not None:
                pos.insert(self.context_at, context)
            else:
                kw[self.context_name] = context
        return self.fn(*pos, **kw)
