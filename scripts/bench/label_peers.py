#!/usr/bin/env python3
"""Peer side of the `headroom label` benchmark (issue 4, docs/BENCHMARKS.md): images/s of
(a) Ultralytics `YOLO(teacher.onnx).predict(save_txt=True, save_conf=True, stream=True)`,
(b) the bare inference rate: a Python onnxruntime loop timing only `sess.run` on inputs letterboxed
    beforehand (batch 1, and batch --batch when the model's batch is dynamic),
(c) a plain Python pipeline: cv2 read + letterbox, onnxruntime, numpy decode, torchvision NMS,
    YOLO txt written (the labels double as a check of agreement.py).
Every contender gets the same thread count: ONNX Runtime intra-op threads (Ultralytics' session is
patched to get them, it takes the runtime default otherwise), torch and OpenCV threads.

Usage (dev tool, never in CI; Ultralytics env: source .deps/ultralytics.env):
  python scripts/bench/label_peers.py --teacher T.onnx --images DIR --imgsz 640 --threads 2 --runs 3 \
      --out OUT [--batches 1,8] [--skip ultralytics,bare,python]
Writes OUT/peers.json and OUT/ultralytics/labels/*.txt, OUT/python/labels/*.txt.
Model load and the first (cold) call are outside every timing; Ultralytics does not warm up an ONNX
model on CPU (AutoBackend.warmup skips it), so one image is predicted before the timed passes.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import time
from pathlib import Path

import cv2
import numpy as np
import onnxruntime as ort
import torch
import torchvision

CONF, IOU, MAX_DET, MAX_NMS, MAX_WH = 0.25, 0.7, 300, 30000, 7680


def load_avg():
    """The 1/5/15-minute load averages and the `uptime` line."""
    one, five, fifteen = os.getloadavg()
    try:
        line = os.popen("uptime").read().strip()
    except OSError:
        line = ""
    return {"load1": one, "load5": five, "load15": fifteen, "uptime": line}


def session(path, threads):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def pin_ultralytics_threads(threads):
    """Makes every InferenceSession created from now on use `threads` intra-op threads."""
    original = ort.InferenceSession

    class Pinned(original):
        def __init__(self, path, sess_options=None, *args, **kwargs):
            options = sess_options or ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            super().__init__(path, options, *args, **kwargs)

    ort.InferenceSession = Pinned


def letterbox(image, size):
    """Ultralytics' LetterBox(auto=False, center=True): resize (bilinear) into size x size, pad 114."""
    h, w = image.shape[:2]
    r = min(size / h, size / w)
    nw, nh = int(round(w * r)), int(round(h * r))
    dw, dh = (size - nw) / 2, (size - nh) / 2
    if (w, h) != (nw, nh):
        image = cv2.resize(image, (nw, nh), interpolation=cv2.INTER_LINEAR)
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    image = cv2.copyMakeBorder(image, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(114, 114, 114))
    return image, r, (left, top)


def to_tensor(letterboxed):
    return np.ascontiguousarray(letterboxed[:, :, ::-1].transpose(2, 0, 1), dtype=np.float32)[None] / 255.0


def rate(n, seconds):
    return n / seconds if seconds > 0 else float("nan")


def summarise(rates):
    return {"images_per_s_best": max(rates), "images_per_s_median": statistics.median(rates),
            "runs_images_per_s": rates}


def bench_ultralytics(args, images, out):
    from ultralytics import YOLO

    pin_ultralytics_threads(args.threads)
    model = YOLO(str(args.teacher), task="detect")
    common = dict(imgsz=args.imgsz, conf=CONF, iou=IOU, max_det=MAX_DET, device="cpu", save_txt=True,
                  save_conf=True, save=False, stream=True, verbose=False, project=str(out), name="ultralytics",
                  exist_ok=True, batch=1)
    t0 = time.perf_counter()
    for _ in model.predict(source=str(images[0]), **common):
        pass
    cold = time.perf_counter() - t0
    labels = out / "ultralytics/labels"
    rates = []
    for _ in range(args.runs):
        shutil.rmtree(labels, ignore_errors=True)  # save_txt appends to existing files
        load = load_avg()
        t0 = time.perf_counter()
        n = sum(1 for _ in model.predict(source=str(args.images), **common))
        rates.append(rate(n, time.perf_counter() - t0))
        print(f"ultralytics predict: {n} images, {rates[-1]:.2f} images/s ({load['uptime']})", flush=True)
    return {**summarise(rates), "images": n, "first_call_s_incl_load": cold, "labels": str(labels)}


def bench_bare(args, images):
    sess = session(args.teacher, args.threads)
    name = sess.get_inputs()[0].name
    dynamic = not isinstance(sess.get_inputs()[0].shape[0], int)
    tensors = [to_tensor(letterbox(cv2.imread(str(p)), args.imgsz)[0]) for p in images]
    sess.run(None, {name: tensors[0]})  # cold call
    result = {"dynamic_batch": dynamic}
    batches = [b for b in args.batches if b == 1 or dynamic]
    for b in batches:
        stacked = [np.concatenate(tensors[i:i + b]) for i in range(0, len(tensors), b)]
        sess.run(None, {name: stacked[0]})
        rates = []
        for _ in range(args.runs):
            load = load_avg()
            t0 = time.perf_counter()
            for x in stacked:
                sess.run(None, {name: x})
            rates.append(rate(len(tensors), time.perf_counter() - t0))
            print(f"bare onnxruntime batch {b}: {rates[-1]:.2f} images/s ({load['uptime']})", flush=True)
        result[f"batch{b}"] = summarise(rates)
    return result


def decode(output, r, pad, shape):
    """[4+nc, N] → (xyxy in image pixels, conf, class) after conf filter and class-aware NMS."""
    pred = output.T
    scores = pred[:, 4:]
    cls = scores.argmax(1)
    conf = scores[np.arange(len(cls)), cls]
    keep = conf > CONF
    pred, cls, conf = pred[keep], cls[keep], conf[keep]
    if len(conf) > MAX_NMS:
        top = np.argsort(-conf)[:MAX_NMS]
        pred, cls, conf = pred[top], cls[top], conf[top]
    xy, wh = pred[:, :2], pred[:, 2:4] / 2
    boxes = np.concatenate([xy - wh, xy + wh], 1)
    kept = torchvision.ops.nms(torch.from_numpy(boxes + cls[:, None].astype(np.float32) * MAX_WH), torch.from_numpy(conf), IOU)
    kept = kept[:MAX_DET].numpy()
    boxes, conf, cls = boxes[kept], conf[kept], cls[kept]
    boxes[:, [0, 2]] = ((boxes[:, [0, 2]] - pad[0]) / r).clip(0, shape[1])
    boxes[:, [1, 3]] = ((boxes[:, [1, 3]] - pad[1]) / r).clip(0, shape[0])
    return boxes, conf, cls


def write_yolo(path, boxes, conf, cls, shape):
    h, w = shape[:2]
    lines = []
    for (x1, y1, x2, y2), c, k in zip(boxes, conf, cls):
        lines.append(f"{int(k)} {(x1 + x2) / 2 / w:g} {(y1 + y2) / 2 / h:g} {(x2 - x1) / w:g} {(y2 - y1) / h:g} {c:g}")
    path.write_text("".join(line + "\n" for line in lines))


def bench_python(args, images, out):
    sess = session(args.teacher, args.threads)
    name = sess.get_inputs()[0].name
    labels = out / "python/labels"
    labels.mkdir(parents=True, exist_ok=True)

    def one(path):
        image = cv2.imread(str(path))
        boxed, r, pad = letterbox(image, args.imgsz)
        output = sess.run(None, {name: to_tensor(boxed)})[0][0]
        boxes, conf, cls = decode(output, r, pad, image.shape)
        write_yolo(labels / (path.stem + ".txt"), boxes, conf, cls, image.shape)

    one(images[0])
    rates = []
    for _ in range(args.runs):
        load = load_avg()
        t0 = time.perf_counter()
        for path in images:
            one(path)
        rates.append(rate(len(images), time.perf_counter() - t0))
        print(f"python onnxruntime pipeline: {rates[-1]:.2f} images/s ({load['uptime']})", flush=True)
    return {**summarise(rates), "labels": str(labels)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--teacher", required=True, type=Path)
    parser.add_argument("--images", required=True, type=Path)
    parser.add_argument("--imgsz", type=int, required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batches", default="1,8", help="batches of the bare rate (above 1: dynamic-batch models only)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/peers"))
    parser.add_argument("--skip", default="", help="comma list of: ultralytics, bare, python")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    args.batches = [int(b) for b in args.batches.split(",")]
    torch.set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)
    images = sorted(p for p in args.images.iterdir() if p.suffix.lower() in {".png", ".jpg", ".jpeg", ".bmp"})
    if not images:
        raise SystemExit(f"{args.images}: no images")
    args.out.mkdir(parents=True, exist_ok=True)
    import ultralytics

    result = {
        "teacher": str(args.teacher), "teacher_bytes": args.teacher.stat().st_size, "images_dir": str(args.images),
        "images": len(images), "imgsz": args.imgsz, "threads": args.threads, "runs": args.runs,
        "settings": {"conf": CONF, "iou": IOU, "max_det": MAX_DET},
        "versions": {"ultralytics": ultralytics.__version__, "onnxruntime": ort.__version__,
                     "torch": torch.__version__, "opencv": cv2.__version__, "numpy": np.__version__,
                     "python": platform.python_version()},
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine()},
        "load_before": load_avg(),
    }
    if "bare" not in skip:
        result["bare_onnxruntime"] = bench_bare(args, images)
    if "ultralytics" not in skip:
        result["ultralytics"] = bench_ultralytics(args, images, args.out)
    if "python" not in skip:
        result["python_onnxruntime"] = bench_python(args, images, args.out)
    result["load_after"] = load_avg()
    (args.out / "peers.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out / 'peers.json'}")


if __name__ == "__main__":
    main()
