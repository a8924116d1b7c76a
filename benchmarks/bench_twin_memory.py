"""`doctor`'s memory estimate against the RSS growth of a process running the twin model (issue 23).

    .venv/bin/python benchmarks/bench_twin_memory.py      # ~3 min on 2 cores, 2 of them 65536 without flash attention
    .venv/bin/python benchmarks/bench_twin_memory.py --cases 4096/1/off,16384/1/on

For each setting (context / slots / flash attention), a fresh process loads the tiny qwen35moe twin
(tests/twin.py, 2.5 MB) and reads one prompt filling 95% of one slot's context, with no state cache; the table
shows doctor's estimate, the RSS growth after loading and after the prompt, and the estimate's difference from
the latter. tests/test_twin_memory.py asserts it within 20% for two of these settings. Prints a Markdown table
(docs/MODELS.md, "memory at scale").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.test_twin_memory import FILL, measure  # noqa: E402
from tests.twin import build_twin  # noqa: E402

CASES = "4096/1/off,16384/1/off,16384/4/off,65536/1/off,16384/1/on,65536/1/on,65536/4/on"
MIB = 1024**2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=CASES, help="comma-separated ctx/slots/flash attention (on or off)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="twin-memory-") as folder:
        twin = build_twin(Path(folder) / "twin.gguf")
        print(f"RSS growth of a process running the twin, a prompt filling {FILL:.0%} of the context, "
              "--state-cache-mb 0\n")
        print("| ctx | slots | flash attention | doctor's estimate | after loading | after the prompt | difference |")
        print("|---|---|---|---|---|---|---|")
        for case in args.cases.split(","):
            ctx, slots, flash = case.split("/")
            measured = measure(twin, int(ctx), int(slots), flash == "on")
            print(f"| {ctx} | {slots} | {flash} | {measured.estimate / MIB:.1f} MiB | {measured.loaded / MIB:.1f} MiB "
                  f"| {measured.after / MIB:.1f} MiB | {measured.difference:+.0%} |", flush=True)


if __name__ == "__main__":
    main()
