"""`benchmarks/peers.py`'s initialization of the authors' model, on small
stand-in modules with the authors' class and attribute names (the
authors' code is not in the repository). Nothing here is timed."""

import math

import pytest

from benchmarks import peers


def fake_mem_transformer_lm():
    """What the authors' constructor leaves, with their class and attribute
    names: `torch.Tensor(...)` parameters holding garbage (NaN, 1e38
    here), layers at torch's own defaults. torch is imported here, not at
    collection: the JAX and torch CI runs collect this file too."""
    import torch

    def garbage(value):
        return torch.nn.Parameter(torch.full((64, 64), value))

    class AdaptiveEmbedding(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb_layers = torch.nn.ModuleList([torch.nn.Embedding(64, 64)])
            self.emb_projs = torch.nn.ParameterList([garbage(float("nan"))])

    class FakeMemTransformerLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.word_emb = AdaptiveEmbedding()
            self.net = torch.nn.Linear(64, 64)
            self.layer_norm = torch.nn.LayerNorm(64)
            self.r_w_bias = garbage(float("nan"))
            self.r_r_bias = garbage(1e38)

    torch.manual_seed(0)
    return FakeMemTransformerLM()


def test_init_as_authors_train_fills_every_parameter_by_train_py_laws():
    import torch

    model = peers.init_as_authors_train(fake_mem_transformer_lm())
    model.requires_grad_(False)
    for name, parameter in model.named_parameters():
        assert torch.isfinite(parameter).all(), name
    # N(0, init_std) and N(0, proj_init_std), 4,096 draws each: the
    # sample std is within ~1% of the law's.
    for tensor, std in [
        (model.r_w_bias, peers.INIT_STD),
        (model.r_r_bias, peers.INIT_STD),
        (model.net.weight, peers.INIT_STD),
        (model.word_emb.emb_layers[0].weight, peers.INIT_STD),
        (model.word_emb.emb_projs[0], peers.PROJ_INIT_STD),
    ]:
        assert float(tensor.std()) == pytest.approx(std, rel=0.1)
        assert abs(float(tensor.mean())) < 4 * std / 64
    assert float(model.net.bias.abs().max()) == 0.0
    assert float(model.layer_norm.bias.abs().max()) == 0.0
    assert float(model.layer_norm.weight.mean()) == pytest.approx(1.0, abs=0.01)


def test_initial_loss_check_stops_on_a_non_finite_loss():
    import torch

    assert peers.check_initial_loss(
        torch.tensor(5.5), 256, "train"
    ) == pytest.approx(5.5)
    with pytest.raises(SystemExit, match=r"loss of nan .*ln\(256\) = 5.55"):
        peers.check_initial_loss(torch.tensor(math.nan), 256, "train")
