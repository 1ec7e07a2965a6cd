"""The Lua bundle: one file per transition in ``lua/``, loaded as package data.

Every file opens with its contract, which this loader parses and enforces::

    #!lua [flags=...]
    -- name: <the file's stem>
    -- summary: ...
    -- KEYS[1] <name>: ...          numbered from 1, in order
    -- KEYS[6..] <name>: ...        optional variadic tail (the last KEYS line)
    -- ARGV[1] <name>: ...          likewise
    -- RETURNS: ...
    -- ERRORS: ...                  (a field may continue on lines indented '--   ')
    -- @include <helper>            pasted from lua/include/<helper>.lua

The flags of the ``#!lua`` line are the server's: ``no-writes`` for a read, and
``allow-oom`` for a transition that drains work (it runs when the server is at
``maxmemory``); a writing script without ``allow-oom`` is refused whole by a server
at its memory limit, before it runs (admission: back-pressure). Unknown flags are
refused here, so a typo cannot silently turn a drain into a refusal.

Includes declare their own includes the same way: an include opens with a comment
saying what it defines and, in that header, one ``-- @include <helper>`` line per
include whose functions it calls (``gate.lua`` formats with ``now.lua``'s ``fmt``). The
loader expands them once, at load, as BullMQ's build does: depth first, each include
pasted at its first mention and never again, so a script that names ``now`` and
``gate`` gets ``now`` once, before ``gate``. An include that calls a function defined
by another include it does not declare (directly or through its own includes), or an
include circle, is refused with :class:`ScriptContractError` (:func:`check_includes`,
run by :func:`bundle`).

A file without the ``#!lua`` line, a name that differs from the file, gaps in
the numbering, or a missing RETURNS or ERRORS line is refused with
:class:`ScriptContractError`. :meth:`Script.check` refuses a call whose key
count does not fit the contract, before anything reaches the server.

What the server enforces, and what it does not (Valkey 7.0+; 8.1 checked): the
``#!lua`` shebang makes the server refuse a write in a ``no-writes`` script and a
script run while out of memory (unless ``allow-oom``), and a cluster refuses a call
whose keys span slots. It does **not** refuse access to a key missing from KEYS.
Declared keys are this project's rule, enforced here instead: every script checks
the shape of its KEYS against ARGV before touching anything (``EMQKEYS``), and
tests/echomq/test_declared_keys.py runs every script with each ``redis.call``
checked against KEYS.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from echomq.core.errors import ScriptContractError
from echomq.core.model import PROTOCOL

__all__ = ["FLAGS", "Script", "bundle", "check_includes", "load", "parse", "protocol_table"]

_SLOT = re.compile(r"^-- (KEYS|ARGV)\[(\d+)(\.\.)?\] (\w+): ")
_INCLUDE = re.compile(r"^-- @include (\w+)\s*$")
_DEFINES = re.compile(r"^local (?:function )?(\w+)", re.M)
# The shebang flags Valkey knows (https://valkey.io/topics/eval-intro/#eval-flags).
FLAGS = frozenset({"no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"})


@dataclass(frozen=True, slots=True)
class Script:
    """One parsed Lua script: its source (includes expanded), SHA1 and contract."""

    name: str
    source: str
    sha: str
    keys: tuple[str, ...]
    argv: tuple[str, ...]
    variadic_keys: bool
    variadic_argv: bool
    read_only: bool
    flags: frozenset[str] = frozenset()
    summary: str = ""
    returns: str = ""
    errors: str = ""

    @property
    def allow_oom(self) -> bool:
        """True if the script runs on a server at ``maxmemory`` (a drain, never an admission)."""
        return "allow-oom" in self.flags

    def check(self, nkeys: int, nargs: int) -> None:
        """Refuse a call whose shape does not fit the contract."""
        fixed_k = len(self.keys) - self.variadic_keys
        fixed_a = len(self.argv) - self.variadic_argv
        ok_k = nkeys >= fixed_k if self.variadic_keys else nkeys == fixed_k
        ok_a = nargs >= fixed_a if self.variadic_argv else nargs == fixed_a
        if not (ok_k and ok_a):
            raise ScriptContractError(
                f"{self.name}: called with {nkeys} keys and {nargs} args; contract has "
                f"keys {self.keys} and argv {self.argv}"
            )


def _numbered(kind: str, rows: list[tuple[int, bool, str]], name: str) -> tuple[tuple[str, ...], bool]:
    for expect, (index, _, _) in enumerate(rows, start=1):
        if index != expect:
            raise ScriptContractError(f"{name}: {kind}[{index}] out of order (expected {expect})")
    for _, variadic, _ in rows[:-1]:
        if variadic:
            raise ScriptContractError(f"{name}: only the last {kind} line may be variadic")
    return tuple(n for _, _, n in rows), bool(rows and rows[-1][1])


def parse(name: str, text: str, include: dict[str, str] | None = None) -> Script:
    """Parse and check one script's contract header; expand its includes."""
    lines = text.splitlines()
    if not lines or not (lines[0] == "#!lua" or lines[0].startswith("#!lua ")):
        raise ScriptContractError(f"{name}: first line must be '#!lua' (script flags, cluster checks)")
    flags = _flags(name, lines[0])
    header: list[str] = []
    for line in lines[1:]:
        if not line.startswith("--"):
            break
        header.append(line)
    fields = {m.group(1): m.group(2) for m in (re.match(r"^-- (\w+): ?(.*)$", h) for h in header) if m}
    if fields.get("name") != name:
        raise ScriptContractError(f"{name}: header must start with '-- name: {name}'")
    for required in ("summary", "RETURNS", "ERRORS"):
        if required not in fields:
            raise ScriptContractError(f"{name}: contract header lacks '-- {required}:'")
    slots: dict[str, list[tuple[int, bool, str]]] = {"KEYS": [], "ARGV": []}
    for h in header:
        m = _SLOT.match(h)
        if m:
            slots[m.group(1)].append((int(m.group(2)), m.group(3) is not None, m.group(4)))
    keys, vk = _numbered("KEYS", slots["KEYS"], name)
    argv, va = _numbered("ARGV", slots["ARGV"], name)
    source = "\n".join(_expand(name, lines, include or {}, set(), ())) + "\n"
    return Script(
        name=name,
        source=source,
        sha=hashlib.sha1(source.encode()).hexdigest(),
        keys=keys,
        argv=argv,
        variadic_keys=vk,
        variadic_argv=va,
        read_only="no-writes" in flags,
        flags=flags,
        summary=_continued(header, "summary"),
        returns=_continued(header, "RETURNS"),
        errors=_continued(header, "ERRORS"),
    )


def _expand(name: str, lines: list[str], include: dict[str, str], seen: set[str],
            within: tuple[str, ...]) -> list[str]:
    """``lines`` with each ``-- @include`` replaced by that include, itself expanded, the
    first time it is named (``seen``: already pasted into this script); ``within``: the
    includes being expanded around this one, to refuse a circle."""
    out: list[str] = []
    for line in lines:
        m = _INCLUDE.match(line)
        if not m:
            out.append(line)
            continue
        helper = m.group(1)
        if helper not in include:
            raise ScriptContractError(f"{name}: unknown include {helper!r}")
        if helper in within:
            raise ScriptContractError(f"{name}: include circle {' -> '.join((*within, helper))}")
        if helper in seen:
            continue
        seen.add(helper)
        out += _expand(name, include[helper].rstrip("\n").splitlines(), include, seen, (*within, helper))
    return out


def _code(text: str) -> str:
    """Lua text without comments and string literals (what a name check should read)."""
    text = re.sub(r"--[^\n]*", "", text)
    return re.sub(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"", "''", text)


def check_includes(include: dict[str, str]) -> None:
    """Refuse an include that calls another include's function without declaring it.

    A name an include defines at its top level (``local function f``, ``local X =``) may
    be used by another include only if that one declares it, directly or through the
    includes it declares (``-- @include <helper>``); so an include never depends on
    the order a script happens to name them in."""
    owner = {n: helper for helper, text in include.items() for n in _DEFINES.findall(text)}
    for helper, text in sorted(include.items()):
        declared = {m.group(1) for m in map(_INCLUDE.match, text.splitlines()) if m}
        unknown = sorted(declared - include.keys())
        if unknown:
            raise ScriptContractError(f"include/{helper}.lua: unknown include {unknown[0]!r}")
        reach, todo = set(), list(declared)
        while todo:
            d = todo.pop()
            if d not in reach:
                reach.add(d)
                todo += [m.group(1) for m in map(_INCLUDE.match, include[d].splitlines()) if m]
        code = _code(text)
        for n, where in sorted(owner.items()):
            if where != helper and where not in reach and re.search(rf"\b{n}\b", code):
                raise ScriptContractError(
                    f"include/{helper}.lua uses {n} from include/{where}.lua but does not declare "
                    f"'-- @include {where}'")


def _flags(name: str, shebang: str) -> frozenset[str]:
    """The flags of a ``#!lua`` line: ``#!lua`` or ``#!lua flags=a,b`` and nothing else."""
    if shebang == "#!lua":
        return frozenset()
    rest = shebang.removeprefix("#!lua ")
    if not rest.startswith("flags=") or " " in rest:
        raise ScriptContractError(f"{name}: shebang must be '#!lua' or '#!lua flags=a,b', not {shebang!r}")
    flags = rest.removeprefix("flags=").split(",")
    unknown = [f for f in flags if f not in FLAGS]
    if unknown or len(set(flags)) != len(flags):
        raise ScriptContractError(
            f"{name}: unknown or repeated shebang flags {flags} (known: {sorted(FLAGS)})")
    if "no-writes" in flags and "allow-oom" in flags:
        raise ScriptContractError(f"{name}: no-writes already runs at the memory limit; drop allow-oom")
    return frozenset(flags)


def _continued(header: list[str], field: str) -> str:
    """A header field with its indented continuation lines, joined into one line."""
    out: list[str] = []
    for line in header:
        if out and line.startswith("--   "):
            out.append(line[5:].strip())
        elif out:
            break
        elif line.startswith(f"-- {field}:"):
            out.append(line.split(":", 1)[1].strip())
    return " ".join(out)


def protocol_table() -> str:
    """The Markdown table of docs/protocol.md: one row per script, from its header."""
    rows = ["| script | flags | KEYS | ARGV | returns | errors |", "|---|---|---|---|---|---|"]
    for name, s in sorted(bundle().items()):
        keys = ", ".join(("…" if s.variadic_keys and i == len(s.keys) - 1 else "") + k
                         for i, k in enumerate(s.keys))
        argv = ", ".join(("…" if s.variadic_argv and i == len(s.argv) - 1 else "") + a
                         for i, a in enumerate(s.argv)) or "—"
        cells = [s.returns.replace("|", "\\|"), s.errors.replace("|", "\\|")]
        flags = ", ".join(f"`{f}`" for f in sorted(s.flags)) or "— (deny-oom)"
        rows.append(f"| `{name}` | {flags} | {keys} | {argv} | {cells[0]} | {cells[1]} |")
    return "\n".join(rows) + "\n"


@cache
def bundle() -> dict[str, Script]:
    """Every script of the package, by name, parsed once per process."""
    root = resources.files("echomq.protocol") / "lua"
    include = {
        f.name.removesuffix(".lua"): f.read_text(encoding="utf-8")
        for f in (root / "include").iterdir()
        if f.name.endswith(".lua")
    }
    check_includes(include)
    if f"local PROTOCOL = '{PROTOCOL}'" not in include.get("fence", ""):
        raise ScriptContractError(f"lua/include/fence.lua must define PROTOCOL = '{PROTOCOL}'")
    scripts = {}
    for f in root.iterdir():
        if f.name.endswith(".lua"):
            name = f.name.removesuffix(".lua")
            scripts[name] = parse(name, f.read_text(encoding="utf-8"), include)
    return scripts


def load(name: str) -> Script:
    """One script of the bundle by name."""
    try:
        return bundle()[name]
    except KeyError:
        raise ScriptContractError(f"no script named {name!r}") from None
