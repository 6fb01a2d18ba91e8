"""The peers, measured in their own environment (the goals that run_all's
tables set against them are in `benchmarks/goals.py`).

The authors' PyTorch Transformer-XL (`pytorch/mem_transformer.py`, with
the in-memory CPU patches of `tools/fixtures/make_official_pytorch.py`)
and HuggingFace's `TransfoXLLMHeadModel` at the reference size (dropout
0.1, fp32): `train` (Adam steps, clipping 0.25), `eval` (no gradients,
memory carried), `generate` (HuggingFace's greedy `generate()`, batch 1,
64-token prompt, 256 new), `paper_eval`. Imports none of keras-txl: run
it with the Python of the peers' environment (tools/fixtures/README.md):

    PEER_PYTHON benchmarks/peers.py --authors-code PEERS/transformer-xl

The authors' constructor leaves `r_w_bias` and `r_r_bias` uninitialized
(`torch.Tensor(...)`); every phase initializes the model as their
`train.py` does (`init_as_authors_train`) and stops if the first loss is
not finite. Where transformers calls `Tensor.type_as(dtype=...)` (not a
torch signature), the call is patched in memory to `.to(dtype)`.
"""

import argparse
import json
import math
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = dict(
    n_token=256,
    n_layer=4,
    n_head=8,
    d_model=256,
    d_head=32,
    d_inner=1024,
    tgt_len=128,
    mem_len=128,
    batch=16,
)
# The paper's wt103 evaluation (`run_wt103_large.sh eval`): tgt_len 128,
# mem_len 1600, clamp_len 1000, same_length; the reference model's size.
PAPER_EVAL = dict(tgt_len=128, mem_len=1600, clamp_len=1000, same_length=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--authors-code", help="kimiyoung/transformer-xl (or its pytorch/)")
    phases = ["train", "eval", "generate", "paper_eval"]
    add("--what", nargs="+", default=phases[:3], choices=phases)
    add("--paper-batch", type=int, default=10, help="the authors' eval.py")
    add("--paper-mem-len", type=int, default=PAPER_EVAL["mem_len"])
    for name, default in (("steps", 10), ("warmup", 2), ("new-tokens", 256)):
        add(f"--{name}", type=int, default=default)
    add("--prompt", type=int, default=64)
    add("--repeats", type=int, default=2)
    return parser.parse_args(argv)


def emit(result):
    print("RESULT " + json.dumps(result), flush=True)


def clocks():
    t = os.times()
    return time.perf_counter(), t.user + t.system


def rates(start, end, tokens):
    """(tokens per wall second, tokens per process-CPU second x cores)."""
    cores = os.cpu_count() or 1
    wall = end[0] - start[0]
    cpu = max(end[1] - start[1], 1e-9)
    return tokens / wall, tokens / cpu * cores


def authors_model(code, dropout, **settings):
    """The authors' `MemTransformerLM` at the reference size; `settings`
    (tgt_len, mem_len, clamp_len, same_length) override the reference's."""
    sys.path.insert(0, os.path.join(ROOT, "tools", "fixtures"))
    from make_official_pytorch import load_authors_code

    module = load_authors_code(code)
    c = dict(dict(REFERENCE, same_length=False, clamp_len=-1), **settings)
    return module.MemTransformerLM(
        c["n_token"],
        c["n_layer"],
        c["n_head"],
        c["d_model"],
        c["d_head"],
        c["d_inner"],
        dropout=dropout,
        dropatt=0.0,
        tie_weight=True,
        d_embed=c["d_model"],
        div_val=1,
        tie_projs=[False],
        pre_lnorm=False,
        tgt_len=c["tgt_len"],
        ext_len=0,
        mem_len=c["mem_len"],
        cutoffs=[],
        same_length=c["same_length"],
        attn_type=0,
        clamp_len=c["clamp_len"],
    )


# The defaults of the authors' pytorch/train.py (kimiyoung/transformer-xl):
# `--init normal`, `--init_std 0.02`, `--proj_init_std 0.01`.
INIT_STD = 0.02
PROJ_INIT_STD = 0.01


def init_as_authors_train(model, std=INIT_STD, proj_std=PROJ_INIT_STD):
    """Initialize `model` in place as the authors' `pytorch/train.py` does
    with its default arguments: its `weights_init` on every module,
    re-implemented by the module's class name. Tied weights are drawn
    once per owner, from the same law, so the order changes no
    distribution. Returns the model.
    """
    import torch

    def normal(tensor, mean, scale):
        if tensor is not None:
            tensor.normal_(mean, scale)

    def zero(tensor):
        if tensor is not None:
            tensor.zero_()

    def each(parameters):
        return [p for p in (parameters or []) if p is not None]

    with torch.no_grad():
        for module in model.modules():
            kind = type(module).__name__
            if "Linear" in kind:
                normal(getattr(module, "weight", None), 0.0, std)
                zero(getattr(module, "bias", None))
            elif "AdaptiveEmbedding" in kind:
                for proj in each(getattr(module, "emb_projs", None)):
                    normal(proj, 0.0, proj_std)
            elif "Embedding" in kind:
                normal(getattr(module, "weight", None), 0.0, std)
            elif "ProjectedAdaptiveLogSoftmax" in kind:
                normal(getattr(module, "cluster_weight", None), 0.0, std)
                zero(getattr(module, "cluster_bias", None))
                for proj in each(getattr(module, "out_projs", None)):
                    normal(proj, 0.0, proj_std)
            elif "LayerNorm" in kind:
                normal(getattr(module, "weight", None), 1.0, std)
                zero(getattr(module, "bias", None))
            elif "TransformerLM" in kind:
                for name in ("r_emb", "r_w_bias", "r_r_bias"):
                    normal(getattr(module, name, None), 0.0, std)
                zero(getattr(module, "r_bias", None))
    return model


def check_initial_loss(loss, n_token, what):
    """Stop when the first step's loss is not finite (an uninitialized or
    broken model would be timed otherwise); return it as a float."""
    value = float(loss)
    if not math.isfinite(value):
        raise SystemExit(
            f"peers.py: the authors' model gives a loss of {value} on its "
            f"first step ({what}); expected about ln({n_token}) = "
            f"{math.log(n_token):.2f} after init_as_authors_train. Its "
            "parameters are not initialized: check init_as_authors_train "
            "against the authors' train.py"
        )
    return value


def measure_authors(args, phase):
    import torch

    torch.manual_seed(0)
    c = REFERENCE
    model = init_as_authors_train(authors_model(args.authors_code, 0.1))
    data = torch.randint(0, c["n_token"], (c["tgt_len"], c["batch"]))
    target = torch.randint(0, c["n_token"], (c["tgt_len"], c["batch"]))
    tokens = c["tgt_len"] * c["batch"]
    mems = tuple()
    if phase == "train":
        model.train()
        optimizer = torch.optim.Adam(model.parameters(), lr=2.5e-4)

        def step(mems):
            out = model(data, target, *mems)
            loss = out[0].float().mean()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            optimizer.step()
            return loss.detach(), out[1:]
    else:
        model.eval()

        def step(mems):
            with torch.no_grad():
                out = model(data, target, *mems)
            return out[0].float().mean(), out[1:]

    loss, mems = step(mems)
    initial_loss = check_initial_loss(loss, c["n_token"], phase)
    for _ in range(args.warmup - 1):
        loss, mems = step(mems)
    start = clocks()
    for _ in range(args.steps):
        loss, mems = step(mems)
    wall, cpu = rates(start, clocks(), tokens * args.steps)
    return {
        "benchmark": "peer",
        "peer": "authors_pytorch",
        "phase": phase,
        "tokens_per_s": wall,
        "tokens_per_cpu_s_x_cores": cpu,
        "steps": args.steps,
        "initial_loss": initial_loss,
        "final_loss": float(loss),
        "ln_vocab": math.log(c["n_token"]),
        "init": "authors_train_py",
        "dropout": 0.1 if phase == "train" else 0.0,
        "config": dict(REFERENCE),
    }


def peak_rss_mib():
    """Peak RSS of this process, MiB (Linux: ru_maxrss KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mib():
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def measure_authors_paper_eval(args):
    """The authors' evaluation at the paper's wt103 settings (PAPER_EVAL),
    eval mode, no gradients, from a full memory of random states (the
    steady state of a long text), memory carried between segments."""
    import torch

    torch.manual_seed(0)
    settings = dict(PAPER_EVAL, mem_len=args.paper_mem_len)
    model = authors_model(args.authors_code, 0.0, **settings).eval()
    init_as_authors_train(model)
    t, m, b = settings["tgt_len"], settings["mem_len"], args.paper_batch
    c = REFERENCE
    generator = torch.Generator().manual_seed(1)
    segments = args.warmup + args.steps
    data = torch.randint(
        0, c["n_token"], (segments, t + 1, b), generator=generator
    )
    # n_layer + 1 memories (the embeddings' and each layer's output),
    # (mem_len, batch, d_model) each, as the model returns them.
    mems = [torch.randn(m, b, c["d_model"]) for _ in range(c["n_layer"] + 1)]
    baseline = current_rss_mib()

    first = {}

    def step(i, mems):
        with torch.no_grad():
            out = model(data[i, :-1], data[i, 1:], *mems)
        if i == 0:  # warm-up or, with --warmup 0, timed
            first["loss"] = check_initial_loss(
                out[0].float().mean(), c["n_token"], "paper_eval"
            )
        return out[0], out[1:]

    for i in range(args.warmup):
        loss, mems = step(i, mems)
    start = clocks()
    total = 0.0
    for i in range(args.warmup, segments):
        loss, mems = step(i, mems)
        total += float(loss.float().sum())
    count = t * b * args.steps
    wall, cpu = rates(start, clocks(), count)
    return {
        "benchmark": "paper_eval",
        "implementation": "authors",
        "backend": "torch",
        "mode": "authors_eval",
        "tokens_per_s": wall,
        "tokens_per_cpu_s_x_cores": cpu,
        "mean_nll": total / count,
        "initial_loss": first["loss"],
        "ln_vocab": math.log(c["n_token"]),
        "init": "authors_train_py",
        "peak_rss_mib": peak_rss_mib(),
        "rss_before_first_call_mib": baseline,
        "peak_rss_delta_mib": peak_rss_mib() - baseline,
        "batch_size": b,
        "segments": args.steps,
        "warmup": args.warmup,
        "segment_length": t,
        "memory_length": m,
        "clamp_length": settings["clamp_len"],
        "same_length": settings["same_length"],
        "config": dict(REFERENCE, **settings, batch=b),
    }


def _patch_type_as():
    """`Tensor.type_as(dtype=...)` -> `Tensor.to(dtype)`: the keyword form
    is no torch signature; some transformers releases call it."""
    import torch

    original = torch.Tensor.type_as

    def type_as(self, other=None, dtype=None):
        if dtype is not None:
            return self.to(dtype)
        return original(self, other)

    torch.Tensor.type_as = type_as


def measure_huggingface(args):
    import torch
    import transformers
    from transformers import TransfoXLConfig
    from transformers import TransfoXLLMHeadModel

    _patch_type_as()
    torch.manual_seed(0)
    c = REFERENCE
    config = TransfoXLConfig(
        vocab_size=c["n_token"],
        cutoffs=[],
        d_model=c["d_model"],
        d_embed=c["d_model"],
        n_head=c["n_head"],
        d_head=c["d_head"],
        d_inner=c["d_inner"],
        n_layer=c["n_layer"],
        mem_len=c["mem_len"],
        tgt_len=c["tgt_len"],
        div_val=1,
        dropout=0.0,
        dropatt=0.0,
        eos_token_id=None,
        pad_token_id=0,
    )
    model = TransfoXLLMHeadModel(config).eval()
    prompt = torch.randint(1, c["n_token"], (1, args.prompt))

    def call():
        with torch.no_grad():
            return model.generate(
                prompt,
                max_new_tokens=args.new_tokens,
                min_new_tokens=args.new_tokens,
                do_sample=False,
                num_beams=1,
                pad_token_id=0,
            )

    out = call()  # warm-up
    assert out.shape[1] == args.prompt + args.new_tokens, out.shape
    best = None
    for _ in range(args.repeats):
        start = clocks()
        call()
        wall, cpu = rates(start, clocks(), args.new_tokens)
        if best is None or wall > best[0]:
            best = (wall, cpu)
    return {
        "benchmark": "peer",
        "peer": "huggingface_transfo_xl",
        "phase": "generate",
        "tokens_per_s": best[0],
        "tokens_per_cpu_s_x_cores": best[1],
        "prompt": args.prompt,
        "new_tokens": args.new_tokens,
        "memory_length": c["mem_len"],
        "transformers": transformers.__version__,
        "config": dict(REFERENCE, batch=1),
    }


# === The goals: keras-txl's results over the peers' (run_all's tables) ===


def main(argv=None):
    args = parse_args(argv)
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    for phase in ("train", "eval"):
        if phase in args.what and args.authors_code:
            result = measure_authors(args, phase)
            result["torch"] = torch.__version__
            emit(result)
    if "paper_eval" in args.what:
        if not args.authors_code:
            raise SystemExit("peers.py: --what paper_eval needs --authors-code")
        result = measure_authors_paper_eval(args)
        result["torch"] = torch.__version__
        emit(result)
    if "generate" in args.what:
        result = measure_huggingface(args)
        result["torch"] = torch.__version__
        emit(result)


if __name__ == "__main__":
    main()
