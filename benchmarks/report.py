"""Shared by the benchmarks: each owns one section of docs/BENCHMARKS.md, between markers, and replaces
only that section, so one benchmark's run leaves the others' figures alone."""

from __future__ import annotations

import os
import re
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "docs" / "BENCHMARKS.md"


def write_section(name: str, title: str, body: str, path: Path = BENCHMARKS) -> None:
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    section = f"{start}\n## {title}\n\n{body.strip()}\n{end}"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text)


def machine_load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"
