#!/usr/bin/env python3
"""Writes objects with the real torch.save, as slime's trainer writes its debug dumps.

JSON on stdin: [{"path": OUT.pt, "object": ...}, ...]. Inside an object, {"tensor": DTYPE, "values":
[...]} becomes a 1-D torch tensor of that dtype (float32, int64, ...); NaN and Infinity are read as
Python's json module reads them. Everything else is kept as plain Python values. One process
writes every file (importing torch takes a second or more). Needs Debian's python3-torch.
usage: torch_write.py < items.json
"""
import json
import sys

import torch


def build(value):
    if isinstance(value, dict):
        if set(value) == {"tensor", "values"}:
            return torch.tensor(value["values"], dtype=getattr(torch, value["tensor"]))
        return {k: build(v) for k, v in value.items()}
    if isinstance(value, list):
        return [build(v) for v in value]
    return value


for item in json.load(sys.stdin):
    torch.save(build(item["object"]), item["path"])
