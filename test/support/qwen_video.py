"""Qwen video in Python: the reference rollscope's video math (server/families/qwen/video.ts) and mRoPE
video positions (server/families/qwen/mrope.ts) are tested against. Written from the transformers and vLLM
code (docs/reference/models/qwen.md#video), not from rollscope's TypeScript:

- Qwen2-VL / Qwen2.5-VL frames: huggingface/transformers models/qwen2_vl/video_processing_qwen2_vl.py
  (`smart_resize(height, width, factor, min_pixels, max_pixels)` per frame, frames padded by repeating the
  last to a multiple of temporal_patch_size, grid_t = frames // temporal_patch_size), one run of
  grid_t·grid_h·grid_w // merge² `<|video_pad|>`; Qwen2.5-VL `second_per_grid_ts = temporal_patch_size / fps`
  (processing_qwen2_5_vl.py, fps 2.0 when unstated).
- Qwen3-VL / Qwen3.5: models/qwen3_vl/video_processing_qwen3_vl.py `smart_resize(num_frames, height, width,
  temporal_factor, factor, min_pixels, max_pixels)` and processing_qwen3_vl.py: per temporal slice
  `<{t:.1f} seconds>` + `<|vision_start|>` + grid_h·grid_w // merge² pads + `<|vision_end|>`, t from
  `_calculate_timestamps` (indices padded with the last, index / fps, the mean of each slice's first and last).
- vLLM EVS: vllm/multimodal/evs.py `compute_retained_tokens_count` and vllm/model_executor/models/qwen3_vl.py
  (first frame whole, the remaining retained tokens spread evenly, the first frames one more).
- mRoPE: models/qwen2_5_vl/modeling_qwen2_5_vl.py `get_rope_index` (video t index =
  `(arange(t) * second_per_grid_t * tokens_per_second).long()`, vLLM's float form), and Qwen3-VL's
  per-slice split (`repeat_interleave(video_grid_thw, video_grid_thw[:, 0])`, t := 1).

stdin: one JSON object {"op": ..., ...}; stdout: the answer as JSON.
  {"op": "tokens", "cases": [{"style": "qwen2"|"qwen3", "width", "height", "frames", "fps"|null,
     "patch", "merge", "tps", "min_pixels", "max_pixels", "tokens_per_second"|null, "pruning": q}]}
     -> [{"resized": [h, w], "grid": [t, h, w], "runs": [[pads, text], ...], "second_per_grid": x|null}
         | {"error": str}]
  {"op": "expand", "text": str, "videos": [tokens answer], "vision_start", "video_pad", "vision_end"}
     -> the text with each video placeholder replaced as the processor replaces it
  {"op": "rope", "ids": [...], "image_pad", "video_pad", "vision_start", "merge", "media":
     [{"kind", "grid", "second_per_grid"|null}], "tokens_per_second"|null, "per_slice": bool} -> [t, h, w] rows
"""

import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from smart_resize import smart_resize  # noqa: E402


def smart_resize_video(num_frames, height, width, temporal_factor, factor, min_pixels, max_pixels):
    if num_frames < temporal_factor:
        raise ValueError(f"t:{num_frames} must be larger than temporal_factor:{temporal_factor}")
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height = int(height * scale)
        width = int(width * scale)
    if max(height, width) / min(height, width) > 200:
        raise ValueError("absolute aspect ratio must be smaller than 200")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    t_bar = round(num_frames / temporal_factor) * temporal_factor
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((num_frames * height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (num_frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def calculate_timestamps(indices, video_fps, merge_size=2):
    indices = list(indices)
    if len(indices) % merge_size != 0:
        indices.extend(indices[-1] for _ in range(merge_size - len(indices) % merge_size))
    timestamps = [idx / video_fps for idx in indices]
    return [(timestamps[i] + timestamps[i + merge_size - 1]) / 2 for i in range(0, len(timestamps), merge_size)]


def retained_tokens(tokens_per_frame, num_frames, q):
    return max(tokens_per_frame, int(tokens_per_frame * num_frames * (1 - q)))


def evs_counts(tokens_per_frame, num_frames, q):
    if not q or q <= 0:
        return [tokens_per_frame] * num_frames
    if num_frames <= 1:
        return [tokens_per_frame] * num_frames
    remaining = max(retained_tokens(tokens_per_frame, num_frames, q) - tokens_per_frame, 0)
    base = remaining // (num_frames - 1)
    extra = remaining % (num_frames - 1)
    return [tokens_per_frame] + [base + (1 if i < extra else 0) for i in range(num_frames - 1)]


def video_tokens(c):
    factor = c["patch"] * c["merge"]
    tps = c["tps"]
    frames = c["frames"]
    if c["style"] == "qwen3":
        rh, rw = smart_resize_video(frames, c["height"], c["width"], tps, factor, c["min_pixels"], c["max_pixels"])
    else:
        rh, rw = smart_resize(c["height"], c["width"], factor, c["min_pixels"], c["max_pixels"])
    if rh == 0 or rw == 0:
        raise ValueError("zero side")
    padded = frames + (tps - frames % tps if frames % tps else 0)
    grid = [padded // tps, rh // c["patch"], rw // c["patch"]]
    per_slice = grid[1] * grid[2] // c["merge"] ** 2
    second = None
    if c["style"] == "qwen3":
        fps = c["fps"] if c["fps"] is not None else 24
        stamps = calculate_timestamps(range(frames), fps, tps)
        counts = evs_counts(per_slice, grid[0], c.get("pruning", 0))
        runs = [[counts[i], f"<{t:.1f} seconds>"] for i, t in enumerate(stamps)]
    else:
        runs = [[grid[0] * per_slice, ""]]
        if c.get("tokens_per_second") is not None:
            second = tps / (c["fps"] if c["fps"] is not None else 2.0)
    return {"resized": [rh, rw], "grid": grid, "runs": runs, "second_per_grid": second}


def expand(req):
    text = req["text"]
    start, pad, end = req["vision_start"], req["video_pad"], req["vision_end"]
    placeholder = start + pad + end
    for v in req["videos"]:
        runs = v["runs"]
        if any(r[1] for r in runs):
            rep = "".join(r[1] + start + "<|placeholder|>" * r[0] + end for r in runs)
            text = text.replace(placeholder, rep, 1)
        else:
            text = text.replace(pad, "<|placeholder|>" * runs[0][0], 1)
    return text.replace("<|placeholder|>", pad)


def rope(req):
    """get_rope_index over one unpadded sequence (images and videos), as transformers computes it."""
    ids = req["ids"]
    merge = req["merge"]
    media = []
    for m in req["media"]:
        if m["kind"] == "video" and req["per_slice"]:
            t, h, w = m["grid"]
            media += [{"kind": "video", "grid": [1, h, w], "second_per_grid": None}] * t
        else:
            media.append(m)
    pos = []
    st = 0
    k = 0
    n = len(ids)
    vs = req["vision_start"]
    items = sum(1 for i in range(n - 1) if ids[i] == vs and ids[i + 1] in (req["image_pad"], req["video_pad"]))
    nxt = 0
    for _ in range(items):
        ed = st
        while ids[ed] not in (req["image_pad"], req["video_pad"]):
            ed += 1
        m = media[k]
        k += 1
        t, h, w = m["grid"][0], m["grid"][1] // merge, m["grid"][2] // merge
        for i in range(st, ed):
            pos.append([nxt, nxt, nxt])
            nxt += 1
        tpsec = req.get("tokens_per_second")
        block = []
        for ti in range(t):
            if m["kind"] == "video" and tpsec is not None and not req["per_slice"]:
                spg = m["second_per_grid"] if m["second_per_grid"] is not None else 1.0
                tp = int(ti * spg * tpsec)
            else:
                tp = ti
            for hi in range(h):
                for wi in range(w):
                    block.append([nxt + tp, nxt + hi, nxt + wi])
        pos += block
        nxt = max(max(p) for p in block) + 1
        st = ed + t * h * w
    for i in range(st, n):
        pos.append([nxt, nxt, nxt])
        nxt += 1
    return [[p[r] for p in pos] for r in range(3)]


def main():
    req = json.load(sys.stdin)
    if req["op"] == "tokens":
        out = []
        for c in req["cases"]:
            try:
                out.append(video_tokens(c))
            except (ValueError, ZeroDivisionError) as e:
                out.append({"error": str(e)})
    elif req["op"] == "expand":
        out = expand(req)
    elif req["op"] == "rope":
        out = rope(req)
    else:
        raise SystemExit(f"unknown op {req['op']}")
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
