#!/usr/bin/env python3
"""Fine-tuning quality of `headroom train` settings: mAP50-95 before and after, on several val sets.

Why: the train issue's accuracy benchmarks — "do no harm" (the demo model fine-tuned on its own
training data must not lose more than 0.5 point), field recovery on teacher pseudo-labels (KD on vs
off) and forgetting (the same run scored on the old scenes) — for several settings in one run, each
scored by `headroom eval` (Ultralytics `val`'s conventions) on the written `last.onnx`.

Usage (stdlib only; no Ultralytics needed):
  python scripts/bench/train_quality.py --headroom target/debug/headroom --model models/demo/yolov8n-shapes-160.onnx \
      --data TRAIN.yaml --val base=BASE_VAL.yaml --val field=FIELD_VAL.yaml --epochs 3 \
      --run "sgd 1e-4=" --run "auto=--optimizer auto" [--work DIR] [--threads 2]
Each --run is NAME=EXTRA ARGS for `headroom train`. Prints a JSON report (with the load average).
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def evaluate(headroom, model, yaml):
    out = subprocess.run([headroom, "-q", "eval", "--model", str(model), "--data", str(yaml), "--json"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"eval {model} on {yaml} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout)["metrics"]["map50_95"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--headroom", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--val", action="append", default=[], help="NAME=data.yaml to score on (its val split)")
    p.add_argument("--run", action="append", default=[], help="NAME=extra args of headroom train")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--work")
    args = p.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="headroom-quality-"))
    vals = dict(v.split("=", 1) for v in args.val)
    report = {"model": args.model, "data": args.data, "epochs": args.epochs, "load_before": os.getloadavg()}
    report["before"] = {name: round(evaluate(args.headroom, args.model, y), 4) for name, y in vals.items()}
    report["runs"] = []
    for spec in args.run:
        name, extra = spec.split("=", 1)
        run = work / f"{name.replace(' ', '_')}-{int(time.time())}"
        cmd = [args.headroom, "-q", "train", "--model", args.model, "--data", args.data, "--epochs", str(args.epochs),
               "--threads", str(args.threads), "--project", str(run.parent), "--name", run.name] + shlex.split(extra)
        started = time.time()
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"{name} failed:\n{out.stderr[-3000:]}")
        after = {v: round(evaluate(args.headroom, run / "last.onnx", y), 4) for v, y in vals.items()}
        change = {v: round(100 * (after[v] - report["before"][v]), 2) for v in vals}
        peak = json.loads((run / "results.json").read_text()).get("peak_rss_mb")
        report["runs"].append({"name": name, "args": extra, "after": after, "points": change,
                               "seconds": round(time.time() - started, 1), "peak_mb": peak})
        print(json.dumps(report["runs"][-1]), file=sys.stderr)
    report["load_after"] = os.getloadavg()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
