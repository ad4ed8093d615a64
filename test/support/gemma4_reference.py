"""Gemma 4's image token count in Python, written from the upstream code cited in
docs/reference/models/gemma4.md: the reference server/families/gemma4/vision.ts is tested against.

- hf_size: transformers src/transformers/models/gemma4/image_processing_gemma4.py
  `get_aspect_ratio_preserving_size`, and the soft-token count `_preprocess` takes from it
  (patches // pooling_kernel_size**2); None where it raises.
- vllm_soft_tokens: vllm/model_executor/models/gemma4_mm.py `Gemma4ProcessingInfo._compute_num_soft_tokens`.

stdin: {"sizes": [[w, h], ...], "settings": [{"patch": 16, "pool": 3, "max_soft": 280}, ...]}
stdout: {"hf": [[[h, w, n] | null per size] per setting], "vllm": [[n per size] per setting]}
"""
import json
import math
import sys


def get_aspect_ratio_preserving_size(height, width, patch_size, max_patches, pooling_kernel_size):
    total_px = height * width
    target_px = max_patches * (patch_size**2)
    factor = math.sqrt(target_px / total_px)
    ideal_height = factor * height
    ideal_width = factor * width
    side_mult = pooling_kernel_size * patch_size
    target_height = int(math.floor(ideal_height / side_mult)) * side_mult
    target_width = int(math.floor(ideal_width / side_mult)) * side_mult
    if target_height == 0 and target_width == 0:
        raise ValueError("0 x 0")
    max_side_length = (max_patches // pooling_kernel_size**2) * side_mult
    if target_height == 0:
        target_height = side_mult
        target_width = min(int(math.floor(width / height)) * side_mult, max_side_length)
    elif target_width == 0:
        target_width = side_mult
        target_height = min(int(math.floor(height / width)) * side_mult, max_side_length)
    if target_height * target_width > target_px:
        raise ValueError("over budget")
    return target_height, target_width


def hf_size(width, height, patch, pool, max_soft):
    max_patches = max_soft * pool**2
    try:
        th, tw = get_aspect_ratio_preserving_size(height, width, patch, max_patches, pool)
    except ValueError:
        return None
    return [th, tw, ((th // patch) * (tw // patch)) // pool**2]


def vllm_soft_tokens(width, height, patch_size, pooling_kernel_size, max_soft_tokens):
    unit = patch_size * pooling_kernel_size
    max_patches = max_soft_tokens * pooling_kernel_size**2
    num_patches_orig = (height / patch_size) * (width / patch_size)
    scale = math.sqrt(max_patches / num_patches_orig)
    target_h = max(unit, int(math.floor(height * scale / unit)) * unit)
    target_w = max(unit, int(math.floor(width * scale / unit)) * unit)
    num_patches = (target_h // patch_size) * (target_w // patch_size)
    return min(num_patches // (pooling_kernel_size**2), max_soft_tokens)


def main():
    req = json.load(sys.stdin)
    out = {"hf": [], "vllm": []}
    for s in req["settings"]:
        out["hf"].append([hf_size(w, h, s["patch"], s["pool"], s["max_soft"]) for w, h in req["sizes"]])
        out["vllm"].append([vllm_soft_tokens(w, h, s["patch"], s["pool"], s["max_soft"]) for w, h in req["sizes"]])
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
