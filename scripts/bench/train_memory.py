#!/usr/bin/env python3
"""Training memory and time, headroom against Ultralytics, same model, same images, same threads.

Why: the train issue's memory goal — headroom head-only, batch 2, checkpointed, at 640, whole-process
peak RSS at most 0.35x Ultralytics `freeze=10 batch=2` — measured side by side in one run.

What it does (never in CI; the Ultralytics environment of scripts/ultralytics-env.sh):
  1. `headroom synth` writes N train + M val images (field preset) at the chosen size.
  2. Ultralytics builds YOLOv8n (full width, nc=3, random init — memory does not depend on the
     weights) and exports it to ONNX at IMGSZ (static, simplified): the student headroom trains.
  3. Each contender runs in its own process, one epoch, batch 2, `threads` threads; its peak resident
     memory is the kernel's `ru_maxrss` of that process alone (`os.wait4`; whole process: libraries,
     model, data, ONNX Runtime for headroom's validation).
     - Ultralytics: YOLO(yaml).train(freeze=10, batch=2, epochs=1, workers=0, amp=False, plots=False,
       val=False, cache=False, device=cpu) — its own augmentation pipeline (mosaic etc.) included.
     - headroom: `headroom train --train {head, neck+head, 0} [--no-checkpoint] --batch 2|B --epochs 1
       [--extra '--trunk torch' | '--cache-features']`, which also validates once through ONNX Runtime.
  Prints a JSON report (peaks in MB, seconds, ratios) and the load average before and after.

Usage: source .deps/ultralytics.env && source .deps/env.sh &&
  python scripts/bench/train_memory.py --headroom target/release/headroom [--imgsz 640] [--images 32]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ULTRALYTICS_TRAIN = """
import sys, torch
torch.set_num_threads(int(sys.argv[3]))
from ultralytics import YOLO
YOLO(sys.argv[1]).train(data=sys.argv[2], imgsz=int(sys.argv[4]), batch=2, epochs=1, freeze=10, workers=0,
    amp=False, plots=False, val=False, cache=False, device="cpu", project=sys.argv[5], name="u", exist_ok=True,
    verbose=False)
"""


def child_peak(cmd, env=None):
    """Runs `cmd` to completion; returns (seconds, its peak RSS in MB): `os.wait4` reports that one
    process's `ru_maxrss`, whatever ran before it."""
    start = time.time()
    with tempfile.TemporaryFile(mode="w+") as err:
        child = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.time() - start
        if child.returncode != 0:
            err.seek(0)
            sys.exit(f"{cmd[0]} failed:\n{err.read()[-3000:]}")
    return seconds, usage.ru_maxrss / 1024.0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--headroom", required=True)
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--images", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", choices=["ultralytics", "headroom"], help="run one contender")
    p.add_argument("--train", default="head", help="headroom: head, neck+head or freeze=N")
    p.add_argument("--no-checkpoint", action="store_true")
    p.add_argument("--batch", type=int, default=2, help="headroom's batch (Ultralytics' stays 2)")
    p.add_argument("--extra", default="", help="more headroom train arguments, e.g. '--trunk torch' or '--cache-features'")
    p.add_argument("--work", help="reuse this folder (dataset and student made once)")
    args = p.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="headroom-train-memory-"))
    data = work / "data"
    if not (data / "data.yaml").exists():
        subprocess.run([args.headroom, "-q", "synth", "--preset", "field", "--seed", "5", "--train", str(args.images),
                        "--val", "8", "--size", f"{args.imgsz}x{args.imgsz * 3 // 4}", "--out", str(data)],
                       check=True, stdout=subprocess.DEVNULL)
    yaml_path = work / "yolov8n-nc3.yaml"
    if not yaml_path.exists():
        import importlib.util  # the package's yaml without importing it (that would load torch here)
        import yaml
        package = Path(importlib.util.find_spec("ultralytics").origin).parent
        cfg = yaml.safe_load((package / "cfg/models/v8/yolov8.yaml").read_text())
        cfg["nc"] = 3
        cfg["scale"] = "n"
        yaml_path.write_text(yaml.safe_dump(cfg))
    student = work / f"yolov8n-nc3-{args.imgsz}.onnx"
    if not student.exists():
        # In a child: a contender forked from a parent that holds torch starts with the parent's
        # resident pages, and its ru_maxrss counts them (measured: 794 MB for a 379 MB run).
        export = ("import os, sys\nfrom ultralytics import YOLO\n"
                  "os.replace(YOLO(sys.argv[1]).export(format='onnx', imgsz=int(sys.argv[2]), simplify=True, "
                  "device='cpu'), sys.argv[3])")
        subprocess.run([sys.executable, "-c", export, str(yaml_path), str(args.imgsz), str(student)], check=True,
                       stdout=subprocess.DEVNULL)
    load_before = os.getloadavg()
    report = {"imgsz": args.imgsz, "images": args.images, "threads": args.threads, "work": str(work)}
    if args.only in (None, "headroom"):
        name = f"h-{args.train}-{'plain' if args.no_checkpoint else 'ckpt'}".replace("+", "")
        cmd = [args.headroom, "-q", "train", "--model", str(student), "--data", str(data / "data.yaml"),
               "--train", args.train, "--batch", str(args.batch), "--epochs", "1", "--threads", str(args.threads),
               "--project", str(work / "runs"), "--name", name + f"-{int(time.time())}"]
        if args.no_checkpoint:
            cmd.append("--no-checkpoint")
        cmd += args.extra.split()
        seconds, peak = child_peak(cmd)
        report["headroom"] = {"train": args.train, "batch": args.batch, "checkpoint": not args.no_checkpoint, "extra": args.extra,
                              "peak_mb": round(peak, 1), "seconds": round(seconds, 1)}
    if args.only in (None, "ultralytics"):
        cmd = [sys.executable, "-c", ULTRALYTICS_TRAIN, str(yaml_path), str(data / "data.yaml"), str(args.threads),
               str(args.imgsz), str(work / "runs")]
        seconds, peak = child_peak(cmd)
        report["ultralytics"] = {"freeze": 10, "peak_mb": round(peak, 1), "seconds": round(seconds, 1)}
    report["load_before"] = [round(x, 2) for x in load_before]
    report["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report))


if __name__ == "__main__":
    main()
