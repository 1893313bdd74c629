"""PyTorch's side of BM_mlp_train_{sgd,adam}_cuda (bench/bench_cuda.cpp).

The same step on the GPU: an MLP 784-512-512-10 (ReLU, softmax
cross-entropy with mean), one SGD (lr 0.01) or Adam (lr 1e-3) update, the
batch fed from host memory each step and the loss read back (one wait), as
Session<cuda>::eval does. Also the step captured as a CUDA graph (inputs
copied into static device tensors, then a replay). Prints one line per case:
the median of the repetitions' mean step time.

    python3 bench/bench_train_torch_cuda.py [--reps 5] [--steps 200]
"""
import argparse
import statistics
import time

import torch


def batch(n):
    i = torch.arange(n * 784, dtype=torch.int64)
    x = ((i * 7919) % 255).to(torch.float32).div_(255.0).reshape(n, 784)
    y = torch.arange(n, dtype=torch.int64) % 10
    return x, y  # the values of train_bench::fill


def model():
    return torch.nn.Sequential(
        torch.nn.Linear(784, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 10)).cuda()


def optimizer(name, params, capturable=False):
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.01)
    return torch.optim.Adam(params, lr=1e-3, capturable=capturable)


def time_steps(step, steps, reps):
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    means = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(steps):
            step()
        means.append((time.perf_counter() - t) / steps * 1e6)
    return statistics.median(means), min(means), max(means)


def eager(opt_name, n, steps, reps):
    torch.manual_seed(0)
    m = model()
    opt = optimizer(opt_name, m.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = batch(n)

    def step():
        xd, yd = x.cuda(), y.cuda()
        loss = loss_fn(m(xd), yd)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    return time_steps(step, steps, reps)


def graphed(opt_name, n, steps, reps):
    torch.manual_seed(0)
    m = model()
    opt = optimizer(opt_name, m.parameters(), capturable=True)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = batch(n)
    sx, sy = x.cuda(), y.cuda()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up on a side stream, as the PyTorch docs do before capture
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss_fn(m(sx), sy).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        sloss = loss_fn(m(sx), sy)
        sloss.backward()
        opt.step()

    def step():
        sx.copy_(x)
        sy.copy_(y)
        g.replay()
        return sloss.item()

    return time_steps(step, steps, reps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=200)
    a = ap.parse_args()
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    for opt_name in ("sgd", "adam"):
        for n in (256, 4096):
            for kind, fn in (("torch", eager), ("torch_graph", graphed)):
                med, lo, hi = fn(opt_name, n, a.steps, a.reps)
                print(f"BM_mlp_train_{opt_name}_{kind}/batch:{n}  median {med:9.1f} us  (min {lo:.1f}, max {hi:.1f})",
                      flush=True)


if __name__ == "__main__":
    main()
