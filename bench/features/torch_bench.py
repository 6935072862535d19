#!/usr/bin/python3
"""bench/features: torchvision's side, for bench/features/run.sh.

  torch_bench.py WEIGHTS ARCH BATCH RUNS WARMUP THREADS [--frozen | --bf16 | --cuda]

Loads the same safetensors weights as vtr into torchvision's model (strict: every name
must match), drops the classifier (fc -> Identity: the pooled features, as vtr computes),
and times model(x) under torch.no_grad() in eval mode on random (BATCH, 3, 224, 224)
input: the plain torchvision forward that feature-extraction scripts run. With --frozen,
the model is first compiled with torch.jit.optimize_for_inference(torch.jit.script(m))
(batch norm folded, oneDNN layouts kept between layers): PyTorch's own best CPU path. With --bf16 (bench/features/bf16.sh), PyTorch's bfloat16
inference on a CPU: model and input in channels_last, model(x) under
torch.autocast("cpu", dtype=torch.bfloat16). Prints one JSON object.
With --cuda (tests/gpu/run.sh), on GPU 0, cudnn.benchmark on, each timed batch copied from
host memory and its features back, as vtr's cuDNN engine does, three runs in turn, a JSON
object each: float32 (TF32 off), float32 with TF32 (PyTorch's default for convolutions),
and bfloat16 (model and batch cast to bfloat16 and channels_last on the GPU, features
widened back to float32: PyTorch's fastest eager bfloat16 inference), with the cosine of
each image's bfloat16 features to its float32 ones ("cosine_min", "cosine_mean").
"""
import json
import resource
import struct
import sys
import time

import numpy as np
import torch
import torchvision

DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out


def main(argv):
    weights, arch = argv[0], argv[1]
    batch, runs, warmup, threads = (int(v) for v in argv[2:6])
    frozen = "--frozen" in argv[6:]
    bf16 = "--bf16" in argv[6:]
    cuda = "--cuda" in argv[6:]
    torch.set_num_threads(threads)
    model = getattr(torchvision.models, arch)(weights=None)
    model.load_state_dict(load_safetensors(weights), strict=True)
    model.fc = torch.nn.Identity()
    model.eval()
    x = torch.randn(batch, 3, 224, 224)
    meta = {"arch": arch, "batch": batch, "threads": torch.get_num_threads(), "warmup": warmup,
            "torch": torch.__version__, "torchvision": torchvision.__version__}
    if cuda:
        cuda_runs(model.cuda(), x, runs, warmup, meta)
        return
    if bf16:
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        if frozen:
            model = torch.jit.optimize_for_inference(torch.jit.script(model))
        times = []
        for _ in range(warmup + runs):
            t = time.perf_counter()
            out = model(x)
            times.append(time.perf_counter() - t)
    print(json.dumps(dict(meta, side="torch-frozen" if frozen else "torch-bf16" if bf16 else "torch",
                          dim=int(out.shape[1]), max_rss_mb=max_rss_mb(),
                          times=[round(t, 4) for t in times])))


def max_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def cosines(a, b):
    a, b = a.double(), b.double()
    return (a * b).sum(1) / (a.norm(dim=1) * b.norm(dim=1))


def cuda_runs(model, x, runs, warmup, meta):
    """float32, TF32 and bfloat16 on GPU 0, one JSON line each"""
    torch.backends.cudnn.benchmark = True
    ref = None
    for side in ("torch-cuda", "torch-cuda-tf32", "torch-cuda-bf16"):
        tf32 = side.endswith("tf32")
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = tf32
        if side.endswith("bf16"):
            model = model.to(dtype=torch.bfloat16, memory_format=torch.channels_last)

            def run(h):
                return model(h.cuda().to(dtype=torch.bfloat16,
                                         memory_format=torch.channels_last)).float().cpu()
        else:
            def run(h):
                return model(h.cuda()).cpu()
        times = []
        with torch.no_grad():
            for _ in range(warmup + runs):
                t = time.perf_counter()
                out = run(x)
                times.append(time.perf_counter() - t)
        result = dict(meta, side=side, dim=int(out.shape[1]), max_rss_mb=max_rss_mb(),
                      times=[round(t, 4) for t in times])
        if side == "torch-cuda":
            ref = out
        elif side.endswith("bf16"):
            c = cosines(out, ref)
            result.update(cosine_min=round(float(c.min()), 6), cosine_mean=round(float(c.mean()), 6))
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
