"""Generation of `TransformerXLCausalLM`: keras-hub's `generate()` with
the memory carried as loop state.

`generate()` checks the prompts and options, keras-hub's `CausalLM` runs
the loop, and `generate_step` (compiled) runs the prompt in segments
through the backbone's graph, then the prompt's tail and every new token
on the memory's keys and values (`key_value_cache`, projected once: for
one new token, projecting the `M` memory states of every layer again
would cost far more than the token's own work), one token a step, with
keras-hub's sampler. Nothing here assigns a variable: the key/value cache
(or a variant's memory) is the loop state that keras-hub's sampler calls
`cache`.
"""

import keras
import numpy as np
from keras import ops

from keras_txl.models.causal_lm_bases import check_before_causal_lm
from keras_txl.models.causal_lm_bases import check_host_attributes
from keras_txl.models.memory_spec import check_memory_start
from keras_txl.utils.tensor_values import is_concrete
from keras_txl.utils.validation import check_bool
from keras_txl.utils.validation import check_optional_positive_int

# `generate()`'s options that `generate_step` reads when it is traced:
# `(memory_length, segment_length, memory_start, return_memory)`.
GENERATE_DEFAULTS = (None, None, "empty", False)


class TransformerXLGeneration:
    """Generation for `TransformerXLCausalLM`: `generate`, `generate_step`
    and the XLA generate function on TensorFlow.

    A base class of the task, before keras-hub's `CausalLM` (whose
    `compile`, `generate` and `make_generate_function` it extends, and
    whose sampler it calls): a class that puts it elsewhere fails when it
    is defined. The task provides the attributes of `HOST_ATTRIBUTES` and
    calls `check_generation_host()` at the end of its `__init__`, which
    names any that is missing.
    """

    # What this class reads of the task that it is a base of.
    HOST_ATTRIBUTES = (
        "backbone",  # a `TransformerXLBackbone`
        "preprocessor",  # a keras-hub preprocessor or None
        "carried_memory_length",  # int: the memory of `fit` and `generate`
        "compute_logits",  # float32 logits of hidden states
    )

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        check_before_causal_lm(cls, TransformerXLGeneration)

    def check_generation_host(self):
        """Raises a `TypeError` naming the `HOST_ATTRIBUTES` this object
        lacks (call it at the end of the task's `__init__`)."""
        check_host_attributes(self, TransformerXLGeneration)

    def compile(self, *args, jit_compile="auto", **kwargs):
        """keras-hub's `compile`; records whether `jit_compile=False` was
        asked for: TensorFlow generation uses XLA unless it was (see
        `make_generate_function`)."""
        super().compile(*args, jit_compile=jit_compile, **kwargs)
        self._generate_with_xla = jit_compile is not False

    def generate(
        self,
        inputs,
        max_length=None,
        stop_token_ids="auto",
        strip_prompt=False,
        memory_length=None,
        segment_length=None,
        memory_start="empty",
        memory=None,
        return_memory=False,
    ):
        """Generates tokens after prompts, reusing the memory.

        The `keras_hub.models.CausalLM.generate()` of keras-hub, with more
        arguments. The prompt is run through the backbone in segments
        of `segment_length` tokens, each attending to the memory of the
        ones before it; then every new token is ONE step of length 1 that
        attends to the memory: the cost of a token is `O(memory_length)`,
        and the text before it is never recomputed. The memory is carried
        as loop state (no variable is assigned), so this works under
        `jit` on every backend. The sampler is the one given to
        `compile(sampler=...)` (greedy, top-k, top-p, random, beam, ...).

        Prompts of different lengths share a batch as keras-hub pads them:
        on the right, with `padding_mask` True on prompt tokens. Prompt
        tokens up to the shortest prompt are run in segments; from there
        every row advances one token per step, keeping its own prompt
        tokens until they run out (as keras-hub's samplers do), so padding
        never enters the memory and every row's memory holds exactly the
        tokens before it. Each prompt needs at least one token (a start
        token, for instance); left-padded or empty prompts given as arrays
        raise a `ValueError`.

        By default the memory is the model's own (`memory_length` of the
        model, else of its backbone): a token attends to the
        `memory_length` positions before it at every layer, as
        Transformer-XL does in evaluation, so the cost of a token and the
        memory size do not grow with `max_length`. A longer memory is an
        argument, as in evaluation (`with_memory_length`); with
        `memory_length >= max_length` every token attends to the whole
        context: the tokens are those of a model that recomputes the
        whole prefix at every step. A model without memory (length 0)
        generates with the whole context.

        **A stream across calls.** `return_memory=True` also returns the
        memory after each returned row, and `memory=` starts a call from
        one: the prompt is then the text that follows the memory (a
        preprocessor adds no start token). Every token of a call attends
        to the `M` positions before it (`M` the memory's slots) whether
        they were read in this call or an earlier one, so greedy
        generation in two calls gives, token for token, the tokens of ONE
        call on the first call's whole output followed by the second
        prompt, with the same `memory_length` (exact for any `M`: the
        window of `M` positions slides the same way; to float rounding,
        which may flip a near tie). Rows stay separate: each row's memory
        holds its own tokens, prompt and new ones up to and with its
        stop token (or `max_length`), and its own `valid_length`. Beam
        search returns the memory of the beam it returns. The memory is
        computed by one more pass over the returned rows (about the cost
        of reading them as a prompt). Backbones that generate through
        their graph (compressive, ablations) take neither argument.

        Args:
            inputs: strings when a `preprocessor` is attached, or a dict
                `{"token_ids", "padding_mask"}` of `(batch, max_length)`
                tensors, right-padded to the length to generate to (with
                or without a preprocessor: ids are not tokenized again,
                and ids come back).
            max_length: int. Length to generate to, when a `preprocessor`
                pads the prompts (otherwise the padded length of `inputs`).
            stop_token_ids: `"auto"` (the preprocessor's end token: the
                tokenizer's, `<eos>` for a tokenizer of whole words),
                `None` or a tuple of token ids that end a row.
            strip_prompt: bool. Return only the new tokens (the returned
                memory holds the prompt too).
            memory_length: int >= 1 or `None`. Memory slots of the
                generation; `None` uses the model's memory length (the
                whole context, `max_length`, if it is 0), or the slots of
                `memory`.
            segment_length: int >= 1 or `None`. Length of the segments in
                which the prompt is run; `None` uses 64.
            memory_start: `"empty"` (default) or `"zeros"`: the memory
                before the prompt, as `backbone.initial_memory(start=...)`,
                when no `memory` is given.
                `"zeros"` attends to `memory_length` zero vectors, as the
                authors' TensorFlow code and HuggingFace do.
            memory: `None` or a memory dict to continue from, one row per
                prompt: what `generate(return_memory=True)`,
                `score(return_memory=True)`, `call_with_memory` or
                `backbone.initial_memory(batch_size)` return (keys of
                `backbone.memory_spec`; at least 1 slot).
            return_memory: bool. Also return the memory after each row.

        Returns:
            Like `keras_hub.models.CausalLM.generate()`: strings with a
            `preprocessor`, otherwise `{"token_ids", "padding_mask"}`
            where `padding_mask` is False after a row's stop token. With
            `return_memory=True`, a tuple `(outputs, memory)`, `memory` a
            dict of tensors `{"memory": (batch, num_layers, M,
            hidden_dim), "valid_length": (batch,) int32}`.

        Example:

        >>> import numpy as np
        >>> from keras_txl.models import TransformerXLBackbone
        >>> from keras_txl.models import TransformerXLCausalLM
        >>> backbone = TransformerXLBackbone(
        ...     vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
        ...     head_dim=8, intermediate_dim=32, memory_length=8,
        ... )
        >>> lm = TransformerXLCausalLM(backbone)
        >>> lm.compile(sampler="greedy")
        >>> prompt = {
        ...     "token_ids": np.array([[5, 6, 7, 0, 0, 0], [8, 9, 0, 0, 0, 0]]),
        ...     "padding_mask": np.array([[1, 1, 1, 0, 0, 0],
        ...                               [1, 1, 0, 0, 0, 0]], dtype=bool),
        ... }
        >>> out = lm.generate(prompt, stop_token_ids=None, memory_length=4)
        >>> out["token_ids"].shape, out["token_ids"][:, 0].tolist()
        ((2, 6), [5, 8])

        The same stream in two calls, the memory carried between them:

        >>> first = {"token_ids": np.array([[5, 6, 0], [8, 0, 0]]),
        ...          "padding_mask": np.array([[1, 1, 0], [1, 0, 0]], bool)}
        >>> out, memory = lm.generate(
        ...     first, stop_token_ids=None, return_memory=True
        ... )
        >>> [int(v) for v in memory["valid_length"]]  # 3 tokens a row
        [3, 3]
        >>> then = {"token_ids": np.array([[7, 0, 0], [9, 0, 0]]),
        ...         "padding_mask": np.array([[1, 0, 0], [1, 0, 0]], bool)}
        >>> more, memory = lm.generate(
        ...     then, stop_token_ids=None, memory=memory, return_memory=True
        ... )
        >>> [int(v) for v in memory["valid_length"]]  # 8 slots, full
        [6, 6]
        """
        options = (
            check_optional_positive_int("memory_length", memory_length),
            check_optional_positive_int("segment_length", segment_length),
            check_memory_start(memory_start),
            check_bool("return_memory", return_memory),
        )
        backbone = self.backbone
        if getattr(backbone, "compression_rate", 1) > 1:
            raise ValueError(
                "`generate()` feeds one token at a time, and a compressive "
                "backbone compresses segments of a multiple of "
                f"`compression_rate` (={backbone.compression_rate}). Sample "
                "with `call_with_memory` on such segments, or use a backbone "
                "with compression_rate=1."
            )
        if memory is not None or return_memory:
            check_stream_arguments(self, inputs, memory, options)
        if isinstance(inputs, dict) and "padding_mask" in inputs:
            check_prompt_padding(inputs["padding_mask"])
        preprocessor = self.preprocessor
        if stop_token_ids == "auto" and preprocessor is not None:
            # The preprocessor's end token (`<eos>` for a tokenizer of
            # whole words), else the tokenizer's.
            end = getattr(
                preprocessor,
                "end_token_id",
                getattr(preprocessor.tokenizer, "end_token_id", None),
            )
            # No end token (e.g. the character tokenizer): never stop.
            stop_token_ids = None if end is None else (end,)
        if preprocessor is not None and isinstance(inputs, dict):
            # Token ids already: keras-hub would tokenize them again. Its
            # documented way to skip the preprocessing is
            # `task.preprocessor = None` (the tracker keeps the layer).
            self.preprocessor = None
            try:
                return self.generate(
                    inputs,
                    max_length=max_length,
                    stop_token_ids=stop_token_ids,
                    strip_prompt=strip_prompt,
                    memory_length=memory_length,
                    segment_length=segment_length,
                    memory_start=memory_start,
                    memory=memory,
                    return_memory=return_memory,
                )
            finally:
                self.preprocessor = preprocessor
        if options != getattr(self, "_generate_options", GENERATE_DEFAULTS):
            # The lengths are read when the generate function is traced.
            self._generate_options = options
            self.generate_function = None
        arguments = dict(
            max_length=max_length,
            stop_token_ids=stop_token_ids,
            strip_prompt=strip_prompt,
        )
        if memory is None and not return_memory:
            return super().generate(inputs, **arguments)
        return self._generate_stream(inputs, memory, return_memory, arguments)

    def _generate_stream(self, inputs, memory, return_memory, arguments):
        """keras-hub's `generate()`, its generate function given `memory`
        (added to each preprocessed batch) and returning the memory after
        each row (taken out of its outputs before keras-hub strips,
        converts and detokenizes them). With a memory, the preprocessor
        adds no start token: the prompt follows the memory's text."""
        function = self.make_generate_function()
        spec = self.backbone.memory_spec
        memories = []

        def generate_function(x, stop_token_ids=None):
            if memory is not None:
                check_memory_batch(self.backbone, memory, x["token_ids"])
                x = {**x, **spec.cast(memory)}
            outputs = dict(function(x, stop_token_ids=stop_token_ids))
            if return_memory:
                memories.append({key: outputs.pop(key) for key in spec.keys})
            return outputs

        preprocessor = self.preprocessor
        add_start_token = None
        if memory is not None and preprocessor is not None:
            add_start_token = preprocessor.add_start_token
            preprocessor.add_start_token = False
        self.generate_function = generate_function
        try:
            outputs = super().generate(inputs, **arguments)
        finally:
            self.generate_function = function
            if add_start_token is not None:
                preprocessor.add_start_token = add_start_token
        return (outputs, memories[0]) if return_memory else outputs

    def make_generate_function(self):
        """keras-hub's generation function; on TensorFlow, a `tf.function`
        compiled with XLA, as on JAX, and traced without AutoGraph.

        keras-hub compiles TensorFlow generation with the model's
        `jit_compile`, which Keras resolves to False on a machine without
        accelerators (`"auto"`), so generation would run op by op: the
        loop of single-token steps is the case XLA helps most. Here it is
        compiled with XLA unless the model was compiled with
        `jit_compile=False` explicitly, or `run_eagerly=True`.

        `generate_step` loops with `ops.while_loop` and branches with
        `ops.cond`, never with Python control flow on tensors, so
        AutoGraph's rewrite of its source (and the sampler's) has nothing
        to do: skipping it, as Keras's own train and test functions do,
        makes the first `generate()` of a model about a third cheaper.
        """
        if self.generate_function is not None:
            return self.generate_function
        if keras.config.backend() != "tensorflow" or self.run_eagerly:
            return super().make_generate_function()
        import tensorflow as tf

        # Every layer of the model compiles with XLA.
        self.generate_function = tf.function(
            self.generate_step,
            jit_compile=getattr(self, "_generate_with_xla", True),
            autograph=False,
        )
        return self.generate_function

    # === The key/value cache (keras-hub's `call_with_cache`) ===

    def key_value_cache(self, memory):
        """Every layer's keys and values of `memory`, projected once.

        Args:
            memory: a memory dict (`{"memory", "valid_length"}`).

        Returns:
            `{"key_values": [(batch, M, 2 * num_heads * head_dim)] *
            num_layers, "valid_length": (batch,)}`: a tensor per layer, so
            a step copies each layer's once.
        """
        states = memory["memory"]  # (batch, L, M, hidden)
        blocks = self.backbone.transformer_layers
        return {
            "key_values": [
                block.key_values(states[:, i])  # (batch, M, 2 * h * hd)
                for i, block in enumerate(blocks)
            ],
            "valid_length": ops.cast(memory["valid_length"], "int32"),
        }

    def _position_keys(self, segment_length, memory_length):
        """Every layer's projected relative position embeddings for a
        segment of `segment_length` after `memory_length` slots: they
        depend on the lengths alone, so a loop computes them once."""
        position = self.backbone.position_embedding(
            ops.zeros((1, segment_length, 1)), ops.zeros((1, memory_length, 1))
        )  # (M + T, hidden)
        return [
            block.position_keys(position)  # (heads, head_dim, M + T + 1)
            for block in self.backbone.transformer_layers
        ]

    def call_with_key_value_cache(
        self,
        token_ids,
        key_value_cache,
        position_keys=None,
        sliding_window=False,
    ):
        """One segment in inference mode from a key/value cache: the
        outputs of `call_with_memory` on the memory it was made from (to
        float rounding), at the cost of the segment alone.

        Args:
            token_ids: int tensor `(batch, T)`.
            key_value_cache: dict from `key_value_cache()` or the last call.
            position_keys: optional, from `_position_keys(T, M)`.
            sliding_window: if True, every token attends to the `M` keys
                before it and itself (the window slides inside the
                segment), so the segment computes what `T` single-token
                steps compute. If False, the segment's first token sees
                the memory and its last token the memory and the whole
                segment, as `call_with_memory` does.

        Returns:
            `(logits, hidden_states, new_key_value_cache)`: float32
            `(batch, T, vocab)`, `(batch, T, hidden)`, and the last `M`
            keys and values of each layer.
        """
        x, cache, _ = self._key_value_layers(
            token_ids, key_value_cache, position_keys, sliding_window
        )
        return self.compute_logits(x), x, cache

    def _key_value_layers(
        self, token_ids, key_value_cache, position_keys, sliding_window
    ):
        """The layers of `call_with_key_value_cache`: `(hidden_states,
        new_key_value_cache, layer_inputs)`, where `layer_inputs` is the
        input of every layer `[(batch, T, hidden)] * num_layers` (what a
        memory holds)."""
        backbone = self.backbone
        valid_length = ops.cast(key_value_cache["valid_length"], "int32")
        memory_length = ops.shape(key_value_cache["key_values"][0])[1]
        segment_length = ops.shape(token_ids)[1]
        x = backbone.embed_tokens(token_ids)  # (batch, T, hidden)
        if position_keys is None:
            position_keys = self._position_keys(segment_length, memory_length)
        window = None
        if sliding_window:
            query = ops.arange(segment_length, dtype="int32")[:, None]
            key = ops.arange(memory_length + segment_length, dtype="int32")
            window = (key[None, :] >= query)[None]  # (1, T, M + T)
        new_key_values = []
        layer_inputs = []
        for i, block in enumerate(backbone.transformer_layers):
            layer_inputs.append(x)
            memory = key_value_cache["key_values"][i]  # (b, M, 2 * h * hd)
            key_values = ops.concatenate(
                [ops.cast(memory, x.dtype), block.key_values(x)], axis=1
            )  # (batch, M + T, 2 * heads * head_dim)
            x = block(
                x,
                None,
                memory_valid_length=valid_length,
                attention_mask=window,
                key_values=key_values,
                position_keys=position_keys[i],
            )  # (batch, T, hidden)
            new_key_values.append(
                ops.slice(key_values, [0, segment_length, 0], ops.shape(memory))
            )  # (batch, M, 2 * heads * head_dim): the last M
        valid_length = ops.minimum(valid_length + segment_length, memory_length)
        cache = {"key_values": new_key_values, "valid_length": valid_length}
        return x, cache, layer_inputs

    def _memory_after(self, token_ids, padding_mask, memory, key_value_cache):
        """The memory after each row's tokens: `generate(return_memory=
        True)`'s.

        Every row's tokens (prompt and new ones: `padding_mask` True on
        them, a prefix of the row) run once more, in one pass with the
        window of `generate` sliding over them, from the memory the
        generation started from (`memory`, states; `key_value_cache`, its
        keys and values), and each row keeps the last `M` states ending
        at its own last token. The tokens are those the sampler returned
        (for beam search, the returned beam's), so the memory is theirs.

        Args:
            token_ids: int `(batch, T)`: the returned rows.
            padding_mask: bool `(batch, T)`: True on each row's tokens.
            memory: the memory dict the generation started from.
            key_value_cache: `key_value_cache(memory)`.

        Returns:
            The memory dict of `backbone.memory_spec`, `M` slots.
        """
        spec = self.backbone.memory_spec
        states = memory["memory"]  # (batch, L, M, hidden)
        batch_size, num_layers, memory_length, hidden_dim = ops.shape(states)
        _, _, layer_inputs = self._key_value_layers(
            token_ids, key_value_cache, None, sliding_window=True
        )
        new_states = ops.stack(layer_inputs, axis=1)  # (batch, L, T, hidden)
        joined = ops.concatenate(
            [ops.cast(states, spec.dtype), ops.cast(new_states, spec.dtype)],
            axis=2,
        )  # (batch, L, M + T, hidden)
        lengths = ops.sum(ops.cast(padding_mask, "int32"), axis=-1)  # (b,)
        # Row b's last M slots end at its last token, joined position
        # M + lengths[b] - 1: they start at lengths[b].
        slots = lengths[:, None] + ops.arange(memory_length, dtype="int32")
        slots = ops.broadcast_to(
            slots[:, None, :, None],
            (batch_size, num_layers, memory_length, hidden_dim),
        )  # (batch, L, M, hidden)
        valid_length = ops.cast(memory["valid_length"], "int32") + lengths
        return {
            "memory": ops.take_along_axis(joined, slots, axis=2),
            "valid_length": ops.minimum(valid_length, memory_length),
        }

    def _generate_segment(self, token_ids, memory):
        """One backbone pass for generation: `(hidden, new_memory)`."""
        outputs = self.backbone(
            {"token_ids": token_ids, **memory}, training=False
        )
        return outputs["sequence_output"], self.backbone.memory_spec.select(
            outputs
        )

    def generate_step(self, inputs, stop_token_ids=None):
        """Generates one batch (compilable; called by `generate()`).

        Args:
            inputs: dict `{"token_ids", "padding_mask"}` of `(batch,
                max_length)` tensors, prompts right-padded, and the keys
                of a memory to start from (`generate(memory=...)`).
            stop_token_ids: tuple of token ids that end a row, or `None`.

        Returns:
            A dict `{"token_ids", "padding_mask"}` of `(batch, max_length)`
            tensors; with `generate(return_memory=True)`, also the memory
            after each row (`_memory_after`).
        """
        token_ids = ops.cast(inputs["token_ids"], "int32")  # (batch, max_len)
        padding_mask = ops.cast(inputs["padding_mask"], "bool")
        batch_size, max_length = ops.shape(token_ids)
        memory_length, segment_length, memory_start, return_memory = getattr(
            self, "_generate_options", GENERATE_DEFAULTS
        )
        # A memory to start from (`generate(memory=...)`): its slots are
        # the memory length.
        spec = self.backbone.memory_spec
        given = {key: inputs[key] for key in spec.keys if key in inputs}
        if given:
            memory_length = given["memory"].shape[2]
        elif memory_length is None:
            # The model's own memory: the cost of a token stays flat in
            # `max_length`. Without memory, the whole context.
            memory_length = self.carried_memory_length or max_length
        if segment_length is None:
            segment_length = 64
        if isinstance(max_length, int):
            segment_length = min(segment_length, max_length)
        # A memory of `memory_length` zero slots, empty (or, with
        # memory_start="zeros", attended to), and the compressed memory of
        # the backbone's (compressive with compression_rate=1).
        memory = given or spec.zeros(
            batch_size,
            memory_length,
            valid_length=memory_length if memory_start == "zeros" else 0,
        )
        start_memory = memory
        hidden_states = ops.zeros(
            (batch_size, max_length, self.backbone.hidden_dim),
            dtype=self.backbone.compute_dtype,
        )  # (batch, max_len, hidden), for the contrastive sampler
        row_lengths = ops.sum(ops.cast(padding_mask, "int32"), axis=-1)
        # The sampler starts at the first position after the shortest
        # prompt; it feeds the token before it, so the memory must hold
        # the `index - 1` tokens before that one.
        index = ops.maximum(ops.min(row_lengths), 1)
        prompt_in_memory = index - 1

        def run_prompt(length, step, position, memory, hidden_states):
            """Runs `step` on the prompt's segments of `length` tokens from
            `position` while they end within `prompt_in_memory`."""

            def cond(position, memory, hidden_states):
                return position + length <= prompt_in_memory

            def body(position, memory, hidden_states):
                segment = ops.slice(
                    token_ids, [0, position], [batch_size, length]
                )  # (batch, length)
                hidden, memory = step(segment, memory)
                hidden_states = ops.slice_update(
                    hidden_states, [0, position, 0], hidden
                )
                return position + length, memory, hidden_states

            return ops.while_loop(cond, body, (position, memory, hidden_states))

        # The prompt goes into the memory in whole segments, then in
        # segments of 8 and 1, and the new tokens one at a time. The plain
        # backbone runs them on its memory's keys and values, projected
        # once here, not again at each step, with a window that slides
        # inside a segment: a token sees the `memory_length` keys before
        # it, as it would if the prompt were fed one token at a time, even
        # where the memory slides past its start (a zero start, or a
        # prompt longer than the memory). Its variants run their graph on
        # whole segments, as they read text in training.
        if self.backbone.generates_from_key_values:
            memory = self.key_value_cache(memory)
            start_cache = memory
            # The same for every new token: one token after the memory.
            position_keys = self._position_keys(1, memory_length)
            # And once per length of the prompt's segments.
            segment_keys = {
                length: self._position_keys(length, memory_length)
                for length in {segment_length, 8}
            }

            def segment_step(segment, key_value_cache):
                return self.call_with_key_value_cache(
                    segment,
                    key_value_cache,
                    segment_keys[segment.shape[1]],
                    sliding_window=True,
                )[1:]

            def step(token, key_value_cache):
                return self.call_with_key_value_cache(
                    token, key_value_cache, position_keys
                )[1:]

            runs = [(segment_length, segment_step), (8, segment_step)]
        else:
            step = self._generate_segment
            runs = [(segment_length, step)]
        runs.append((1, step))
        position = ops.zeros((), dtype="int32")
        for i, (length, run) in enumerate(runs):
            if (
                i
                and isinstance(segment_length, int)
                and length >= segment_length
            ):
                continue  # the whole segments took them
            position, memory, hidden_states = run_prompt(
                length, run, position, memory, hidden_states
            )

        def next_logits(prompt, cache, index):
            # One step of length 1: the token before `index`. `cache` is
            # the sampler's loop state: the key/value cache (or, for the
            # variants, the memory).
            token = ops.slice(
                prompt, [0, index - 1], [ops.shape(prompt)[0], 1]
            )  # (batch, 1)
            hidden, cache = step(token, cache)
            logits = self.compute_logits(hidden)  # (batch, 1, vocab)
            return logits[:, 0], hidden[:, 0], cache

        token_ids = self.sampler(
            next=next_logits,
            prompt=token_ids,
            cache=memory,
            index=index,
            mask=padding_mask,
            stop_token_ids=stop_token_ids,
            hidden_states=hidden_states,
            model=self,
        )
        if stop_token_ids is None:
            padding_mask = ops.ones_like(token_ids, dtype="bool")
        else:
            # A generated stop token ends its row: later positions become
            # padding.
            is_stop = ops.zeros_like(token_ids, dtype="bool")
            for stop_id in stop_token_ids:
                is_stop = ops.logical_or(is_stop, ops.equal(token_ids, stop_id))
            is_stop = ops.cast(
                ops.logical_and(is_stop, ops.logical_not(padding_mask)),
                "int32",
            )  # (batch, max_len)
            stops_before = ops.cumsum(is_stop, axis=-1) - is_stop
            padding_mask = stops_before == 0
        outputs = {"token_ids": token_ids, "padding_mask": padding_mask}
        if return_memory:
            outputs.update(
                self._memory_after(
                    token_ids, padding_mask, start_memory, start_cache
                )
            )
        return outputs


def check_prompt_padding(padding_mask):
    """Raises a `ValueError` unless every row of a concrete `padding_mask`
    is a non-empty run of True followed by False (right padding)."""
    if not is_concrete(padding_mask):
        return
    mask = np.asarray(ops.convert_to_numpy(padding_mask)).astype(bool)
    if mask.ndim != 2:
        return
    rows = np.flatnonzero(np.any(mask[:, 1:] & ~mask[:, :-1], axis=1))
    if rows.size:
        raise ValueError(
            "Prompts must be right-padded: `padding_mask` True on the "
            "prompt's tokens, then False. Row "
            f"{int(rows[0])} has padding before prompt tokens: "
            f"{mask[rows[0]].astype(int).tolist()}. Move each prompt to "
            "the start of its row (keras-hub preprocessors do)."
        )
    empty = np.flatnonzero(~mask[:, 0]) if mask.shape[1] else []
    if len(empty):
        raise ValueError(
            f"Every prompt needs at least one token; row {int(empty[0])} "
            "has none. Start it with a start or separator token."
        )


def check_stream_arguments(lm, inputs, memory, options):
    """Raises a `ValueError` (a `TypeError` for a dtype) unless
    `generate(memory=..., return_memory=...)` can run: a backbone that
    generates from its key/value cache, one batch of prompts, a memory
    of the backbone's spec with at least one slot, and no other start.
    The memory's batch is checked once the prompts are a batch
    (`check_memory_batch`)."""
    from keras_txl.models.transformer_xl_causal_lm_preprocessor import (
        TransformerXLCausalLMPreprocessor,
    )

    backbone = lm.backbone
    if not backbone.generates_from_key_values:
        raise ValueError(
            "`memory` and `return_memory` need a backbone that generates "
            "from its key/value cache (`TransformerXLBackbone`); "
            f"{type(backbone).__name__} generates through its graph. Carry "
            "its memory with `call_with_memory` instead."
        )
    if not isinstance(inputs, (dict, str, bytes, list, tuple)) and not (
        hasattr(inputs, "shape")
    ):
        raise ValueError(
            "`memory` and `return_memory` take the prompts as one batch "
            "(strings, or a dict of token ids), one memory row per prompt. "
            f"Received inputs of type {type(inputs).__name__}: generate "
            "batch by batch, each with its own memory."
        )
    if memory is None:
        return
    memory_length, _, memory_start, _ = options
    if memory_start != "empty":
        raise ValueError(
            "`memory_start` sets the memory of a generation without "
            f"`memory`; received memory_start={memory_start!r} and a "
            "`memory`. Drop one of them."
        )
    backbone.check_memory(memory)
    slots = memory["memory"].shape[2]
    if memory_length is not None and memory_length != slots:
        raise ValueError(
            f"`memory_length` ({memory_length}) must be the slots of "
            f"`memory` ({slots}) when a `memory` is given. Drop "
            "`memory_length`, or start a memory of that length with "
            "`backbone.initial_memory(batch_size, memory_length=...)`."
        )
    if not slots:
        raise ValueError(
            "`memory` has 0 slots: it holds nothing to continue from. Pass "
            "a memory of `memory_length >= 1` slots."
        )
    preprocessor = lm.preprocessor
    if (
        preprocessor is not None
        and not isinstance(inputs, dict)
        and not isinstance(preprocessor, TransformerXLCausalLMPreprocessor)
    ):
        raise ValueError(
            "`generate(memory=...)` on strings needs a "
            "`TransformerXLCausalLMPreprocessor`, which adds no start token "
            "to a prompt that follows a memory (`add_start_token=False`). "
            f"Received a {type(preprocessor).__name__}: pass token ids."
        )


def check_memory_batch(backbone, memory, token_ids):
    """Raises a `ValueError` unless `memory` has one row per prompt."""
    batch_size = token_ids.shape[0]
    rows = memory["memory"].shape[0]
    if rows != batch_size:
        raise ValueError(
            f"`memory` holds {rows} rows, and there are {batch_size} "
            "prompts: pass the memory returned for the same rows (one row "
            "per prompt), or `backbone.initial_memory(batch_size)`."
        )
    backbone.check_memory(memory, batch_size)
