import keras
import keras_hub


@keras.saving.register_keras_serializable(package="keras_txl")
class ByteTokenizer(keras_hub.tokenizers.ByteTokenizer):
    """keras-hub's `ByteTokenizer` (the UTF-8 bytes of the text, 256 ids)
    that a keras-hub preset can hold.

    keras-hub's preset saver and loader call `save_assets` and
    `load_preset_assets` on every tokenizer; its `ByteTokenizer` has no
    assets and fails there (no `save_assets`; `file_assets` is `None`).
    This subclass has nothing to save or load, so a model trained on bytes
    (`keras-txl train --tokenizer byte`) is a preset like any other.

    Args:
        **kwargs: the arguments of `keras_hub.tokenizers.ByteTokenizer`.

    Example:

    >>> ByteTokenizer(lowercase=False)("hé").tolist()
    [104, 195, 169]
    """

    def save_assets(self, dir_path):
        pass

    def load_assets(self, dir_path):
        pass

    def load_preset_assets(self, preset):
        pass
