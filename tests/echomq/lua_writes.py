"""Which client bytes a Lua script keeps, and whether each is bounded before its first write.

A small static reader of the scripts in ``src/echomq/protocol/lua`` (their own text, includes not
pasted): it follows every ``ARGV[...]`` reference into locals and tables (``local a, b =
ARGV[1], ...``, ``t[#t + 1] = a``) and into the calls that store bytes (``HSET``,
``ZADD``, ... and the include functions whose parameters reach such a call), then asks,
for each stored ``ARGV``, whether the script bounds it before its first write:

* bytes: ``too_long(what, #<ref>, MAX)`` (lua/include/bytes.lua), or
  ``if #<ref> > MAX then return redis.error_reply(...)``;
* a number: ``<v> = tonumber(<ref>)`` then ``<v> > <max>`` (a max other than 0);
* one of a few words: ``if <ref> ~= 'a' and <ref> ~= 'b' then return redis.error_reply``;
* an id: the header names it ``id``/``ids`` (or it is the id of a triple): every script
  writes an id only about a row that exists, and rows come only from deny-oom admission.

What it does not see (a value passed through a function other than the includes, string
building inside a write) it reports as unbounded: it errs on the side of failing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import echomq

LUA = Path(echomq.__file__).parent / "protocol" / "lua"

STORES = ("HSET", "HSETNX", "HMSET", "ZADD", "ZINCRBY", "SET", "SETNX", "SETEX", "PSETEX",
          "APPEND", "SETRANGE", "RPUSH", "LPUSH", "RPUSHX", "LPUSHX", "LSET", "LINSERT",
          "SADD", "XADD", "HINCRBY", "GETSET")
"""Commands that keep bytes they are given."""
WRITES = (*STORES, "DEL", "UNLINK", "HDEL", "ZREM", "ZREMRANGEBYSCORE", "SREM", "LTRIM",
          "LPOP", "RPOP", "EXPIRE", "PEXPIRE", "SPUBLISH", "PUBLISH", "INCR")
ID_NAMES = {"id", "ids"}
ID_EXPRS = {("complete_batch", "3 * i"),  # the id of each (id, attempt, result) triple
            ("heartbeat_batch", "2 * i")}  # the id of each (id, attempt) pair
EXISTING = {("flow_parent", "3")}
"""Values written only where the script first found them already stored: flow_parent's
``child`` names a field ``c:<child>`` it writes only when ``HGET`` finds it '' (flow_admit
created it; a child it does not list is refused before the write)."""

_CALL = re.compile(r"(?:redis\.call|\bcall)\('([A-Z]+)'")
_ARGV = re.compile(r"ARGV\[([^\]]+)\]")
_HEADER_ARGV = re.compile(r"^-- ARGV\[(\d+)(\.\.)?\] (\w+):", re.M)
_COMPARE = re.compile(r"[\w\[\]#.+*() -]*?\S\s*(?:==|~=|<=|>=|<|>)\s*[^\s)]+")
_FUNC = re.compile(r"^local function (\w+)\(([^)]*)\)", re.M)


@dataclass(frozen=True)
class Stored:
    """One client value a script stores: the ARGV expression, its header name, its line."""

    expr: str
    name: str
    line: int


def _split(text: str) -> list[str]:
    """Split at top-level commas (not inside brackets, parentheses, braces or quotes)."""
    out, depth, cur, quote = [], 0, "", ""
    for ch in text:
        if quote:
            cur += ch
            quote = "" if ch == quote else quote
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _args(line: str, start: int) -> str:
    """The text inside the parentheses that open at or after ``start``."""
    i = line.index("(", start)
    depth = 0
    for j in range(i, len(line)):
        depth += {"(": 1, ")": -1}.get(line[j], 0)
        if depth == 0:
            return line[i + 1 : j]
    return line[i + 1 :]


def _body(text: str) -> list[str]:
    """The script's lines after its contract header (comments dropped)."""
    lines = text.splitlines()
    return [re.sub(r"\s--\s.*$", "", ln) if not ln.startswith("--") else "" for ln in lines]


def include_writes() -> dict[str, set[int]]:
    """For each include function, the positions of its parameters that reach a store."""
    out: dict[str, set[int]] = {}
    for path in (LUA / "include").glob("*.lua"):
        text = path.read_text(encoding="utf-8")
        for m in _FUNC.finditer(text):
            params = [p.strip() for p in m.group(2).split(",") if p.strip()]
            end = text.find("\nend", m.end())
            fn = _body(text[m.end() : end])
            written = set()
            for ln in fn:
                for c in _CALL.finditer(ln):
                    if c.group(1) in STORES:
                        args = _split(_args(ln, c.start()))[2:]  # the key is KEYS-derived
                        words = set(re.findall(r"\w+", " ".join(args)))
                        written |= {i for i, p in enumerate(params) if p in words}
            out[m.group(1)] = written
    return out


def stored_argv(name: str, text: str) -> tuple[list[Stored], int]:
    """Every ARGV expression the script's stores may receive, and the line of its first write."""
    header = {int(k): (n, bool(v)) for k, v, n in _HEADER_ARGV.findall(text)}
    variadic = next((n for n, v in header.values() if v), None)
    includes = include_writes()
    body = _body(text)
    carries: dict[str, set[str]] = {}  # a local or table -> the ARGV expressions it holds

    def refs(expr: str) -> set[str]:
        expr = _COMPARE.sub(" ", expr)  # a comparison is a boolean: its operands are not kept
        found = set(_ARGV.findall(expr))
        for word in re.findall(r"[A-Za-z_]\w*", expr):
            found |= carries.get(word, set())
        return found

    stored: list[Stored] = []
    first_write = len(body)
    for n, ln in enumerate(body):
        assign = re.match(r"^\s*(?:local\s+)?([\w\[\]#+\s,.-]+?)\s*=(?!=)\s*(.+)$", ln)
        if assign and "==" not in assign.group(1) and not ln.lstrip().startswith(("if ", "for ")):
            targets, values = _split(assign.group(1)), _split(assign.group(2))
            for t, v in zip(targets, values, strict=False):
                base = re.match(r"[A-Za-z_]\w*", t.strip())
                if base:
                    carries.setdefault(base.group(0), set()).update(refs(v))
        for c in _CALL.finditer(ln):
            if c.group(1) in WRITES:
                first_write = min(first_write, n)
            if c.group(1) in STORES:
                for arg in _split(_args(ln, c.start()))[2:]:
                    stored += [Stored(e, _name(header, variadic, e), n) for e in refs(arg)]
        for fn, positions in includes.items():
            for m in re.finditer(rf"\b{fn}\(", ln):
                if positions:
                    first_write = min(first_write, n)
                args = _split(_args(ln, m.start()))
                for i in positions:
                    if i < len(args):
                        stored += [Stored(e, _name(header, variadic, e), n) for e in refs(args[i])]
    return stored, first_write


def _name(header: dict[int, tuple[str, bool]], variadic: str | None, expr: str) -> str:
    if expr.strip().isdigit():
        k = int(expr)
        fixed = [i for i, (_, v) in header.items() if not v]
        if k in header:
            return header[k][0]
        if variadic and k > max(fixed, default=0):
            return variadic
        return f"ARGV[{k}]"
    return variadic or "any fixed ARGV"


def unbounded(name: str, text: str) -> list[str]:
    """The stored ARGV of the script that no check bounds before its first write."""
    stored, first = stored_argv(name, text)
    body = _body(text)
    before = "\n".join(body[:first])
    carries = {}
    for ln in body[:first]:
        m = re.match(r"^\s*local\s+([\w\s,]+?)\s*=\s*(.+)$", ln)
        if m:
            for var, val in zip(_split(m.group(1)), _split(m.group(2)), strict=False):
                a = re.match(r"ARGV\[([^\]]+)\]", val.strip())
                if a:
                    carries[var.strip()] = a.group(1)
    out = []
    for s in {(s.expr, s.name): s for s in stored}.values():
        if s.name in ID_NAMES or (name, s.expr) in ID_EXPRS | EXISTING:
            continue
        names = [re.escape(f"ARGV[{s.expr}]")] + [re.escape(v) for v, e in carries.items()
                                                   if e == s.expr]
        ref = "(?:" + "|".join(names) + ")"
        as_bytes = (re.search(rf"too_long\([^,]+,\s*#{ref}\s*,", before)
                    or re.search(rf"#{ref}\s*>\s*(?!0\b)\w+\s+then\s+return\s+redis\.error_reply", before))
        num = re.search(rf"([\w\[\]]+)\s*=\s*tonumber\({ref}\)", before)
        as_number = num and re.search(rf"{re.escape(num.group(1))}\s*>\s*(?!0\b)\w+", before)
        as_enum = re.search(rf"{ref}\s*~=\s*'[^']*'[^\n]*\n?\s*return redis\.error_reply", before)
        if not (as_bytes or as_number or as_enum):
            out.append(f"{name}: ARGV[{s.expr}] ({s.name}) stored on line {s.line + 1} unbounded")
    return sorted(out)
