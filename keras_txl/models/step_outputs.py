"""What `TransformerXLCausalLM.call` hands to `compute_loss` within one
train or test step, besides `y_pred`."""


class StepOutputs:
    """The tensors of a step that `compute_loss` needs and `y_pred` (the
    logits) does not hold: the hidden states that gave an adaptive
    softmax's log-probabilities (its loss is the per-cluster NLL of
    those states) and a compressive backbone's reconstruction loss (a
    metric).

    Keras hands `compute_loss` the inputs, targets and `y_pred` of a step,
    and `call` returns the logits alone (what `model(token_ids)` and
    `predict` return). The model owns one `StepOutputs`: `call` records
    into it, `compute_loss` of the same step takes the record out, as
    Keras keeps `add_loss` losses on the layers between the two. Both run
    in one traced function on JAX and TensorFlow, and one after the other
    on torch.

    Example:

    >>> outputs = StepOutputs()
    >>> outputs.record(logits="log_probs", hidden_states="states")
    >>> outputs.take()["hidden_states"]
    'states'
    >>> outputs.take()  # taken: empty until the next step
    {}
    """

    def __init__(self):
        self._record = {}

    def record(self, **tensors):
        """Adds `tensors` (`logits`, `hidden_states`,
        `reconstruction_loss`) to this step's record; `None` values are
        left out."""
        self._record.update(
            {key: value for key, value in tensors.items() if value is not None}
        )

    def take(self):
        """This step's record (a dict, empty if nothing was recorded),
        emptied."""
        record, self._record = self._record, {}
        return record
