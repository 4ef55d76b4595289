#!/usr/bin/env python3
"""Where a training step's time goes: headroom's `train --profile` trace beside PyTorch's profile of
Ultralytics' step, summed by phase and by op (issue 34, item 1).

Both traces come from libtorch's own profiler (headroom: torch::autograd::profiler::RecordProfile
through `headroom train --profile FILE`; Ultralytics: torch.profiler, CPU activities), so both
record the same aten ops with the same clock. An event's self time is its duration less its
children's (the events nested inside it on its thread). Each op is put in a phase by what encloses
it:
  - backward: inside an `autograd::engine::evaluate_function` event (autograd's backward nodes);
  - optimizer: inside `headroom::optimizer` (clipping, AdamW/SGD, zeroing the gradients) or
    PyTorch's `Optimizer.step#…` / `Optimizer.zero_grad#…`;
  - ema, loss, data, teacher: inside `headroom::ema|loss|data|teacher` (Ultralytics' ModelEMA.update,
    v8DetectionLoss.__call__, dataset __getitem__ and preprocess_batch are wrapped in spans of the
    same names by the `ultralytics` subcommand; its DataLoader's `enumerate(DataLoader)#…` is data);
  - forward: everything else (the model's forward, recomputed forwards of checkpointing included).

Usage:
  step_profile.py summary TRACE.json --passes N           one trace: ms per pass by phase, top ops
  step_profile.py compare HEADROOM.json N ULTRA.json M    side by side (N, M: passes traced)
  step_profile.py ultralytics --model YAML --data DATA.yaml --imgsz S --batch B --threads T
      --out TRACE.json [--skip 1] [--passes 8] [--project DIR]
    (in the environment of scripts/ultralytics-env.sh: YOLO(yaml).train(freeze=None, workers=0,
    amp=False, val=False) with torch.profiler around batches skip+1 .. skip+passes of epoch 1)
Never in CI; `scripts/bench/step_profile.sh` runs both tools and compares.
"""
import argparse
import json
import sys
from collections import defaultdict

PHASES = ["data", "trunk", "teacher", "forward", "loss", "backward", "optimizer", "ema"]
SPANS = {
    "headroom::data": "data",
    "headroom::trunk": "trunk",
    "headroom::teacher": "teacher",
    "headroom::loss": "loss",
    "headroom::optimizer": "optimizer",
    "headroom::ema": "ema",
}


def phase_of_span(name):
    if name.startswith("autograd::engine::evaluate_function"):
        return "backward"
    if name.startswith("Optimizer.step#") or name.startswith("Optimizer.zero_grad#"):
        return "optimizer"
    if name.startswith("enumerate(DataLoader)"):
        return "data"
    return SPANS.get(name)


def load(path):
    data = json.load(open(path))
    events = data if isinstance(data, list) else data.get("traceEvents", [])
    # Kineto's whole-window event ("PyTorch Profiler (0)", category Trace) is not an op.
    return [e for e in events if e.get("ph") == "X" and "dur" in e and e.get("cat") != "Trace"]


def summarise(path):
    """Self time (µs) by phase and by (phase, op), and the traced wall time (µs)."""
    events = load(path)
    by_thread = defaultdict(list)
    for e in events:
        by_thread[e.get("tid")].append(e)
    phase_us = defaultdict(float)
    op_us = defaultdict(float)
    op_calls = defaultdict(int)
    wall = 0.0
    for evs in by_thread.values():
        evs.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
        if evs:
            wall = max(wall, max(float(e["ts"]) + float(e["dur"]) for e in evs) - float(evs[0]["ts"]))
        stack = []  # [end, event, child time, phase]
        def close(item):
            end, e, children, phase = item
            own = max(0.0, float(e["dur"]) - children)
            name = e["name"]
            if phase_of_span(name) is None or name.startswith("autograd::engine"):
                # Spans of ours and PyTorch's are containers; their own time is Python and glue.
                phase_us[phase] += own
                op_us[(phase, name)] += own
                op_calls[(phase, name)] += 1
            else:
                phase_us[phase] += own
                op_us[(phase, "(span glue) " + name)] += own
        for e in evs:
            ts, dur = float(e["ts"]), float(e["dur"])
            while stack and stack[-1][0] <= ts:
                close(stack.pop())
            parent_phase = stack[-1][3] if stack else "forward"
            phase = phase_of_span(e["name"]) or parent_phase
            if stack:
                stack[-1][2] += dur
            stack.append([ts + dur, e, 0.0, phase])
        while stack:
            close(stack.pop())
    return phase_us, op_us, op_calls, wall


def table(columns, passes):
    """columns: [(title, summary)]; ms per pass by phase."""
    lines = ["| phase | " + " | ".join(f"{t} ms/pass" for t, _ in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for phase in PHASES:
        cells = [f"{s[0].get(phase, 0.0) / 1000 / n:.1f}" for (_, s), n in zip(columns, passes)]
        if any(c != "0.0" for c in cells):
            lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    totals = [f"**{sum(s[0].values()) / 1000 / n:.1f}**" for (_, s), n in zip(columns, passes)]
    lines.append("| all ops | " + " | ".join(totals) + " |")
    walls = [f"{s[3] / 1000 / n:.1f}" for (_, s), n in zip(columns, passes)]
    lines.append("| traced wall time | " + " | ".join(walls) + " |")
    return "\n".join(lines)


def top_ops(title, summary, passes, count=15):
    _, op_us, op_calls, _ = summary
    total = sum(op_us.values()) or 1.0
    lines = [f"{title}: the {count} costliest ops by self time (ms per pass, calls per pass, share)",
             "| phase | op | ms/pass | calls/pass | share |", "|---|---|---|---|---|"]
    for (phase, name), us in sorted(op_us.items(), key=lambda kv: -kv[1])[:count]:
        lines.append(f"| {phase} | `{name}` | {us / 1000 / passes:.2f} | {op_calls[(phase, name)] / passes:.0f} | "
                     f"{100 * us / total:.1f} % |")
    return "\n".join(lines)


ULTRALYTICS = r'''
import sys, json, torch
from torch.profiler import profile, ProfilerActivity, record_function
args = json.loads(sys.argv[1])
torch.set_num_threads(args["threads"])
from ultralytics import YOLO
from ultralytics.utils import torch_utils, loss as uloss
from ultralytics.data import base as dbase
from ultralytics.models.yolo.detect import train as dtrain

def wrap(cls, attr, span):
    inner = getattr(cls, attr)
    def wrapped(*a, **k):
        with record_function(span):
            return inner(*a, **k)
    setattr(cls, attr, wrapped)

wrap(torch_utils.ModelEMA, "update", "headroom::ema")
wrap(uloss.v8DetectionLoss, "__call__", "headroom::loss")
wrap(dbase.BaseDataset, "__getitem__", "headroom::data")
wrap(dtrain.DetectionTrainer, "preprocess_batch", "headroom::data")
state = {"seen": 0, "prof": None, "done": False}

def start(trainer):
    if state["prof"] is None and not state["done"] and state["seen"] == args["skip"]:
        state["prof"] = profile(activities=[ProfilerActivity.CPU])
        state["prof"].__enter__()

def end(trainer):
    state["seen"] += 1
    p = state["prof"]
    if p is not None and state["seen"] >= args["skip"] + args["passes"]:
        p.__exit__(None, None, None)
        p.export_chrome_trace(args["out"])
        state["prof"], state["done"] = None, True

model = YOLO(args["model"])
model.add_callback("on_train_batch_start", start)
model.add_callback("on_train_batch_end", end)
model.train(data=args["data"], imgsz=args["imgsz"], batch=args["batch"], epochs=1, freeze=None, workers=0,
    amp=False, plots=False, val=False, cache=False, device="cpu", project=args["project"], name="profile",
    exist_ok=True, verbose=False)
if not state["done"]:
    sys.exit(f"the epoch had fewer than {args['skip'] + args['passes']} batches")
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary")
    s.add_argument("trace")
    s.add_argument("--passes", type=int, required=True)
    c = sub.add_parser("compare")
    c.add_argument("headroom")
    c.add_argument("headroom_passes", type=int)
    c.add_argument("ultralytics")
    c.add_argument("ultralytics_passes", type=int)
    u = sub.add_parser("ultralytics")
    for flag in ("--model", "--data", "--out"):
        u.add_argument(flag, required=True)
    u.add_argument("--imgsz", type=int, required=True)
    u.add_argument("--batch", type=int, required=True)
    u.add_argument("--threads", type=int, required=True)
    u.add_argument("--skip", type=int, default=1)
    u.add_argument("--passes", type=int, default=8)
    u.add_argument("--project", default="/tmp/headroom-step-profile-ultralytics")
    a = ap.parse_args()
    if a.cmd == "summary":
        s = summarise(a.trace)
        print(table([("trace", s)], [a.passes]))
        print()
        print(top_ops("trace", s, a.passes))
    elif a.cmd == "compare":
        h, u = summarise(a.headroom), summarise(a.ultralytics)
        print(table([("headroom", h), ("Ultralytics", u)], [a.headroom_passes, a.ultralytics_passes]))
        print()
        print(top_ops("headroom", h, a.headroom_passes))
        print()
        print(top_ops("Ultralytics", u, a.ultralytics_passes))
    else:
        import subprocess
        cfg = {k: getattr(a, k) for k in ("model", "data", "out", "imgsz", "batch", "threads", "skip", "passes",
                                          "project")}
        sys.exit(subprocess.run([sys.executable, "-c", ULTRALYTICS, json.dumps(cfg)]).returncode)


if __name__ == "__main__":
    main()
