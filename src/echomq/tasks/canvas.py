"""Canvas: signatures, chains, groups and chords of typed tasks, admitted as flows.

::

    add.s(2, 2)                         a signature: a task and (some of) its arguments
    chain(add.s(2, 2), add.s(4))        each step gets the previous step's result as its
                                        first argument: add(add(2, 2), 4)
    add.s(2, 2) | add.s(4)              the same chain
    add.si(1, 1)                        immutable: takes no previous result
    group(add.s(1, 1), add.s(2, 2))     run together; results in the group's order: [2, 4]
    chord(group(...), total.s())        the callback gets the group's results, in order
    chain(group(...), total.s())        the same chord (a group followed by a step)

    handle = await app.admit(workflow)  # handle.result(): the last step's result
    handle = app.admit_sync(workflow)   # the blocking twin

The names and the argument passing are Celery's (``.s``, ``.si``, ``chain``, ``group``,
``chord``, ``|``). Underneath a workflow is one flow (decision 0038 and 0041): a chain is
nested parents (each step the parent of the step before it), a chord a parent whose
children are the group's members. So its admission is all or nothing (a crash midway
leaves nothing runnable), each step is released exactly once after its children ended,
on one server or across cluster slots, and a failed step fails the steps after it (the
flow's ``fail`` policy: the last step's ``result()`` raises JobFailed naming the child).

Built here, pure: the tree (:class:`~echomq.client._async.flows.FlowSpec`) with each step's
payload. A step that receives results carries, in its envelope, a mode word (``r1``: one
result, ``rn``: a list) and the ids of its children in order, which the worker reads
(:func:`echomq.tasks.workflows.step_values`). Refused before any I/O: a group after a step
(one result fanned out to many jobs: a flow is a tree, each job has one parent), a group
or chain with no members, a mutable step whose task has no positional parameter.
A lone group is not one flow: its members are admitted one by one (``GroupHandle``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from echomq.core.errors import InvalidArgument
from echomq.core.ids import generate
from echomq.protocol.flows import FlowSpec, member
from echomq.tasks.serializer import envelope_head

Task = Any  # echomq.tasks.task.Task, which imports this module (no circle: named, not imported)
__all__ = ["Chain", "Chord", "Group", "Signature", "Workflow", "build", "chain", "chord", "group"]

R = TypeVar("R")


class Signature(Generic[R]):
    """A task and arguments for a job to come (``task.s(...)``; ``task.si(...)``
    immutable). Mutable: in a chain it gets the previous step's result first."""

    __slots__ = ("args", "immutable", "kwargs", "task")

    def __init__(self, task: Task, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                 immutable: bool = False) -> None:
        self.task, self.args, self.kwargs, self.immutable = task, args, kwargs, immutable

    def __or__(self, other: Workflow) -> Chain:
        return chain(self, other)

    def __repr__(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.task.name}.{'si' if self.immutable else 's'}({', '.join(parts)})"


class Chain:
    """Steps run one after another, each fed the previous one's result (``chain``)."""

    __slots__ = ("steps",)

    def __init__(self, steps: tuple[Workflow, ...]) -> None:
        self.steps = steps

    def __or__(self, other: Workflow) -> Chain:
        return chain(self, other)

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.steps))


class Group:
    """Members run side by side; their results in order (``group``)."""

    __slots__ = ("members",)

    def __init__(self, members: tuple[Workflow, ...]) -> None:
        self.members = members

    def __or__(self, other: Workflow) -> Chain:
        return chain(self, other)

    def __repr__(self) -> str:
        return f"group({', '.join(map(repr, self.members))})"


class Chord:
    """A group, then a callback given the group's results in order (``chord``)."""

    __slots__ = ("body", "header")

    def __init__(self, header: Group, body: Workflow) -> None:
        self.header, self.body = header, body

    def __or__(self, other: Workflow) -> Chain:
        return chain(self, other)

    def __repr__(self) -> str:
        return f"chord({self.header!r}, {self.body!r})"


Workflow = Signature[Any] | Chain | Group | Chord
_KINDS = (Signature, Chain, Group, Chord)


def _check(item: Any, what: str) -> Workflow:
    if not isinstance(item, _KINDS):
        raise InvalidArgument(f"{what} is a signature (task.s(...)), chain, group or chord, "
                              f"not {item!r}")
    return item


def chain(*steps: Workflow) -> Chain:
    """Steps one after another (nested chains and chords are flattened into it)."""
    flat: list[Workflow] = []
    for step in steps:
        _check(step, "a step of a chain")
        if isinstance(step, Chain):
            flat += step.steps
        elif isinstance(step, Chord):
            flat += [step.header, step.body]
        else:
            flat.append(step)
    if not flat:
        raise InvalidArgument("a chain has at least one step")
    return Chain(tuple(flat))


def group(*members: Workflow | Iterable[Workflow]) -> Group:
    """Members side by side: ``group(a, b)`` or ``group([a, b])`` (nested groups flattened)."""
    items: list[Any] = []
    for m in members:
        items += m if not isinstance(m, _KINDS) and isinstance(m, Iterable) else [m]
    flat: list[Workflow] = []
    for item in items:
        _check(item, "a member of a group")
        flat += item.members if isinstance(item, Group) else [item]
    if not flat:
        raise InvalidArgument("a group has at least one member")
    return Group(tuple(flat))


def chord(header: Group | Iterable[Workflow], body: Workflow) -> Chord:
    """``header`` (a group, or its members) then ``body`` given their results in order."""
    return Chord(header if isinstance(header, Group) else group(header), _check(body, "a chord's body"))


Feed = tuple[str, list[FlowSpec]] | None  # ('r1' | 'rn', the children a step waits for)


def build(wf: Workflow, feed: Feed = None) -> tuple[FlowSpec, Task]:
    """The flow of ``wf`` (its root's spec and task), every argument checked; no I/O."""
    _check(wf, "a workflow")
    if isinstance(wf, Signature):
        return _step(wf, feed)
    if isinstance(wf, Group):
        raise InvalidArgument("a group inside a workflow needs a callback after it: "
                              "chord(group, callback)")
    steps = chain(wf).steps
    built: tuple[FlowSpec, Task] | None = None
    for i, step in enumerate(steps):
        if isinstance(step, Group):
            if feed is not None:
                raise InvalidArgument("a group after a step is not supported: a flow is a tree "
                                      "(each job has one parent), so one result cannot feed many "
                                      "jobs; run the step inside each member instead")
            if i == len(steps) - 1:
                raise InvalidArgument("a chain cannot end with a group: add a callback (a chord)")
            feed = ("rn", [build(m)[0] for m in step.members])
            continue
        built = build(step, feed)
        feed = ("r1", [built[0]])
    assert built is not None  # a chain has a step that is not a group (it cannot end in one)
    return built


def _step(sig: Signature[Any], feed: Feed) -> tuple[FlowSpec, Task]:
    task = sig.task
    if feed is None or sig.immutable:
        job_id, payload, _ = task.prepare(sig.args, sig.kwargs)
        options, expires_ms = task.step_options(sig.args, sig.kwargs)
    else:
        rest = task.sig.bind_rest(sig.args, sig.kwargs)
        options, expires_ms = task.step_options(sig.args, sig.kwargs, rest)
        mode, children = feed
        members = [member(c.id, c.queue) for c in children]
        ser = task.app.serializer
        job_id = generate("JOB")
        try:
            payload = envelope_head(ser, task.name, mode) + ser.encode([members, *rest])
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"task {task.name}: arguments cannot be encoded: {exc}") from None
    children_specs = tuple(feed[1]) if feed is not None else ()
    # the task's options apply to its step (decision 0041); a deadline to start by only to a
    # step that starts at admission (one that waits for others cannot promise to start)
    return FlowSpec(task.queue, job_id, payload, children_specs, options=options,
                    expires_ms=None if children_specs else expires_ms), task
