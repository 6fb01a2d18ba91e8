"""Compose the Transformer-XL layers in your own Keras model.

A one-layer language model whose memory comes in and goes out explicitly:
`RelativePositionEmbedding` gives the distances, `RelativeMultiHeadAttention`
attends over [memory; segment], `MemoryCache` keeps the last M states under
stop-gradient. Runs on JAX, TensorFlow and PyTorch:

    KERAS_BACKEND=jax python examples/custom_model.py
"""

import keras
import numpy as np

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


def main():
    model = build_model()
    batch = 2
    state = {
        "memory": keras.ops.zeros((batch, M, HIDDEN)),
        "valid_length": keras.ops.zeros((batch,), "int32"),
    }
    text = np.random.default_rng(0).integers(0, VOCAB, (batch, 4 * T))
    for start in range(0, text.shape[1], T):
        segment = keras.ops.convert_to_tensor(text[:, start : start + T])
        out = model({"token_ids": segment, **state})
        state = {"memory": out["memory"], "valid_length": out["valid_length"]}
        valid_slots = keras.ops.convert_to_numpy(state["valid_length"])
        print(
            f"segment at {start:2d}: logits {tuple(out['logits'].shape)}, "
            f"valid memory slots {valid_slots.tolist()}"
        )
    return model, state


if __name__ == "__main__":
    main()
