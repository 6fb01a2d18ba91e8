"""Tiny models for the tests: the one place that builds the backbones,
causal LMs and preprocessors the tests run, and their data.

The sizes follow one rule: two heads, `head_dim = hidden_dim // 2` and
`intermediate_dim = 2 * hidden_dim`, so a test names only what it varies
(`hidden_dim=16`, `num_layers=1`, `memory_length=8`, ...). Tests that use
the same sizes build the same shapes, and JAX and TensorFlow then reuse
their compiled functions across tests: vary a size only where the test
needs it.

- `backbone_config(**sizes)`: the keyword arguments of a tiny backbone.
- `tiny_backbone(seed, backbone_class, **sizes)`: a seeded backbone of any
  class (plain, compressive, ablation).
- `tiny_lm(seed, tie_weights, preprocessor, build, **sizes)`: a seeded
  `TransformerXLCausalLM`; adaptive with `cutoffs=...`, compressive with
  `backbone_class=CompressiveTransformerXLBackbone, **COMPRESSIVE`.
- `tokenizer_lm(tokenizer, sequence_length, **sizes)`: a one-layer LM
  with a `TransformerXLCausalLMPreprocessor` over `tokenizer`.
- `training_lm(vocabulary_size, memory_length)`: the training and
  carried-memory tests' LM (width 16).
- `generation_lm(seed, memory_length, sampler)`: the generation tests'
  LM, its weights drawn by numpy (`draw_normal_weights`), the same on
  every backend; `padded` and `prompts_of` make its prompts.
- `random_ids`, `shakespeare_ids`: token ids.
- `SegmentLengthsBackbone`: a backbone that records the length of the
  segments it runs (`backbone_class=`), to count compilations.
- `train_config(tmp_path, name, **fields)`: a `TrainConfig` of a tiny
  `keras-txl train` run on a 172-character text, no sample.
- `PLAIN_LM`, `COMPRESSIVE_LM`, `EXPORT_LM`, `PAPER_BACKBONE`: the size
  sets that several test files share (`tiny_lm(**PLAIN_LM)`).
"""

import keras
import numpy as np

from keras_txl import data
from keras_txl.data.tokenization import encode
from keras_txl.models import CompressiveTransformerXLBackbone
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM
from keras_txl.models import TransformerXLCausalLMPreprocessor
from tests.test_case import DATA

VOCABULARY_SIZE = 20
GENERATION_VOCABULARY_SIZE = 41  # generation_lm's

# The compressive memory of the compressive tests: Mc=3, c=2, conv.
COMPRESSIVE = dict(
    compressed_memory_length=3, compression_rate=2, compression="conv"
)


def backbone_config(
    vocabulary_size=VOCABULARY_SIZE,
    num_layers=2,
    hidden_dim=8,
    memory_length=4,
    num_heads=2,
    **overrides,
):
    """Keyword arguments of a tiny backbone (two layers of width 8, M=4,
    20 tokens unless told otherwise); `overrides` are added as they are
    (`head_dim`, `intermediate_dim`, `cutoffs`, `dtype`, ...)."""
    config = dict(
        vocabulary_size=vocabulary_size,
        num_layers=num_layers,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        head_dim=hidden_dim // num_heads,
        intermediate_dim=2 * hidden_dim,
        memory_length=memory_length,
    )
    config.update(overrides)
    return config


# The reliability tests' model, as keyword arguments.
BACKBONE_KWARGS = backbone_config()

# The causal LM tests' model (`tiny_lm(**PLAIN_LM)`), which the LoRA,
# memory dtype, compressive and ablation tests share: built, and weights
# spread wide enough that an untrained model's memory moves its outputs.
PLAIN_LM = dict(build=True, initializer_range=0.3)

# The compressive tests' model: the causal LM tests' one with Mc=3, c=2.
COMPRESSIVE_LM = dict(
    PLAIN_LM, backbone_class=CompressiveTransformerXLBackbone, **COMPRESSIVE
)

# The export tests' model (`tiny_lm(**EXPORT_LM)`): 37 tokens, two layers
# of width 16, M=6, built.
EXPORT_LM = dict(
    build=True,
    vocabulary_size=37,
    hidden_dim=16,
    memory_length=6,
    clamp_length=10,
    initializer_range=0.3,
)

# The backbone tests' model (`tiny_backbone(**PAPER_BACKBONE)`), which the
# ablation backbone tests build too.
PAPER_BACKBONE = dict(
    vocabulary_size=30, hidden_dim=16, memory_length=8, initializer_range=0.3
)


def tiny_backbone(seed=0, backbone_class=TransformerXLBackbone, **sizes):
    """A backbone of `backbone_config(**sizes)`, its weights drawn from
    `seed` (`None`: from the global generator as it stands)."""
    if seed is not None:
        keras.utils.set_random_seed(seed)
    return backbone_class(**backbone_config(**sizes))


class SegmentLengthsBackbone(TransformerXLBackbone):
    """A backbone that records the token length of every segment that
    `call_with_intercept` runs, in `SEGMENT_LENGTHS`: inside a compiled
    function (`score`'s step on JAX and TensorFlow) once per trace, so on
    JAX once per compilation; eagerly (`call_with_memory` with
    `pad_to_bucket`, torch) once per call. TensorFlow may relax a traced
    length to None."""

    def call_with_intercept(self, inputs, layer_intercept_fn=None):
        SEGMENT_LENGTHS.append(inputs["token_ids"].shape[1])
        return super().call_with_intercept(inputs, layer_intercept_fn)


SEGMENT_LENGTHS = []


def tiny_lm(
    seed=0,
    tie_weights=True,
    preprocessor=None,
    build=False,
    backbone_class=TransformerXLBackbone,
    **sizes,
):
    """A `TransformerXLCausalLM` over `tiny_backbone(seed, backbone_class,
    **sizes)`; built when `build`."""
    backbone = tiny_backbone(seed, backbone_class, **sizes)
    lm = TransformerXLCausalLM(
        backbone, tie_weights=tie_weights, preprocessor=preprocessor
    )
    if build:
        lm.build()
    return lm


def training_lm(vocabulary_size=16, memory_length=8, seed=0, **sizes):
    """The training and carried-memory tests' LM: two layers of width 16
    with heads of 8 (kept when `hidden_dim` changes), 16 tokens, M=8."""
    sizes = {"hidden_dim": 16, "head_dim": 8, **sizes}
    return tiny_lm(
        seed,
        vocabulary_size=vocabulary_size,
        memory_length=memory_length,
        **sizes,
    )


def generation_lm(seed=2, memory_length=8, sampler="greedy", **sizes):
    """The generation tests' LM: 41 tokens, two layers of width 16, with
    weights drawn by numpy (`draw_normal_weights`), compiled with
    `sampler`. Normal(0, 1) weights and a tied output make greedy decoding
    of this untrained model move over several tokens instead of repeating
    one, so that equal outputs say something."""
    lm = tiny_lm(
        seed=None,
        build=True,
        **{
            "vocabulary_size": GENERATION_VOCABULARY_SIZE,
            "hidden_dim": 16,
            "memory_length": memory_length,
            **sizes,
        },
    )
    draw_normal_weights(lm, seed)
    lm.compile(sampler=sampler)
    return lm


def tokenizer_lm(tokenizer, sequence_length=8, seed=None, **sizes):
    """A one-layer LM of width 8 (M=4) with `tokenizer` behind a
    `TransformerXLCausalLMPreprocessor`, compiled with a greedy sampler."""
    preprocessor = TransformerXLCausalLMPreprocessor(
        tokenizer, sequence_length=sequence_length
    )
    lm = tiny_lm(
        seed=seed,
        preprocessor=preprocessor,
        **{
            "num_layers": 1,
            "vocabulary_size": tokenizer.vocabulary_size(),
            **sizes,
        },
    )
    lm.compile(sampler="greedy")
    return lm


def draw_normal_weights(lm, seed):
    """Normal(0, 1) kernels and embeddings drawn by numpy (the same on
    every backend); norms and the output bias keep their initial values."""
    rng = np.random.RandomState(seed)
    for weight in lm.weights:
        if "norm" not in weight.path and "output_bias" not in weight.path:
            weight.assign(rng.normal(size=weight.shape).astype("float32"))
    return lm


def padded(prompts, max_length):
    """Right-padded `{"token_ids", "padding_mask"}` of a list of prompts."""
    token_ids = np.zeros((len(prompts), max_length), "int32")
    padding_mask = np.zeros((len(prompts), max_length), bool)
    for row, prompt in enumerate(prompts):
        token_ids[row, : len(prompt)] = prompt
        padding_mask[row, : len(prompt)] = True
    return {"token_ids": token_ids, "padding_mask": padding_mask}


def prompts_of(lengths, seed=1):
    """Random prompts of `lengths` tokens (no 0) for `generation_lm`."""
    rng = np.random.RandomState(seed)
    return [
        rng.randint(1, GENERATION_VOCABULARY_SIZE, size=n).tolist()
        for n in lengths
    ]


def random_ids(shape, seed=0, high=VOCABULARY_SIZE):
    return np.random.default_rng(seed).integers(0, high, shape).astype("int32")


def shakespeare_ids(num_chars):
    """Character ids of the start of tinyshakespeare, and the vocabulary
    size of those characters."""
    text = (DATA / "tinyshakespeare.txt").read_text(encoding="utf-8")
    text = text[:num_chars]
    tokenizer = data.make_tokenizer("char", text)
    return encode(tokenizer, text), tokenizer.vocabulary_size()


# The text of the tiny training runs (172 characters).
TRAIN_TEXT = (
    "The quick brown fox jumps over the lazy dog. "
    "Pack my box with five dozen liquor jugs. "
) * 2


def train_config(tmp_path, name="run", **fields):
    """The `TrainConfig` of a tiny `keras-txl train` run (the tiny size,
    T = M = 8, batch 2, epochs of 2 steps, no dropout, no sample: no test
    of it reads one) on `TRAIN_TEXT` in `tmp_path/corpus.txt`, writing
    `tmp_path/name`; `fields` override any of it."""
    from keras_txl_cli.train_config import TrainConfig

    corpus = tmp_path / "corpus.txt"
    if not corpus.exists():
        corpus.write_text(TRAIN_TEXT, encoding="utf-8")
    values = dict(
        corpus=str(corpus),
        size="tiny",
        steps=4,
        segment_length=8,
        batch_size=2,
        memory_length=8,
        eval_memory_length=16,
        steps_per_epoch=2,
        dropout=0.0,
        seed=3,
        verbose=0,
        sample_tokens=0,
        output=str(tmp_path / name),
    )
    values.update(fields)
    return TrainConfig(**values)
