#!/usr/bin/env python3
"""Tiles a grid of small synth images into large ones, with their YOLO labels.

Why: `headroom synth` draws objects as a fraction of the image, so at a 640 letterbox every object
is 77-182 px, and a YOLOv8s that sees those sizes must be trained at 640 (~4 s per image per step
on 2 cores). A 4x4 grid of 160x120 images makes a 640x480 image whose objects have the sizes a
model trained at imgsz 160 knows, with ~50 objects per image (a crowded scene, which also makes
decoding and NMS do real work). Used by scripts/fixtures/make_teachers.py (the large teacher's
val split) and scripts/bench/label_bench.sh (the large teacher's benchmark images).

Usage: python scripts/bench/tile.py --src SYNTH_DIR/images/val --out OUT_DIR --grid 4x4 [--count N]
Writes OUT_DIR/images/val/*.png, OUT_DIR/labels/val/*.txt and OUT_DIR/data.yaml.
"""
import argparse
from pathlib import Path

import cv2
import numpy as np


def tile(src, out, cols, rows, count):
    images = sorted(Path(src).glob("*.png"))
    per = cols * rows
    if len(images) < per * count:
        raise SystemExit(f"{src}: {len(images)} images, {per * count} needed for {count} tiles of {cols}x{rows}")
    labels_dir = Path(src).parent.parent / "labels" / Path(src).name
    (out / "images/val").mkdir(parents=True, exist_ok=True)
    (out / "labels/val").mkdir(parents=True, exist_ok=True)
    for t in range(count):
        group = images[t * per:(t + 1) * per]
        tiles = [cv2.imread(str(p)) for p in group]
        h, w = tiles[0].shape[:2]
        canvas = np.zeros((h * rows, w * cols, 3), np.uint8)
        lines = []
        for k, (path, image) in enumerate(zip(group, tiles)):
            r, c = divmod(k, cols)
            canvas[r * h:(r + 1) * h, c * w:(c + 1) * w] = image
            label = labels_dir / (path.stem + ".txt")
            rows_text = label.read_text().split("\n") if label.exists() else []
            for line in filter(None, (x.strip() for x in rows_text)):
                cls, x, y, bw, bh = line.split()
                lines.append(f"{cls} {(c + float(x)) / cols:.6f} {(r + float(y)) / rows:.6f} "
                             f"{float(bw) / cols:.6f} {float(bh) / rows:.6f}")
        name = f"tile_{t:06d}"
        cv2.imwrite(str(out / "images/val" / f"{name}.png"), canvas)
        (out / "labels/val" / f"{name}.txt").write_text("".join(x + "\n" for x in lines))
    (out / "data.yaml").write_text(f"path: {out.resolve()}\ntrain: images/val\nval: images/val\n"
                                   "names:\n  0: circle\n  1: square\n  2: triangle\n")
    return out / "data.yaml"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", required=True, help="folder of synth PNGs (labels in ../../labels/<split>)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--grid", default="4x4", help="COLSxROWS")
    parser.add_argument("--count", type=int, default=256, help="tiled images to write")
    args = parser.parse_args()
    cols, rows = (int(v) for v in args.grid.lower().split("x"))
    print(tile(args.src, Path(args.out), cols, rows, args.count))


if __name__ == "__main__":
    main()
