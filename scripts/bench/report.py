#!/usr/bin/env python3
"""Prints the markdown tables of scripts/bench/label_bench.sh from its output folder.

Usage: python scripts/bench/report.py OUT
Reads OUT/{small,large}/peers.json, dynamic/peers.json, headroom-{static,dynamic}.json and
agreement-*.json; prints, per teacher, images/s (best of the runs, and median) and the ratios to the
bare onnxruntime rate (batch 1) and to Ultralytics, then the load and versions.
"""
import argparse
import json
from pathlib import Path


def load(path):
    return json.loads(path.read_text()) if path.exists() else None


def row(name, result, bare, ultra, note=""):
    best, median = result["images_per_s_best"], result["images_per_s_median"]
    to_bare = f"{best / bare:.3f}" if bare else "–"
    to_ultra = f"{best / ultra:.2f}" if ultra else "–"
    return f"| {name} | {best:.2f} | {median:.2f} | {to_bare} | {to_ultra} | {note} |"


def teacher_table(folder, name):
    peers = load(folder / "peers.json")
    if peers is None:
        return [f"({folder}/peers.json missing)"]
    dynamic = load(folder / "dynamic/peers.json")
    bare = peers["bare_onnxruntime"]["batch1"]["images_per_s_best"]
    ultra = peers.get("ultralytics", {}).get("images_per_s_best")
    lines = [f"### {name} teacher: `{Path(peers['teacher']).name}` ({peers['teacher_bytes'] / 1e6:.1f} MB) at "
             f"{peers['imgsz']}, {peers['images']} images, {peers['threads']} threads, best of {peers['runs']}",
             "", "| contender | images/s | median | × bare ORT (b1) | × Ultralytics | note |",
             "|---|---:|---:|---:|---:|---|"]
    for tag, label in (("static", "headroom label (static model)"), ("dynamic", "headroom label (dynamic batch)")):
        result = load(folder / f"headroom-{tag}.json")
        if result:
            run = result["runs"][0]
            agreement = load(folder / f"agreement-{tag}.json")
            note = f"batch {run.get('batch')}, {run.get('streams', 1)} streams, {run.get('workers')} workers"
            if agreement:
                note += f"; agreement {100 * agreement['match_fraction']:.2f} %"
            lines.append(row(label, result, bare, ultra, note))
    if "ultralytics" in peers:
        lines.append(row("Ultralytics predict(save_txt)", peers["ultralytics"], bare, ultra, "batch 1"))
    lines.append(row("bare onnxruntime, sess.run only", peers["bare_onnxruntime"]["batch1"], bare, ultra, "batch 1"))
    if dynamic:
        for key, value in dynamic["bare_onnxruntime"].items():
            if key.startswith("batch"):
                lines.append(row("bare onnxruntime, batch-dynamic model", value, bare, ultra, key.replace("batch", "batch ")))
    if "python_onnxruntime" in peers:
        agreement = load(folder / "agreement-python.json")
        note = f"agreement {100 * agreement['match_fraction']:.2f} %" if agreement else ""
        lines.append(row("Python: cv2 + onnxruntime + numpy/torchvision NMS", peers["python_onnxruntime"], bare,
                         ultra, note))
    lines += ["", f"Load: before `{peers['load_before']['uptime']}`; after `{peers['load_after']['uptime']}`.", ""]
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    lines = []
    for name in ("large", "small"):
        lines += teacher_table(args.out / name, name)
    versions = next((load(args.out / n / "peers.json") or {} for n in ("small", "large")), {}).get("versions", {})
    lines.append("Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
