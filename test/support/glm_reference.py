"""GLM-4.xV's image math in Python, written from the upstream code cited in docs/reference/models/glm.md:
the reference server/families/glm/vision.ts is tested against.

- smart_resize: transformers src/transformers/models/glm4v/image_processing_glm4v.py `smart_resize`
  (None where it raises); a still image is resized with num_frames = temporal_patch_size
  (`Glm4vImageProcessor.resize`), its grid is [1, h/14, w/14] and its `<|image|>` count
  grid.prod() // merge_size**2 (processing_glm4v.py `replace_image_token`).

stdin: {"cases": [[frames, h, w], ...], "settings": [{"patch", "merge", "temporal", "min", "max"}, ...]}
stdout: {"resize": [[[h, w] | null per case] per setting]}
"""
import json
import math
import sys


def smart_resize(num_frames, height, width, temporal_factor=2, factor=28, min_pixels=112 * 112, max_pixels=14 * 14 * 2 * 2 * 2 * 6144):
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


def main():
    req = json.load(sys.stdin)
    out = {"resize": []}
    for s in req["settings"]:
        res = []
        for t, h, w in req["cases"]:
            try:
                res.append(list(smart_resize(t, h, w, s["temporal"], s["patch"] * s["merge"], s["min"], s["max"])))
            except ValueError:
                res.append(None)
        out["resize"].append(res)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
