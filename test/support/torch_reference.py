#!/usr/bin/env python3
"""Writes tensors with the real torch.save and prints what torch.load gives back, as JSON.

Used by test/torch-save.test.ts to compare rollscope's reader against PyTorch itself (Debian's
python3-torch). usage: torch_reference.py OUT.pt  -> JSON on stdout
"""
import collections
import json
import math
import sys

import torch


def build():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) / 7
    padded = torch.full((3, 8), -1.0)
    padded[0, :5] = torch.tensor([-0.5, -0.25, -1.5, -2.0, -0.125])
    padded[1, :3] = torch.tensor([-3.0, -0.75, -0.0625])
    return {
        "float32": base,
        "view_rows": base[1:3],  # storage offset 6
        "view_strided": base[:, ::2],  # stride (6, 2)
        "transposed": base.t(),  # stride (1, 6)
        "float64": torch.tensor([1.0 / 3, -2.5e-300, 7.0], dtype=torch.float64),
        "float16": torch.tensor([0.5, -1.25, 65504.0, 6.1e-5], dtype=torch.float16),
        "bfloat16": torch.tensor([1.0, -2.5, 3.140625, 1e10], dtype=torch.bfloat16),
        "int64": torch.tensor([151644, 151655, -100, 2**40], dtype=torch.int64),
        "int32": torch.tensor([[1, -2], [3, -4]], dtype=torch.int32),
        "uint8": torch.tensor([0, 200, 255], dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
        "scalar": torch.tensor(3.5),
        "empty": torch.zeros(0, 5),
        # slime's train dump: per-sample log_probs are views of one padded batch tensor.
        "per_sample": [padded[0, :5], padded[1, :3], padded[2, :0]],
        "ordered": collections.OrderedDict([("b", 1), ("a", [1, 2, (3, 4)])]),
        "plain": {"none": None, "true": True, "float": 0.1, "big": 2**70, "text": "ünï <|im_end|>", "bytes": b"\x00\xff"},
    }


def to_json(v):
    if isinstance(v, torch.Tensor):
        return {"tensor": str(v.dtype).replace("torch.", ""), "shape": list(v.shape), "values": clean(v.tolist())}
    if isinstance(v, dict):
        return {str(k): to_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [to_json(x) for x in v]
    if isinstance(v, bytes):
        return {"bytes": list(v)}
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**53:
        return str(v)
    return v


def clean(v):
    if isinstance(v, list):
        return [clean(x) for x in v]
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


obj = build()
torch.save(obj, sys.argv[1])
print(json.dumps(to_json(torch.load(sys.argv[1]))))
