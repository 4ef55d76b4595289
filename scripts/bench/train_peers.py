#!/usr/bin/env python3
"""The Ultralytics peer of `headroom train`: same starting weights, same data, same evaluator.

Why: docs/BENCHMARKS.md "Do no harm" measures headroom's head
fine-tune alone; this is what Ultralytics itself does with the same student, the same images and
`freeze=10` (backbone frozen: neck + head train), scored by `headroom eval` as headroom's runs are.

What it does (never in CI; the Ultralytics environment of scripts/ultralytics-env.sh):
  1. In a child process (its peak RSS is `ru_maxrss` through `os.wait4`, as scripts/bench/train_memory.py):
     YOLO(PT).train(data=DATA, freeze=F, batch=B, epochs=N, imgsz=S, workers=0, device='cpu', seed=0,
     deterministic=True, val=False, plots=False, amp=False) with torch threads = --threads.
     Ultralytics still validates once on DATA's val split after the last epoch (it always does).
     The default optimizer=auto picks AdamW(lr=0.002*5/(4+nc)) for runs under 10k iterations and
     ignores lr0; `--lr0 X` therefore also sets `--optimizer SGD` unless --optimizer is given.
     The optimizer and rate it used are read from its log.
  2. Exports weights/last.pt to ONNX (static SxS, opset 17, simplified).
  3. Scores that ONNX with `headroom eval --model X --data VAL.yaml --json-out` for each --val
     (and, with --baseline ONNX, the starting ONNX too).
  Prints one JSON line: mAP50 / mAP50-95 per val set, peak MB, seconds, optimizer, load average.

PT is an Ultralytics checkpoint; for an ONNX-only student make one with
scripts/fixtures/onnx_to_pt.py (same weights, BatchNorm as identity + folded bias).

Usage: source .deps/ultralytics.env && source .deps/env.sh &&
  OMP_NUM_THREADS=1 python scripts/bench/train_peers.py --headroom /tmp/hr/headroom \
      --pt .deps/peers/yolov8n-shapes-160.pt --data base-train/data.yaml --epochs 3 \
      --val base-val/data.yaml [--val field-val/data.yaml] [--baseline models/demo/yolov8n-shapes-160.onnx] \
      [--batch 2] [--freeze 10] [--imgsz 160] [--lr0 1e-4] [--optimizer SGD] [--set warmup_bias_lr=0.0] \
      [--threads 1] [--work /tmp/peers/runs] [--name NAME]
"""
import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import json, sys, torch
kw = json.loads(sys.argv[1])
torch.set_num_threads(kw.pop("threads"))
from ultralytics import YOLO
YOLO(kw.pop("pt")).train(**kw)
"""


def child_peak(cmd, log):
    """Runs `cmd`, output to `log`; returns (seconds, its own peak RSS in MB) through `os.wait4`."""
    start = time.time()
    with open(log, "w") as out:
        child = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(child.pid, 0)
    seconds = time.time() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"Ultralytics training failed, see {log}:\n{Path(log).read_text()[-3000:]}")
    return seconds, usage.ru_maxrss / 1024.0


def evaluate(headroom, model, data_yaml, out_json):
    subprocess.run([headroom, "-q", "eval", "--model", str(model), "--data", str(data_yaml), "--threads", "1",
                    "--json-out", str(out_json)], check=True, stdout=subprocess.DEVNULL)
    m = json.loads(Path(out_json).read_text())["metrics"]
    return {"map50": round(m["map50"], 4), "map50_95": round(m["map50_95"], 4)}


def value(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--headroom", default="headroom")
    p.add_argument("--pt", required=True, help="Ultralytics checkpoint to start from")
    p.add_argument("--data", required=True, help="train data.yaml")
    p.add_argument("--val", nargs="+", required=True, help="data.yaml(s) whose val split headroom eval scores")
    p.add_argument("--baseline", help="also score this ONNX (the starting model) on each --val")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--freeze", type=int, default=10)
    p.add_argument("--imgsz", type=int, default=160)
    p.add_argument("--lr0", type=float, help="initial rate (implies --optimizer SGD unless given)")
    p.add_argument("--optimizer", help="Ultralytics optimizer (default auto)")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="more Ultralytics train arguments")
    p.add_argument("--threads", type=int, default=1, help="torch threads of the training process")
    p.add_argument("--work", default="/tmp/peers/runs")
    p.add_argument("--name", help="run name (default: derived from the settings); an existing run is replaced")
    args = p.parse_args()

    optimizer = args.optimizer or ("SGD" if args.lr0 is not None else "auto")
    name = args.name or f"u-{Path(args.data).parent.name}-e{args.epochs}-f{args.freeze}-b{args.batch}-{optimizer}" + (
        f"-lr{args.lr0:g}" if args.lr0 is not None else "")
    work = Path(args.work).resolve()
    run = work / name
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    kw = {"pt": str(Path(args.pt).resolve()), "threads": args.threads, "data": str(Path(args.data).resolve()),
          "freeze": args.freeze, "batch": args.batch, "epochs": args.epochs, "imgsz": args.imgsz, "workers": 0,
          "device": "cpu", "seed": 0, "deterministic": True, "val": False, "plots": False, "amp": False,
          "optimizer": optimizer, "project": str(work), "name": name, "exist_ok": True}
    if args.lr0 is not None:
        kw["lr0"] = args.lr0
    for item in args.set:
        k, _, v = item.partition("=")
        kw[k] = value(v)

    load_before = os.getloadavg()
    log = run / "ultralytics.log"
    seconds, peak = child_peak([sys.executable, "-c", CHILD, json.dumps(kw)], log)
    load_after_train = os.getloadavg()
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", log.read_text(errors="replace"))
    chosen = re.search(r"optimizer: (\w+)\(lr=([0-9.eE+-]+), momentum=([0-9.eE+-]+)\)", text)
    groups = re.search(r"with parameter groups (.*)", text)

    import torch
    torch.set_num_threads(args.threads)
    from ultralytics import YOLO
    last = run / "weights/last.pt"
    exported = Path(YOLO(str(last)).export(format="onnx", imgsz=args.imgsz, opset=17, simplify=True, dynamic=False))
    report = {
        "peer": "ultralytics", "pt": args.pt, "data": args.data, "epochs": args.epochs, "batch": args.batch,
        "freeze": args.freeze, "imgsz": args.imgsz, "threads": args.threads,
        "lr0_asked": args.lr0, "set": args.set,
        "optimizer": {"asked": optimizer, "used": chosen.group(1) if chosen else None,
                      "lr0": float(chosen.group(2)) if chosen else None,
                      "momentum": float(chosen.group(3)) if chosen else None,
                      "groups": groups.group(1).strip() if groups else None},
        "peak_mb": round(peak, 1), "seconds": round(seconds, 1), "onnx": str(exported), "log": str(log),
        "val": {},
    }
    for i, val in enumerate(args.val):
        key = str(val)
        report["val"][key] = {"after": evaluate(args.headroom, exported, val, run / f"eval-{i}.json")}
        if args.baseline:
            report["val"][key]["before"] = evaluate(args.headroom, args.baseline, val, run / f"eval-{i}-before.json")
    report["load_before"] = [round(x, 2) for x in load_before]
    report["load_after_train"] = [round(x, 2) for x in load_after_train]
    (run / "peer.json").write_text(json.dumps(report) + "\n")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
