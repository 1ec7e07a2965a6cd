"""The docs stay true to the code: the protocol table is the Lua headers' own."""

from __future__ import annotations

from pathlib import Path

from echomq.protocol.scripts import protocol_table

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_protocol_md_has_one_row_per_script_matching_its_header() -> None:
    text = (DOCS / "protocol.md").read_text()
    begin = text.index("<!-- scripts:begin")
    start = text.index("\n", begin) + 1
    end = text.index("<!-- scripts:end -->")
    assert text[start:end] == protocol_table(), (
        "docs/protocol.md is out of date: paste echomq.protocol.scripts.protocol_table() between the markers"
    )
