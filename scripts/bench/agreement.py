#!/usr/bin/env python3
"""Agreement of `headroom label` with Ultralytics' predictions (issue 4: >= 99 % of boxes matched).

A reference box (Ultralytics) is matched when the other side has an unmatched box of the same class
with IoU >= --iou (0.9); reference boxes are taken by confidence, highest first, each against its
best candidate. Both sides are YOLO txt (`class x y w h [conf]`, normalised); IoU is computed on the
normalised boxes (IoU does not change under a per-axis scale, so image sizes are not needed).
Files are paired by stem, found recursively; `<stem>.teacher.txt` (headroom's labels beside a human
label) counts as `<stem>`. A missing file on either side means no boxes there.

Usage: python scripts/bench/agreement.py --ultralytics-labels DIR --headroom-labels DIR [--iou 0.9]
       [--json OUT.json]
Prints one line and exits 0; --min-match 0.99 makes it exit 1 below that fraction.
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np


def read_dir(folder):
    """stem → array [n, 6] (class, x1, y1, x2, y2, conf); conf is 1 where the file has none."""
    out = {}
    for path in sorted(Path(folder).rglob("*.txt")):
        if path.name in {"classes.txt"}:
            continue
        stem = path.name[: -len(".teacher.txt")] if path.name.endswith(".teacher.txt") else path.stem
        rows = []
        for number, line in enumerate(path.read_text().splitlines(), 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) not in (5, 6):
                raise SystemExit(f"{path}:{number}: expected 5 or 6 columns, found {len(parts)}")
            c, x, y, w, h = (float(v) for v in parts[:5])
            conf = float(parts[5]) if len(parts) == 6 else 1.0
            rows.append((c, x - w / 2, y - h / 2, x + w / 2, y + h / 2, conf))
        out[stem] = np.array(rows, dtype=np.float64).reshape(-1, 6)
    return out


def iou(box, boxes):
    x1 = np.maximum(box[1], boxes[:, 1])
    y1 = np.maximum(box[2], boxes[:, 2])
    x2 = np.minimum(box[3], boxes[:, 3])
    y2 = np.minimum(box[4], boxes[:, 4])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = lambda b: (b[..., 3] - b[..., 1]) * (b[..., 4] - b[..., 2])  # noqa: E731
    return inter / np.maximum(area(box) + area(boxes) - inter, 1e-12)


def match(reference, other, threshold):
    """Matched count, and |conf difference| of each match."""
    used = np.zeros(len(other), bool)
    matched, conf_diffs, ious = 0, [], []
    for box in reference[np.argsort(-reference[:, 5], kind="stable")]:
        if not len(other):
            break
        overlaps = iou(box, other)
        overlaps[(other[:, 0] != box[0]) | used] = -1
        best = int(np.argmax(overlaps))
        if overlaps[best] >= threshold:
            used[best] = True
            matched += 1
            conf_diffs.append(abs(other[best, 5] - box[5]))
            ious.append(overlaps[best])
    return matched, conf_diffs, ious


def agreement(reference_dir, other_dir, threshold):
    reference, other = read_dir(reference_dir), read_dir(other_dir)
    empty = np.zeros((0, 6))
    total = matched = other_total = 0
    conf_diffs, ious, worst = [], [], []
    for stem in sorted(set(reference) | set(other)):
        ref, oth = reference.get(stem, empty), other.get(stem, empty)
        m, diffs, overlaps = match(ref, oth, threshold)
        total, matched, other_total = total + len(ref), matched + m, other_total + len(oth)
        conf_diffs += diffs
        ious += overlaps
        if m < len(ref) or m < len(oth):
            worst.append({"image": stem, "reference_boxes": len(ref), "other_boxes": len(oth), "matched": m})
    return {
        "iou_threshold": threshold,
        "reference_files": len(reference), "other_files": len(other),
        "only_in_reference": sorted(set(reference) - set(other))[:20],
        "only_in_other": sorted(set(other) - set(reference))[:20],
        "reference_boxes": total, "other_boxes": other_total, "matched": matched,
        "match_fraction": matched / total if total else 1.0,
        "other_unmatched": other_total - matched,
        "conf_abs_diff_max": max(conf_diffs, default=0.0),
        "conf_abs_diff_mean": float(np.mean(conf_diffs)) if conf_diffs else 0.0,
        "iou_min_of_matches": min(ious, default=1.0),
        "disagreeing_images": worst[:20], "disagreeing_image_count": len(worst),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ultralytics-labels", required=True, type=Path, help="reference labels")
    parser.add_argument("--headroom-labels", required=True, type=Path, help="labels to check")
    parser.add_argument("--iou", type=float, default=0.9)
    parser.add_argument("--min-match", type=float, default=0.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    for folder in (args.ultralytics_labels, args.headroom_labels):
        if not folder.is_dir():
            raise SystemExit(f"{folder}: not a folder")
    result = agreement(args.ultralytics_labels, args.headroom_labels, args.iou)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(f"agreement: {result['matched']}/{result['reference_boxes']} reference boxes matched "
          f"({100 * result['match_fraction']:.2f} %, same class, IoU >= {args.iou}); "
          f"{result['other_unmatched']} extra boxes on the other side; "
          f"max |conf diff| {result['conf_abs_diff_max']:.2e}")
    sys.exit(1 if result["match_fraction"] < args.min_match else 0)


if __name__ == "__main__":
    main()
