"""Gemma 3's image placeholder math in Python, written from the upstream code cited in
docs/reference/models/gemma3.md: the reference server/families/gemma3/vision.ts is tested against.

- pan_and_scan_crops: transformers src/transformers/models/gemma3/image_processing_gemma3.py
  `Gemma3ImageProcessor.pan_and_scan` (the crop grid and sizes it cuts; [] means no crops).
- vllm_num_crops: vllm/model_executor/models/gemma3_mm.py `Gemma3ProcessingInfo.get_num_crops`.
- replace_image_token / expand_text: transformers processing_gemma3.py `Gemma3Processor`
  (`full_image_sequence`, `replace_image_token`), applied to each `<start_of_image>` in order.

stdin: {"sizes": [[w, h], ...], "settings": [{"enabled", "min_crop", "max_crops", "min_ratio"}, ...],
        "texts": [{"text": str, "crops": [int, ...]}, ...]}
stdout: {"transformers": [[[wide, high, cw, ch] | null per size] per setting], "vllm": [[n per size] per setting],
         "expanded": [str per text]}
"""
import json
import math
import sys

BOI = "<start_of_image>"
EOI = "<end_of_image>"
SOFT = "<image_soft_token>"
IMAGE_SEQ_LENGTH = 256


def pan_and_scan_crops(width, height, min_crop, max_crops, min_ratio):
    if width >= height:
        if width / height < min_ratio:
            return None
        num_crops_w = int(math.floor(width / height + 0.5))
        num_crops_w = min(int(math.floor(width / min_crop)), num_crops_w)
        num_crops_w = max(2, num_crops_w)
        num_crops_w = min(max_crops, num_crops_w)
        num_crops_h = 1
    else:
        if height / width < min_ratio:
            return None
        num_crops_h = int(math.floor(height / width + 0.5))
        num_crops_h = min(int(math.floor(height / min_crop)), num_crops_h)
        num_crops_h = max(2, num_crops_h)
        num_crops_h = min(max_crops, num_crops_h)
        num_crops_w = 1
    crop_size_w = int(math.ceil(width / num_crops_w))
    crop_size_h = int(math.ceil(height / num_crops_h))
    if min(crop_size_w, crop_size_h) < min_crop:
        return None
    return [num_crops_w, num_crops_h, crop_size_w, crop_size_h]


def vllm_num_crops(width, height, enabled, min_crop, max_crops, min_ratio):
    if not enabled:
        return 0
    if width >= height:
        if width / height < min_ratio:
            return 0
        num_crops_w = min(int(math.floor(width / min_crop)), int(math.floor(width / height + 0.5)))
        num_crops_w = max(2, num_crops_w)
        num_crops_w = min(max_crops, num_crops_w)
        num_crops_h = 1
    else:
        if height / width < min_ratio:
            return 0
        num_crops_h = min(int(math.floor(height / min_crop)), int(math.floor(height / width + 0.5)))
        num_crops_h = max(2, num_crops_h)
        num_crops_h = min(max_crops, num_crops_h)
        num_crops_w = 1
    crop_size_w = int(math.ceil(width / num_crops_w))
    crop_size_h = int(math.ceil(height / num_crops_h))
    if min(crop_size_w, crop_size_h) < min_crop:
        return 0
    return num_crops_w * num_crops_h


FULL_IMAGE_SEQUENCE = f"\n\n{BOI}{SOFT * IMAGE_SEQ_LENGTH}{EOI}\n\n"


def replace_image_token(num_crops):
    if num_crops > 0:
        return (
            f"Here is the original image {FULL_IMAGE_SEQUENCE} and here are some crops to help you see better "
            + " ".join([FULL_IMAGE_SEQUENCE] * num_crops)
        )
    return FULL_IMAGE_SEQUENCE


def expand_text(text, crops):
    parts = text.split(BOI)
    assert len(parts) - 1 == len(crops)
    out = parts[0]
    for k, n in enumerate(crops):
        out += replace_image_token(n) + parts[k + 1]
    return out


def main():
    req = json.load(sys.stdin)
    out = {"transformers": [], "vllm": [], "expanded": []}
    for s in req["settings"]:
        hf, vl = [], []
        for w, h in req["sizes"]:
            hf.append(pan_and_scan_crops(w, h, s["min_crop"], s["max_crops"], s["min_ratio"]) if s["enabled"] else None)
            vl.append(vllm_num_crops(w, h, s["enabled"], s["min_crop"], s["max_crops"], s["min_ratio"]))
        out["transformers"].append(hf)
        out["vllm"].append(vl)
    for t in req.get("texts", []):
        out["expanded"].append(expand_text(t["text"], t["crops"]))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
