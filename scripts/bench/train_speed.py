#!/usr/bin/env python3
"""Training speed, headroom against Ultralytics: seconds per epoch, same model, images and threads.

Why: the train issue's speed goal (an epoch on cached trunk features at most 0.25x the time of
Ultralytics `freeze=10 batch=2` at 640) and the step-speed issue's (seconds per image of every layer
trained at most 1.0x Ultralytics' full fine-tune, `--freeze 0`), measured side by side in one run.

What it does (never in CI; the Ultralytics environment of scripts/ultralytics-env.sh), in the work
folder of scripts/bench/train_memory.py (it makes the data and the student at --imgsz when missing):
  - Ultralytics: YOLO(yaml).train(freeze=--freeze or None, batch=--batch, epochs=3, workers=0,
    amp=False, val=False, plots=False, device=cpu); its results.csv `time` column is cumulative, so
    an epoch's time is the difference between epochs 1 and 2 (the last epoch also validates).
  - headroom `train --batch B --epochs 3` with each --run's flags (default: head with
    `--cache-features`, `--trunk ort` and `--trunk torch`): metrics.csv `seconds` (training only;
    validation and writing ONNX are outside it), epochs 2 and 3 averaged. The per-phase split comes
    from the log line `epoch N time: ...`.
  - seconds per image: an epoch's seconds over the train images (both see every image once an epoch).
  - peak memory: headroom's metrics.csv `peak_rss_mb`; Ultralytics' child process peak (VmHWM).
Prints one JSON report with the load average before and after.

Usage: source .deps/ultralytics.env && source .deps/env.sh &&
  python scripts/bench/train_speed.py --headroom target/debug/headroom --work /tmp/trmem [--only headroom]
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from train_memory import child_peak  # noqa: E402

ULTRALYTICS_TRAIN = """
import sys, torch
torch.set_num_threads(int(sys.argv[3]))
from ultralytics import YOLO
YOLO(sys.argv[1]).train(data=sys.argv[2], imgsz=int(sys.argv[4]), batch=int(sys.argv[6]), epochs=3,
    freeze=int(sys.argv[7]) or None, workers=0,
    amp=False, plots=False, val=False, cache=False, device="cpu", project=sys.argv[5], name="speed", exist_ok=True,
    verbose=False)
"""


def train_images(work):
    return sum(1 for f in (work / "data" / "images" / "train").iterdir() if f.is_file())


def headroom_run(args, work, name, extra):
    run = work / "runs" / f"{name}-{int(time.time())}"
    student = args.student or str(work / f"yolov8n-nc3-{args.imgsz}.onnx")
    cmd = [args.headroom, "train", "--model", student, "--data",
           str(work / "data" / "data.yaml"), "--batch", str(args.batch), "--epochs", "3", "--threads",
           str(args.threads), "--project", str(run.parent), "--name", run.name] + extra
    started = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - started
    if out.returncode != 0:
        sys.exit(f"headroom failed:\n{out.stderr[-3000:]}")
    rows = list(csv.DictReader(open(run / "metrics.csv")))
    seconds = [float(r["seconds"]) for r in rows]
    phases = {}
    for line in out.stderr.splitlines():
        m = re.search(r"epoch (\d) time: (.*)", line)
        if m and m.group(1) in ("2", "3"):
            for part in m.group(2).split("; "):
                label, value = part.split(" ")[0], float(part.split(" ")[1])
                phases[label] = round(phases.get(label, 0.0) + value / 2, 2)
    per_epoch = sum(seconds[1:]) / 2
    return {"extra": " ".join(extra), "epoch_seconds": [round(s, 2) for s in seconds],
            "per_epoch": round(per_epoch, 2), "per_image": round(per_epoch / train_images(work), 4),
            "wall": round(wall, 1),
            "outside_epochs": round(wall - sum(seconds), 1), "phases": phases,
            "peak_mb": float(rows[-1]["peak_rss_mb"])}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--headroom", required=True)
    p.add_argument("--work", required=True, help="the work folder of train_memory.py")
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--freeze", type=int, default=10, help="Ultralytics' freeze (0: a full fine-tune, every layer)")
    p.add_argument("--only", choices=["ultralytics", "headroom"])
    p.add_argument("--student", help="the ONNX student headroom trains (default: the work folder's export at --imgsz); "
                                     "a teacher needs one whose class names are the data's (models/demo's)")
    p.add_argument("--run", action="append", metavar="NAME:ARGS",
                   help="a headroom run, e.g. 'all-fast:--train all --allocator fast' (repeatable; default: "
                        "head with --cache-features, --trunk ort and --trunk torch)")
    args = p.parse_args()
    runs = [(r.split(":", 1)[0], r.split(":", 1)[1].split()) for r in args.run or []] or [
        ("cache", ["--train", "head", "--cache-features"]), ("ort", ["--train", "head", "--trunk", "ort"]),
        ("torch", ["--train", "head", "--trunk", "torch"])]
    work = Path(args.work)
    if not (work / f"yolov8n-nc3-{args.imgsz}.onnx").exists():
        subprocess.run([sys.executable, str(Path(__file__).parent / "train_memory.py"), "--headroom", args.headroom,
                        "--work", str(work), "--imgsz", str(args.imgsz), "--only", "headroom"], check=True,
                       stdout=sys.stderr)
    report = {"imgsz": args.imgsz, "threads": args.threads, "batch": args.batch, "images": train_images(work),
              "ultralytics_freeze": args.freeze, "load_before": [round(x, 2) for x in os.getloadavg()]}
    if args.only in (None, "headroom"):
        report["headroom"] = [headroom_run(args, work, n, e) for n, e in runs]
    if args.only in (None, "ultralytics"):
        cmd = [sys.executable, "-c", ULTRALYTICS_TRAIN, str(work / "yolov8n-nc3.yaml"),
               str(work / "data" / "data.yaml"), str(args.threads), str(args.imgsz), str(work / "runs"),
               str(args.batch), str(args.freeze)]
        wall, peak = child_peak(cmd)
        rows = list(csv.DictReader(open(work / "runs" / "speed" / "results.csv")))
        times = [float(r["time"]) for r in rows]
        per_epoch = times[1] - times[0]
        report["ultralytics"] = {"cumulative": times, "per_epoch": round(per_epoch, 2),
                                 "per_image": round(per_epoch / train_images(work), 4),
                                 "wall": round(wall, 1), "peak_mb": round(peak, 1)}
    if "headroom" in report and "ultralytics" in report:
        u = report["ultralytics"]["per_epoch"]
        report["ratios"] = {h["extra"]: round(h["per_epoch"] / u, 3) for h in report["headroom"]}
        um = report["ultralytics"]["peak_mb"]
        report["memory_ratios"] = {h["extra"]: round(h["peak_mb"] / um, 3) for h in report["headroom"]}
    report["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
