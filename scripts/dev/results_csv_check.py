"""Checks that a headroom run's results.csv is what Ultralytics' own plotting reads (issue 21).

Development tool: run it in the Ultralytics environment (scripts/ultralytics-env.sh), never from
`cargo test`. It copies RUN/results.csv into a temporary folder, runs
`ultralytics.utils.plotting.plot_results` on it, and fails when Ultralytics logs a plotting error
(it catches its own exceptions and only warns), when results.png is not written, or when a column
that Ultralytics plots is missing or not numeric.

Usage: source .deps/ultralytics.env && python scripts/dev/results_csv_check.py RUN_DIR [--keep DIR]
"""

import argparse
import logging
import shutil
import sys
import tempfile
from pathlib import Path

# The columns Ultralytics 8.4 writes for detection and plots by name; val losses may be empty
# (headroom does not compute them), every other one must be numbers.
REQUIRED = [
    "epoch", "time", "train/box_loss", "train/cls_loss", "train/dfl_loss",
    "metrics/precision(B)", "metrics/recall(B)", "metrics/mAP50(B)", "metrics/mAP50-95(B)",
    "val/box_loss", "val/cls_loss", "val/dfl_loss", "lr/pg0", "lr/pg1", "lr/pg2",
]
MAY_BE_EMPTY = {"val/box_loss", "val/cls_loss", "val/dfl_loss"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--keep", type=Path, help="copy results.png here")
    args = parser.parse_args()
    import csv
    import math

    from ultralytics.utils import LOGGER
    from ultralytics.utils.plotting import plot_results

    source = args.run / "results.csv"
    with open(source, newline="") as f:
        rows = list(csv.DictReader(f))
        columns = list(rows[0].keys()) if rows else []
    problems = [] if rows else ["no rows"]
    problems += [f"missing column {c}" for c in REQUIRED if c not in columns]

    def number(text):
        try:
            return math.isfinite(float(text))
        except ValueError:
            return False

    for column in REQUIRED:
        if column in columns and column not in MAY_BE_EMPTY:
            bad = [i + 2 for i, row in enumerate(rows) if not number(row[column])]
            if bad:
                problems.append(f"column {column} is not a number on line(s) {bad}")
    if columns[: len(REQUIRED)] != REQUIRED:
        problems.append(f"columns in another order than Ultralytics': {columns}")

    warnings = []

    class Catch(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage())

    LOGGER.addHandler(Catch())
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "results.csv"
        shutil.copy(source, csv)
        plot_results(file=str(csv))
        png = Path(tmp) / "results.png"
        if not png.exists():
            problems.append("plot_results wrote no results.png")
        elif args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(png, args.keep / "results.png")
    problems += [f"Ultralytics warned: {w}" for w in warnings]
    for p in problems:
        print(f"FAIL {source}: {p}", file=sys.stderr)
    if not problems:
        print(f"PASS {source}: {len(rows)} epochs, plotted by ultralytics.utils.plotting.plot_results")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
