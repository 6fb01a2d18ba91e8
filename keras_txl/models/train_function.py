"""What the tasks do when Keras makes their train function."""


def build_optimizer_first(model):
    """Builds `model.optimizer` over the model's trainable variables, if it
    is not built yet: called when `fit` makes the train function, before
    that function is traced.

    Under TensorFlow without a distribution strategy, Keras builds the
    optimizer inside the first trace of the train step; a `tf.function`
    whose first trace creates variables is traced a second time, so the
    first `fit` traced the whole model and its gradient twice (of a
    classifier reading 4 segments, 18 of the first fit's 33 seconds).
    Built here, from the variables the step will update (after any
    freezing `fit` does), it is traced once. Under JAX and PyTorch, and
    under a TensorFlow strategy, Keras has built it already: nothing to
    do.

    Args:
        model: a compiled Keras model.
    """
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and not optimizer.built:
        optimizer.build(model.trainable_variables)
