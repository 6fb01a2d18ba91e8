"""Load a pretrained Transformer-XL and fine-tune it with LoRA on new text.

What this shows, top to bottom:

1. `TransformerXLCausalLM.from_preset` on a HuggingFace Transformer-XL
   checkpoint (a handle such as `hf://transfo-xl/transfo-xl-wt103`, or a
   folder that `save_pretrained` wrote), a folder of the authors'
   TensorFlow checkpoint, or a keras-hub preset: weights, adaptive
   softmax and word tokenizer, loaded without `pickle.load`.
2. The model's log-probability of each word of a sentence (explicit
   `call_with_memory`: the sentence read as one segment, empty memory).
3. LoRA: `lm.backbone.enable_lora(rank)` freezes the backbone and adds
   low-rank factors to the attention's query and value projections; the
   model is then fine-tuned with `fit` on ordered segments of a new text,
   the memory carried from batch to batch as in pretraining.
4. The perplexity of held-out new text and a greedy continuation of the
   same prompt, before and after; the LoRA factors saved alone
   (`save_lora_weights`).

Run it:

    pip install "keras-txl[pretrained]"    # huggingface_hub, sacremoses
    python examples/finetune_pretrained.py   # wt103 (downloads ~1 GB) on
                                             # data/tinyshakespeare.txt
    python examples/finetune_pretrained.py --preset PATH --text FILE
    python examples/finetune_pretrained.py --smoke   # the tiny random
        # HuggingFace checkpoint of tests/fixtures/hf_transfo_xl

Defaults: rank 8, segments of 64 words and the model's own memory, 8
streams, 300 steps (rounded up to whole passes over the text) at a
learning rate of 1e-3 on the first 90% of the first 400,000 characters
of the text, perplexity on the rest.

The output of a run on a 2-core CPU (2026-12-01), on the tiny checkpoint
(no network here for wt103): docs/examples.md.
"""

import argparse
import os
import sys
from pathlib import Path

import keras
import numpy as np

from keras_txl.data import segment_dataset
from keras_txl.models import TransformerXLCausalLM
from keras_txl.training import evaluate_bpc

# `fit`'s progress: bars on a terminal, one plain line per epoch in a log
# file (no carriage returns or terminal codes).
FIT_PROGRESS = 1 if sys.stdout.isatty() else 2

REPO = Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="hf://transfo-xl/transfo-xl-wt103")
    parser.add_argument(
        "--text", default=str(REPO / "data" / "tinyshakespeare.txt")
    )
    parser.add_argument("--max-chars", type=int, default=400_000)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--segment-length", type=int, default=64)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--prompt", default="The king")
    parser.add_argument("--output", default="runs/finetuned.lora.h5")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.preset = str(REPO / "tests" / "fixtures" / "hf_transfo_xl")
        args.max_chars, args.steps, args.segment_length = 8000, 10, 16
        args.batch_size, args.rank = 4, 4
        # Ten steps at 1e-3 move the held-out perplexity of the tiny
        # random checkpoint by about 0.01, under the printed precision;
        # at 3e-2 by about 1.
        args.learning_rate = 3e-2
    return args


def main(argv=None):
    args = parse_args(argv)
    # -----------------------------------------------------------------------
    # 1. The pretrained model and its tokenizer.
    # -----------------------------------------------------------------------
    lm = TransformerXLCausalLM.from_preset(args.preset)
    backbone, tokenizer = lm.backbone, lm.preprocessor.tokenizer
    print(
        f"{args.preset}: {backbone.num_layers} layers x "
        f"{backbone.hidden_dim}, vocabulary {backbone.vocabulary_size:,}, "
        f"memory {backbone.memory_length}, "
        f"{backbone.count_params():,} parameters"
    )

    # -----------------------------------------------------------------------
    # 2. Log-probabilities of the words of a sentence.
    # -----------------------------------------------------------------------
    sentence = "The king is dead , long live the king ."
    ids = np.asarray(tokenizer(sentence), "int32")[None]  # (1, words)
    logits, _ = lm.call_with_memory(ids)  # (1, words, vocab)
    log_probs = keras.ops.convert_to_numpy(
        keras.ops.log_softmax(logits, axis=-1)
    )[0]  # (words, vocab)
    words = [tokenizer.id_to_token(int(i)) for i in ids[0]]
    print("log p(word | the words before it):")
    for k in range(1, ids.shape[1]):
        print(f"  {words[k]:>10} {log_probs[k - 1, ids[0, k]]:8.3f}")

    # -----------------------------------------------------------------------
    # 3. New text as ordered segments; LoRA; fit.
    # -----------------------------------------------------------------------
    text = Path(args.text).read_text(encoding="utf-8")[: args.max_chars]
    cut = len(text) * 9 // 10
    # The word tokenizer of the checkpoint (its words outside the
    # vocabulary become <unk>), one id array per part.
    train_ids = np.asarray(tokenizer(text[:cut]), "int32")
    valid_ids = np.asarray(tokenizer(text[cut:]), "int32")
    train = segment_dataset(train_ids, args.batch_size, args.segment_length)
    valid = segment_dataset(valid_ids, args.batch_size, args.segment_length)
    print(
        f"new text: {len(train_ids):,} words to train, "
        f"{len(valid_ids):,} held out"
    )

    def perplexity_and_sample():
        perplexity = evaluate_bpc(lm, valid)["perplexity"]  # its memory
        # 24 words, even if the model would end the text earlier.
        sample = lm.generate(args.prompt, max_length=24, stop_token_ids=None)
        return perplexity, sample

    lm.compile(sampler="greedy")  # the default loss and metrics
    before = perplexity_and_sample()

    backbone.enable_lora(rank=args.rank)
    trainable = sum(int(np.prod(w.shape)) for w in lm.trainable_weights)
    total = lm.count_params()
    # Trainable now: the LoRA factors, and the output layer's own weights
    # (its biases; with an adaptive softmax, also its head).
    print(
        f"LoRA rank {args.rank}: {trainable:,} trainable of {total:,} "
        f"parameters ({100 * trainable / total:.2f}%)"
    )
    lm.compile(
        optimizer=keras.optimizers.Adam(args.learning_rate),
        sampler="greedy",
    )
    # One pass over the text is one epoch (the memory is emptied at each
    # epoch start, when the streams start again).
    per_epoch = min(args.steps, int(train.cardinality()))
    lm.fit(
        train.take(per_epoch),
        epochs=-(-args.steps // per_epoch),
        shuffle=False,
        verbose=FIT_PROGRESS,
    )
    after = perplexity_and_sample()

    # -----------------------------------------------------------------------
    # 4. Before and after.
    # -----------------------------------------------------------------------
    for name, (ppl, sample) in (("before", before), ("after", after)):
        print(f"{name:>6}: held-out perplexity {ppl:10.2f} | {sample!r}")
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    backbone.save_lora_weights(args.output)
    print(f"LoRA factors saved to {args.output}")
    return before[0], after[0]


if __name__ == "__main__":
    main()
