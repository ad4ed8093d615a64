"""smart_resize in Python, straight from the pseudocode in docs/reference/image-math.md: the reference the
TypeScript image math is tested against. Python's round() is half-to-even, which is the point.

Variant A is transformers' (image_processing_qwen2_vl.py), used by the HF processor and vLLM;
variant B is qwen-vl-utils' (vision_process.py), used by verl and slime before the processor.
"""
import math


def smart_resize_a(h, w, factor, min_pixels, max_pixels):
    if max(h, w) / min(h, w) > 200:
        raise ValueError("absolute aspect ratio must be smaller than 200")
    h_bar = round(h / factor) * factor
    w_bar = round(w / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((h * w) / max_pixels)
        h_bar = max(factor, math.floor(h / beta / factor) * factor)
        w_bar = max(factor, math.floor(w / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (h * w))
        h_bar = math.ceil(h * beta / factor) * factor
        w_bar = math.ceil(w * beta / factor) * factor
    return h_bar, w_bar


def smart_resize_b(h, w, factor, min_pixels, max_pixels):
    if max(h, w) / min(h, w) > 200:
        raise ValueError("absolute aspect ratio must be smaller than 200")
    h_bar = max(factor, round(h / factor) * factor)
    w_bar = max(factor, round(w / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((h * w) / max_pixels)
        h_bar = math.floor(h / beta / factor) * factor
        w_bar = math.floor(w / beta / factor) * factor
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (h * w))
        h_bar = math.ceil(h * beta / factor) * factor
        w_bar = math.ceil(w * beta / factor) * factor
    return h_bar, w_bar


def smart_resize(h, w, factor, min_pixels, max_pixels, variant="transformers"):
    fn = smart_resize_a if variant == "transformers" else smart_resize_b
    return fn(h, w, factor, min_pixels, max_pixels)
