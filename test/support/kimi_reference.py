"""Kimi's image token counts in Python, written from the upstream code cited in docs/reference/models/kimi.md:
the reference server/families/kimi/vision.ts is tested against.

- navit_resize_image: Kimi K2.5's media processing (`navit_resize_image`, as vLLM's kimi_k25 processor and
  the checkpoint's own media code have it); None where it asserts.
- kimi_vl_tokens: vllm/transformers_utils/processors/processing_kimi_vl.py `KimiVLProcessor.get_image_tokens`.

stdin: {"sizes": [[w, h], ...], "navit": [{"patch", "merge", "in_patch_limit", "side", "fixed"}, ...], "vl": [limit, ...]}
stdout: {"navit": [[[new_w, new_h, pad_w, pad_h, n] | null per size] per setting], "vl": [[n per size] per limit]}
"""
import json
import math
import sys


def navit_resize_image(width, height, patch_size, merge_kernel_size, in_patch_limit, patch_limit_on_one_side, fixed_output_tokens):
    s1 = math.sqrt(in_patch_limit / (max(1.0, width // patch_size) * max(1.0, height // patch_size)))
    s2 = patch_limit_on_one_side * patch_size / width
    s3 = patch_limit_on_one_side * patch_size / height
    scale = min(1.0, s1, s2, s3)
    new_w, new_h = max(1, int(width * scale)), max(1, int(height * scale))
    new_w = min(new_w, patch_limit_on_one_side * patch_size)
    new_h = min(new_h, patch_limit_on_one_side * patch_size)
    factor = merge_kernel_size * patch_size
    pad_height = (factor - new_h % factor) % factor
    pad_width = (factor - new_w % factor) % factor
    if fixed_output_tokens is not None:
        num_tokens = fixed_output_tokens
    else:
        token_height = (new_h + pad_height) // factor
        token_width = (new_w + pad_width) // factor
        assert token_height * merge_kernel_size <= patch_limit_on_one_side
        assert token_width * merge_kernel_size <= patch_limit_on_one_side
        num_tokens = token_height * token_width
    return [new_w, new_h, pad_width, pad_height, num_tokens]


def kimi_vl_tokens(width, height, in_token_limit, patch_size=14, kernel_size=(2, 2)):
    if (width // patch_size) * (height // patch_size) > in_token_limit:
        scale = math.sqrt(in_token_limit / ((width // patch_size) * (height // patch_size)))
        new_w, new_h = int(width * scale), int(height * scale)
        width, height = new_w, new_h
    kernel_height, kernel_width = kernel_size
    pad_height = (kernel_height * patch_size - height % (kernel_height * patch_size)) % (kernel_height * patch_size)
    pad_width = (kernel_width * patch_size - width % (kernel_width * patch_size)) % (kernel_width * patch_size)
    token_height = (height + pad_height) // (kernel_size[0] * patch_size)
    token_width = (width + pad_width) // (kernel_size[1] * patch_size)
    return int(token_height * token_width)


def main():
    req = json.load(sys.stdin)
    out = {"navit": [], "vl": []}
    for s in req["navit"]:
        res = []
        for w, h in req["sizes"]:
            try:
                res.append(navit_resize_image(w, h, s["patch"], s["merge"], s["in_patch_limit"], s["side"], s["fixed"]))
            except AssertionError:
                res.append(None)
        out["navit"].append(res)
    for limit in req["vl"]:
        out["vl"].append([kimi_vl_tokens(w, h, limit) for w, h in req["sizes"]])
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
