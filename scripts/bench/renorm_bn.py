#!/usr/bin/env python3
"""headroom's trunk re-normalisation (`headroom train --renorm N`) against PyTorch's own BatchNorm
re-estimation (AdaBN) on an un-folded Ultralytics model: the mAP50-95 of each, on the same splits.

Why: headroom re-normalises BatchNorm-folded exports by measuring each Conv's output statistics
and folding an affine correction into its weight and bias. On a model that still has its
BatchNorms, the textbook way is to re-estimate their running statistics on the new images in
train mode. Both should give the same model; this measures how close (issue "adaptation": mAP
within 0.5 point).

What it does, on the demo scenario of scripts/bench/adaptation.sh (its work folder: the student,
64 `base` train images as the old domain, label's train split of the pseudo-labelled `field`
images as the new one, `field` val and `base` val as the scored splits):
  1. the un-folded model: scripts/fixtures/onnx_to_pt.py's conversion of the demo student, its
     BatchNorms given the statistics of their inputs on the old images (`--calibrate`): eval mode
     gives the ONNX's outputs, and the running statistics are the old domain's;
  2. for each N: `headroom train --renorm N` (one head-only epoch; its renorm.onnx is the
     re-normalised model before any training; the names of the N Convs from its results.json);
  3. PyTorch: the BatchNorms of those N Convs reset, put in train mode with a cumulative average
     (momentum None), one forward pass of all the new images as one batch (so every BatchNorm
     normalises by the new images' statistics, as headroom corrects one Conv after another), back to
     eval; then each of those Conv+BatchNorm pairs folded into the export's Conv (W·γ/√(v+ε),
     β − μ·γ/√(v+ε)), written into a copy of the student's ONNX;
  4. `headroom eval` of the student, both re-normalised files, on `field` val and `base` val.
Prints a Markdown table. headroom clamps each scale to [0.5, 2]; PyTorch does not.

Usage (never in CI; the Ultralytics environment of scripts/ultralytics-env.sh):
  source .deps/ultralytics.env && source .deps/env.sh &&
  python scripts/bench/renorm_bn.py --work /tmp/ad64 [--counts 1,2,3,5,10,57] [--headroom target/debug/headroom]
(run scripts/bench/adaptation.sh /tmp/ad64 first, or let this script make the data with the same seeds)
"""
import argparse
import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import torch
import torch.nn as nn
from onnx import numpy_helper

root = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(root / "scripts/fixtures"))
import onnx_to_pt  # noqa: E402  (the conversion and its letterbox)

MODEL = root / "models/demo/yolov8n-shapes-160.onnx"
TEACHER = root / "models/demo/teacher-shapes-160.onnx"


def run(*cmd, **kw):
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def data(headroom, work):
    """The adaptation benchmark's folders, made with its seeds when missing."""
    sets = [("base-train", "base", 1, 64, 1), ("base", "base", 2, 1, 48), ("field-train", "field", 11, 64, 1),
            ("field", "field", 12, 1, 48)]
    for name, preset, seed, train, val in sets:
        if not (work / name / "data.yaml").exists():
            run(headroom, "-q", "synth", "--preset", preset, "--seed", seed, "--train", train, "--val", val,
                "--out", work / name, stdout=subprocess.DEVNULL)
    if not (work / "labelled/data.yaml").exists():
        run(headroom, "-q", "label", "--teacher", TEACHER, "--images", work / "field-train/images/train",
            "--out", work / "labelled", stdout=subprocess.DEVNULL)


def images_of(listing):
    base = listing.parent
    return [Path(line) if Path(line).is_absolute() else base / line
            for line in listing.read_text().split() if line.strip()]


def mapval(headroom, model, data_yaml):
    out = run(headroom, "-q", "eval", "--model", model, "--data", data_yaml, "--threads", "1", "--json",
              capture_output=True, text=True).stdout
    return json.loads(out)["metrics"]["map50_95"]


def pytorch_adabn(model, nodes, new_images, size):
    """A copy of `model` whose BatchNorms after the Convs named `nodes` are re-estimated on `new_images`."""
    model = copy.deepcopy(model).eval()
    modules = dict(model.named_modules())
    bns = []
    for node in nodes:
        path = onnx_to_pt.scope_path(node)
        parent = modules[path.rsplit(".", 1)[0]]
        bn = parent.bn
        bn.reset_running_stats()
        bn.momentum = None
        bn.train()
        bns.append((node, path, parent.conv, bn))
    batch = torch.from_numpy(np.concatenate([onnx_to_pt.letterboxed(f, size) for f in new_images]))
    with torch.no_grad():
        model(batch)
    model.eval()
    return bns


def fold_into_onnx(src, dst, bns):
    proto = onnx.load(str(src))
    inits = {i.name: i for i in proto.graph.initializer}
    by_name = {n.name: n for n in proto.graph.node}
    for node, _, conv, bn in bns:
        w_name, b_name = by_name[node].input[1], by_name[node].input[2]
        scale = (bn.weight / torch.sqrt(bn.running_var + bn.eps)).detach().double()
        w = conv.weight.detach().double() * scale.view(-1, 1, 1, 1)
        b = bn.bias.detach().double() - bn.running_mean.double() * scale
        for name, value in ((w_name, w), (b_name, b)):
            inits[name].CopyFrom(numpy_helper.from_array(value.float().numpy(), name))
    onnx.save(proto, str(dst))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", type=Path, default=Path("/tmp/headroom-adaptation"))
    p.add_argument("--headroom", default=str(root / "target/debug/headroom"))
    p.add_argument("--counts", default="1,2,3,5,10,57")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    work, headroom = args.work, args.headroom
    data(headroom, work)
    model, _, imgsz, unmatched, left, _ = onnx_to_pt.convert(MODEL, "yolov8n.yaml")
    if unmatched or left:
        sys.exit(f"conversion incomplete: {unmatched} {left}")
    model.float().eval()
    n_old = onnx_to_pt.calibrate(model, work / "base-train/images/train", imgsz, 10_000)
    new_images = images_of(work / "labelled/train.txt")
    print(f"un-folded model: BatchNorms calibrated on {n_old} old images; {len(new_images)} new images")
    scores = lambda m: (mapval(headroom, m, work / "field/data.yaml"), mapval(headroom, m, work / "base/data.yaml"))
    sf, sb = scores(MODEL)
    rows = [f"| student (none) | {sf:.4f} | {sb:.4f} | | | |"]
    out = work / "renorm-bn"
    out.mkdir(exist_ok=True)
    for count in [int(c) for c in args.counts.split(",")]:
        name = f"renorm{count}"
        run(headroom, "-q", "train", "--model", MODEL, "--data", work / "labelled/data.yaml", "--replay",
            work / "base-train/data.yaml", "--renorm", count, "--train", "head", "--nbs", 64, "--epochs", 1,
            "--mosaic", 0, "--scale", 0, "--translate", 0, "--hsv", "0,0,0", "--threads", args.threads,
            "--project", out, "--name", name, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) \
            if not (out / name / "results.json").exists() else None
        nodes = [s["node"] for s in json.loads((out / name / "results.json").read_text())["renorm"]]
        bns = pytorch_adabn(model, nodes, new_images, imgsz)
        ref = out / f"{name}-pytorch.onnx"
        fold_into_onnx(MODEL, ref, bns)
        hf, hb = scores(out / name / "renorm.onnx")
        pf, pb = scores(ref)
        rows.append(f"| {len(nodes)} ({nodes[0]} … {nodes[-1]}) | {hf:.4f} | {hb:.4f} | {pf:.4f} | {pb:.4f} | "
                    f"{100 * (hf - pf):+.2f} / {100 * (hb - pb):+.2f} |")
        print(rows[-1], flush=True)
    print("\n| Convs re-normalised | headroom field | headroom base | PyTorch field | PyTorch base | "
          "difference (points, field / base) |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
