#!/usr/bin/env python3
"""INT8 accuracy, size and latency: headroom export against ONNX Runtime's quantize_static.

Why: the export issue's accuracy goal — INT8 Q/DQ within 1.0 point of FP32 mAP50-95, equal or better
than `onnxruntime.quantization.quantize_static` — measured side by side in one run, on the same model,
calibration images and val split.

What it does (never in CI; the Ultralytics environment of scripts/ultralytics-env.sh has onnxruntime
and Ultralytics' LetterBox):
  - headroom: `headroom export --fp16 --int8 --method M` for M in minmax, percentile, entropy, and
    once more with `--sensitivity --max-drop 1.0 --method entropy` (the method that loses most here);
  - peers: quantize_static(QDQ, per_channel=True, ONNX Runtime's default U8 activations and S8
    weights) with MinMax, Entropy and Percentile, over the whole graph and restricted to Conv,
    fed the same calibration images preprocessed as headroom preprocesses them (Ultralytics
    `predict` letterbox, RGB, /255);
  - every file: mAP50-95 on the val split by `headroom eval --json` (Ultralytics `val` conventions,
    the same scorer for all), size, and ONNX Runtime CPU latency (Python session, median of 50 runs
    on one calibration image, `--threads` intra-op threads; model run only).
Prints a Markdown table and the load average before and after.

Usage: source .deps/ultralytics.env && source .deps/env.sh &&
  python scripts/bench/int8_peers.py --headroom target/debug/headroom --model M.onnx \
      --calib DATA.yaml --data DATA.yaml --work /tmp/int8 [--threads 2]
--from-pt W.pt --imgsz N first exports Ultralytics weights to a static ONNX at N px (the 640 model of
docs/BENCHMARKS.md: .deps/peers/yolov8n-shapes-160.pt from scripts/fixtures/onnx_to_pt.py) as --model.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import onnxruntime as ort
from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, quantize_static


def load_yaml_images(path, split):
    import yaml

    cfg = yaml.safe_load(Path(path).read_text())
    root = Path(cfg.get("path") or Path(path).parent)
    if not root.is_absolute():
        root = Path(path).parent / root
    source = root / cfg[split]
    exts = {".jpg", ".jpeg", ".png", ".bmp", ".webp"}
    return sorted(p for p in source.rglob("*") if p.suffix.lower() in exts)


def calibration_images(calib, limit=500):
    calib = Path(calib)
    if calib.suffix in (".yaml", ".yml"):
        images = load_yaml_images(calib, "train")
    else:
        exts = {".jpg", ".jpeg", ".png", ".bmp", ".webp"}
        images = sorted(p for p in calib.rglob("*") if p.suffix.lower() in exts)
    n = min(len(images), limit)
    return [images[i * len(images) // n] for i in range(n)]


def preprocess(path, size):
    from ultralytics.data.augment import LetterBox

    bgr = cv2.imread(str(path))
    boxed = LetterBox((size, size), auto=False, stride=32)(image=bgr)
    rgb = boxed[:, :, ::-1].transpose(2, 0, 1)
    return np.ascontiguousarray(rgb, dtype=np.float32)[None] / 255.0


class Reader(CalibrationDataReader):
    def __init__(self, inputs, name):
        self.inputs, self.name, self.i = inputs, name, 0

    def get_next(self):
        if self.i >= len(self.inputs):
            return None
        self.i += 1
        return {self.name: self.inputs[self.i - 1]}

    def rewind(self):
        self.i = 0


def evaluate(headroom, model, data):
    out = subprocess.run([headroom, "-q", "eval", "--model", str(model), "--data", str(data), "--json"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "eval failed"
    return json.loads(out.stdout)["metrics"]["map50_95"], None


def latency(model, sample, threads):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    for _ in range(3):
        session.run(None, {name: sample})
    times = []
    for _ in range(50):
        t = time.perf_counter()
        session.run(None, {name: sample})
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--headroom", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--from-pt", help="export these Ultralytics weights to --model first")
    ap.add_argument("--imgsz", type=int, default=640, help="input size of the --from-pt export")
    ap.add_argument("--calib", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    model = Path(args.model)
    if args.from_pt:
        from ultralytics import YOLO

        exported = Path(YOLO(args.from_pt).export(format="onnx", imgsz=args.imgsz, opset=17, simplify=True))
        model.parent.mkdir(parents=True, exist_ok=True)
        exported.replace(model)
    stem = model.stem
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    inp = session.get_inputs()[0]
    size = inp.shape[2] if isinstance(inp.shape[2], int) else 640
    images = calibration_images(args.calib)
    inputs = [preprocess(p, size) for p in images]
    rows = [("FP32", "", model, None)]

    for method in ["minmax", "percentile", "entropy"]:
        out = work / f"headroom-{method}"
        cmd = [args.headroom, "-q", "export", "--model", str(model), "--int8", "--calib", args.calib,
               "--method", method, "--out", str(out), "--force", "--threads", str(args.threads)]
        if method == "minmax":
            cmd.append("--fp16")
        t = time.time()
        subprocess.run(cmd, check=True, capture_output=True)
        note = f"export {time.time() - t:.1f} s"
        if method == "minmax":
            rows.append(("headroom FP16", "", out / f"{stem}.fp16.onnx", None))
        rows.append((f"headroom INT8 Q/DQ", method, out / f"{stem}.int8.onnx", note))
    out = work / "headroom-sensitivity"
    t = time.time()
    run = subprocess.run([args.headroom, "-q", "export", "--model", str(model), "--int8", "--calib", args.calib,
                          "--method", "entropy", "--sensitivity", "--max-drop", "1.0", "--data", args.data,
                          "--out", str(out), "--force", "--threads", str(args.threads), "--json"],
                         check=True, capture_output=True, text=True)
    kept = len(json.loads(run.stdout)["int8"]["float_convs"])
    rows.append(("headroom INT8 Q/DQ --sensitivity", "entropy",
                 out / f"{stem}.int8.onnx", f"{kept} Convs float; export {time.time() - t:.1f} s"))

    methods = {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
               "percentile": CalibrationMethod.Percentile}
    for scope, ops in [("whole graph", None), ("Conv only", ["Conv"])]:
        for name, method in methods.items():
            path = work / f"ort-{scope.split()[0].lower()}-{name}.onnx"
            t = time.time()
            try:
                quantize_static(str(model), str(path), Reader(inputs, inp.name), quant_format=QuantFormat.QDQ,
                                per_channel=True, calibrate_method=method, op_types_to_quantize=ops)
                note = f"quantize {time.time() - t:.1f} s"
            except Exception as e:  # a failing peer is a result too
                note = f"failed: {type(e).__name__}: {e}"[:120]
                path = None
            rows.append((f"ORT quantize_static, {scope}", name, path, note))

    fp32_map = None
    table = []
    for label, method, path, note in rows:
        if path is None:
            table.append((label, method, None, None, None, None, note))
            continue
        m, err = evaluate(args.headroom, path, args.data)
        if fp32_map is None:
            fp32_map = m
        ms = latency(path, inputs[0], args.threads)
        table.append((label, method, m, None if m is None else (m - fp32_map) * 100, path.stat().st_size / 1e6, ms,
                      note or err or ""))
    load_after = os.getloadavg()
    print(f"model {model} ({size}), {len(images)} calibration images, val {args.data}, {args.threads} threads")
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f}")
    print()
    print("| file | method | mAP50-95 | Δ vs FP32 (points) | MB | ms per image (ORT CPU) | note |")
    print("|---|---|---|---|---|---|---|")
    for label, method, m, d, mb, ms, note in table:
        fmt = lambda v, f: "-" if v is None else format(v, f)
        print(f"| {label} | {method} | {fmt(m, '.4f')} | {fmt(d, '+.2f')} | {fmt(mb, '.2f')} | {fmt(ms, '.2f')} | {note} |")


if __name__ == "__main__":
    sys.exit(main())
