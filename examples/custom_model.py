"""Compose the Transformer-XL layers in your own Keras model.

A one-layer language model built from the library's layers:
`RelativePositionEmbedding` gives the distances, `RelativeMultiHeadAttention`
attends over [memory; segment], `MemoryCache` keeps the last M states under
stop-gradient. Two ways to hold its memory:

1. Explicitly (`build_model`): a functional model whose memory comes in
   and goes out; the caller feeds each segment with the memory the
   previous call returned.
2. In variables (`VariableMemoryLM`): a subclassed model that keeps the
   memory and its valid length in non-trainable variables, as Keras RNNs
   with `stateful=True` do, so that `fit` and `predict` carry them from
   one batch to the next. It trains with `fit` on a task only the memory
   solves (every segment is repeated in the next one), scores held-out
   streams with and without its memory, and checks that `predict`
   (memory read from the variables inside a compiled function) gives the
   logits of stepping `call_with_memory` by hand.

Runs on JAX, TensorFlow and PyTorch:

    KERAS_BACKEND=jax python examples/custom_model.py
    python examples/custom_model.py --smoke     # a few steps, for the tests

The output of a full run on a 2-core CPU: docs/examples.md.
"""

import argparse

import keras
import numpy as np
from keras import ops

from keras_txl.layers import MemoryCache
from keras_txl.layers import RelativeMultiHeadAttention
from keras_txl.layers import RelativePositionEmbedding

VOCAB, HIDDEN, T, M = 64, 32, 8, 16


def build_model():
    tokens = keras.Input((T,), dtype="int32", name="token_ids")
    memory = keras.Input((M, HIDDEN), name="memory")
    valid = keras.Input((), dtype="int32", name="valid_length")

    x = keras.layers.Embedding(VOCAB, HIDDEN)(tokens)  # (batch, T, hidden)
    position = RelativePositionEmbedding(HIDDEN)(x, memory)  # (M + T, hidden)
    attended = RelativeMultiHeadAttention(num_heads=4, head_dim=8)(
        x, position, memory=memory, memory_valid_length=valid
    )  # (batch, T, hidden)
    h = keras.layers.LayerNormalization()(x + attended)
    logits = keras.layers.Dense(VOCAB, name="logits")(h)  # (batch, T, vocab)
    # The next memory: the last M inputs of the attention layer.
    new_memory, new_valid = MemoryCache()(memory, valid, x)
    return keras.Model(
        {"token_ids": tokens, "memory": memory, "valid_length": valid},
        {"logits": logits, "memory": new_memory, "valid_length": new_valid},
    )


class VariableMemoryLM(keras.Model):
    """The model of `build_model` with its memory in variables.

    `call(token_ids)` reads the memory and its valid length from two
    non-trainable variables, runs the segment and assigns the next
    memory, so `fit`, `evaluate` and `predict` carry it from batch to
    batch. The batches must then be consecutive segments of the same
    `batch_size` streams (row `i` of a batch continues row `i` of the
    batch before; `fit(..., shuffle=False)`). `reset_state()` empties
    the memory, for example at the start of each epoch.

    Args:
        batch_size: int, the number of streams: the memory holds one row
            per stream, so every batch has this many rows.

    Call arguments:
        token_ids: int tensor `(batch_size, T)`, the next segment of each
            stream.

    Returns:
        The logits, `(batch_size, T, VOCAB)`.
    """

    def __init__(self, batch_size, **kwargs):
        super().__init__(**kwargs)
        self.batch_size = batch_size
        self.segment_model = build_model()
        # The memory is activations, not parameters: non-trainable. A
        # model saved with it can only be loaded with this batch size.
        self.memory = self.add_weight(
            shape=(batch_size, M, HIDDEN),
            initializer="zeros",
            trainable=False,
            name="memory",
        )
        self.valid_length = self.add_weight(
            shape=(batch_size,),
            initializer="zeros",
            dtype="int32",
            trainable=False,
            name="valid_length",
        )

    def call_with_memory(self, token_ids, memory, valid_length):
        """One segment with an explicit memory (no variable is read or
        assigned): returns `(logits, memory, valid_length)`."""
        out = self.segment_model(
            {
                "token_ids": token_ids,
                "memory": memory,
                "valid_length": valid_length,
            }
        )
        return out["logits"], out["memory"], out["valid_length"]

    def call(self, token_ids):
        if token_ids.shape[0] not in (None, self.batch_size):
            raise ValueError(
                f"VariableMemoryLM holds a memory for batch_size="
                f"{self.batch_size} streams. Received token_ids.shape="
                f"{tuple(token_ids.shape)}. Pass batches of "
                f"{self.batch_size} rows (fit(..., batch_size="
                f"{self.batch_size}) on a dataset whose length it divides)."
            )
        logits, memory, valid_length = self.call_with_memory(
            token_ids,
            ops.copy(self.memory.value),  # torch: it is assigned below
            self.valid_length.value,
        )  # (batch, T, vocab), (batch, M, hidden), (batch,)
        self.memory.assign(memory)
        self.valid_length.assign(valid_length)
        return logits

    def reset_state(self):
        """Empties the memory (every slot invalid)."""
        self.memory.assign(ops.zeros_like(self.memory.value))
        self.valid_length.assign(ops.zeros_like(self.valid_length.value))


def repeated_segments(streams, pairs, seed):
    """`streams` rows of `pairs` random segments of T tokens, each one
    followed by its copy, laid out for a stateful model: the segments
    in reading order, every batch one segment of each stream.

    Returns `(inputs, labels)`, each `(2 * pairs * streams, T)`; `labels`
    holds the next token of each input's stream."""
    rng = np.random.default_rng(seed)
    fresh = rng.integers(0, VOCAB, (streams, pairs, 1, T))
    text = np.repeat(fresh, 2, axis=2).reshape(streams, -1)  # (B, 2pT)
    text = np.concatenate([text, text[:, :1]], axis=1)  # one token more

    def segments(rows):  # (B, 2pT) -> (2p * B, T), segment by segment
        return rows.reshape(streams, -1, T).transpose(1, 0, 2).reshape(-1, T)

    return segments(text[:, :-1]), segments(text[:, 1:])


def step_with_memory(lm, inputs, carry=True):
    """The logits of `inputs` (laid out by `repeated_segments`) from
    `lm.call_with_memory`, carrying the memory from segment to segment
    (`carry=True`) or reading each segment alone."""
    memory = ops.zeros((lm.batch_size, M, HIDDEN))
    valid = ops.zeros((lm.batch_size,), "int32")
    logits = []
    for start in range(0, len(inputs), lm.batch_size):
        segment = ops.convert_to_tensor(inputs[start : start + lm.batch_size])
        out, next_memory, next_valid = lm.call_with_memory(
            segment, memory, valid
        )  # (B, T, vocab), (B, M, hidden), (B,)
        logits.append(ops.convert_to_numpy(out))
        if carry:
            memory, valid = next_memory, next_valid
    return np.concatenate(logits)  # (len(inputs), T, vocab)


def copy_accuracy(logits, labels, batch_size):
    """The share of the second copies' tokens predicted right (their
    last label starts the next segment: not counted)."""
    hits = logits.argmax(-1) == labels  # (rows, T)
    hits = hits.reshape(-1, 2, batch_size, T)[:, 1, :, : T - 1]
    return float(hits.mean())


def explicit_memory_demo():
    """Part 1: the functional model fed its memory by hand."""
    model = build_model()
    batch = 2
    state = {
        "memory": ops.zeros((batch, M, HIDDEN)),
        "valid_length": ops.zeros((batch,), "int32"),
    }
    text = np.random.default_rng(0).integers(0, VOCAB, (batch, 4 * T))
    for start in range(0, text.shape[1], T):
        segment = ops.convert_to_tensor(text[:, start : start + T])
        out = model({"token_ids": segment, **state})
        state = {"memory": out["memory"], "valid_length": out["valid_length"]}
        valid_slots = ops.convert_to_numpy(state["valid_length"])
        print(
            f"segment at {start:2d}: logits {tuple(out['logits'].shape)}, "
            f"valid memory slots {valid_slots.tolist()}"
        )
    return model, state


def variable_memory_demo(args):
    """Part 2: the memory in variables, carried by `fit` and `predict`."""
    keras.utils.set_random_seed(0)
    lm = VariableMemoryLM(args.streams)
    lm.compile(
        optimizer=keras.optimizers.Adam(args.learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=args.jit_compile,
    )
    inputs, labels = repeated_segments(args.streams, args.pairs, seed=1)
    history = lm.fit(
        inputs,
        labels,
        batch_size=args.streams,
        epochs=args.epochs,
        shuffle=False,  # row i of each batch continues stream i
        callbacks=[
            keras.callbacks.LambdaCallback(
                on_epoch_begin=lambda epoch, logs: lm.reset_state()
            )
        ],
        verbose=0,
    )
    losses = history.history["loss"]
    print(
        f"fit: {args.epochs} epoch(s) of {len(inputs) // args.streams} "
        f"segments x {args.streams} streams, loss {losses[0]:.3f} -> "
        f"{losses[-1]:.3f}; valid memory slots "
        f"{ops.convert_to_numpy(lm.valid_length).tolist()}"
    )

    held_out, held_labels = repeated_segments(args.streams, 4, seed=2)
    for name, carry in (("memory", True), ("no memory", False)):
        logits = step_with_memory(lm, held_out, carry)
        accuracy = copy_accuracy(logits, held_labels, args.streams)
        print(f"held out, {name:>9}: {accuracy:.1%} of repeated tokens right")

    # `predict` reads the memory from the variables inside a compiled
    # function; it gives the logits of stepping by hand.
    lm.reset_state()
    predicted = lm.predict(held_out, batch_size=args.streams, verbose=0)
    stepped = step_with_memory(lm, held_out)
    difference = float(np.abs(predicted - stepped).max())
    print(
        f"predict (memory in variables) vs call_with_memory steps: largest "
        f"logit difference {difference:.1e}"
    )
    return lm, difference


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--pairs", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--learning-rate", type=float, default=1e-2)
    parser.add_argument(
        "--jit-compile",
        choices=["auto", "true", "false"],
        default="auto",
        help="compile(jit_compile=...): 'true' is XLA under TensorFlow",
    )
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    args.jit_compile = {"true": True, "false": False}.get(
        args.jit_compile, "auto"
    )
    if args.smoke:  # 128 steps: enough to learn the copy
        args.streams, args.pairs, args.epochs = 8, 32, 2
    return args


def main(argv=None):
    args = parse_args(argv)
    print("1. The memory passed explicitly")
    model, state = explicit_memory_demo()
    print("2. The memory in variables, carried by fit and predict")
    variable_memory_demo(args)
    return model, state


if __name__ == "__main__":
    main()
