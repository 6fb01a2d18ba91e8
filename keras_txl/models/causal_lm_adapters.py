"""What changes a trained `TransformerXLCausalLM`'s weights in place:
LoRA and quantization (a mixin of the task, before keras-hub's
`CausalLM` in its bases)."""

from keras_txl.models import lora


class CausalLMAdapters:
    """LoRA and `quantize()` of the task: the backbone's, with the output
    layer frozen (LoRA) or kept float (quantization)."""

    def enable_lora(self, rank, target_layer_names=None):
        """`backbone.enable_lora` (see there for the targets), and the
        output layer frozen too: only the LoRA kernels train."""
        self.backbone.enable_lora(rank, target_layer_names)
        self._freeze_all_but_lora()

    def save_lora_weights(self, filepath):
        """`backbone.save_lora_weights`: the LoRA kernels, all that trains
        after `enable_lora`."""
        self.backbone.save_lora_weights(filepath)

    def load_lora_weights(self, filepath):
        """`backbone.load_lora_weights`, the output layer frozen."""
        self.backbone.load_lora_weights(filepath)
        self._freeze_all_but_lora()

    def _freeze_all_but_lora(self):
        # Built first: the output layer's weights are made in `build`.
        if not self.built:
            self.build()
        lora.freeze_all_but_lora(self)

    def _carried_memory_arguments(self, method, args, kwargs):
        if getattr(self.backbone, "_lora_enabled_layers", []):
            # `backbone.enable_lora` leaves the output layer trainable.
            self._freeze_all_but_lora()
        return super()._carried_memory_arguments(method, args, kwargs)

    def _check_quantize_args(self, mode, compute_dtype):
        # Keras runs this check before `quantize`, and refuses an unbuilt
        # model; the weights of this one need no input shape.
        if not self.built:
            self.build()
        super()._check_quantize_args(mode, compute_dtype)

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """Quantizes the backbone (see `TransformerXLBackbone.quantize`:
        modes `"int8"`, `"int4"`, `"float8"`; every check runs before
        anything changes). The output layer stays float: with tied
        weights it reads the quantized embedding through its lookup. The
        carried memory is activations, never quantized."""
        self.backbone.quantize(mode, config=config, filters=filters, **kwargs)
        self.train_function = None
        self.test_function = None
        self.predict_function = None
        self._post_quantize(mode)
