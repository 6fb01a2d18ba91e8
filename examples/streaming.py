"""Streams without end: the memory as your state, across calls and commands.

Transformer-XL reads text longer than any segment by carrying a memory.
`generate` and `score` take that memory (`memory=`) and give it back
(`return_memory=True`), so a stream of text can go on from one call to
the next, and from one command to the next, at a cost per call that
depends on the new text, not on the text so far. This example shows:

1. A story continued across calls: `lm.generate(prompt, memory=...,
   return_memory=True)` twice gives, greedy, the tokens of one call on
   the whole story.
2. The same story continued across commands: `keras-txl generate RUN
   --prompt TEXT --state story.npz`, twice, each a new process, prints
   the text of the two calls (the state file holds the memory and the
   run, vocabulary and memory length it belongs to).
3. A long text scored piece by piece at constant memory: `lm.score(piece,
   memory=..., return_memory=True)`; the memory carried is the same size
   after every piece, and the per-token losses are those of one call on
   the whole text.
4. A long document classified: `TransformerXLTextClassifier` reads it in
   segments, carrying the memory, and predicts from its last token; with
   the memory, its first segment changes the prediction; without it,
   nothing before the last segment does.

Each part prints what its calls cost (seconds); docs/streaming.md
measures the cost per call of a stream against one call on the whole
text.

Run it (any Keras backend):

    python examples/train_char_lm.py       # trains runs/char_lm_preset
    python examples/streaming.py           # streams with its preset
    python examples/streaming.py --preset DIR
    python examples/streaming.py --smoke   # an untrained tiny model
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import keras
import numpy as np

from keras_txl.models import CharacterTokenizer
from keras_txl.models import TransformerXLBackbone
from keras_txl.models import TransformerXLCausalLM
from keras_txl.models import TransformerXLCausalLMPreprocessor
from keras_txl.models import TransformerXLTextClassifier

REPO = Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="runs/char_lm_preset")
    parser.add_argument(
        "--text", default=str(REPO / "data" / "tinyshakespeare.txt")
    )
    parser.add_argument("--new-tokens", type=int, default=32)  # per call
    parser.add_argument("--pieces", type=int, default=16)  # scored pieces
    parser.add_argument("--segment-length", type=int, default=64)  # T
    parser.add_argument("--memory-length", type=int, default=256)  # M
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.new_tokens, args.pieces = 8, 4
        args.segment_length, args.memory_length = 16, 64
    return args


def load_model(args):
    """The preset of `train_char_lm.py`, or (--smoke) an untrained tiny
    model with a character tokenizer, saved as a preset in a temporary
    folder (what `keras-txl generate` reads). Returns `(lm, preset)`."""
    if not args.smoke:
        if not os.path.isdir(args.preset):
            raise SystemExit(
                f"No preset at {args.preset!r}: run `python examples/"
                "train_char_lm.py` first, or pass --preset (or --smoke)."
            )
        return TransformerXLCausalLM.from_preset(args.preset), args.preset
    keras.utils.set_random_seed(0)
    text = Path(args.text).read_text(encoding="utf-8")
    tokenizer = CharacterTokenizer(sorted(set(text)))
    backbone = TransformerXLBackbone(
        vocabulary_size=tokenizer.vocabulary_size(),
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        head_dim=16,
        intermediate_dim=64,
        memory_length=args.memory_length,
    )
    preprocessor = TransformerXLCausalLMPreprocessor(tokenizer)
    lm = TransformerXLCausalLM(backbone, preprocessor=preprocessor)
    preset = os.path.join(tempfile.mkdtemp(), "tiny_preset")
    lm.save_to_preset(preset)
    return lm, preset


def timed(function, *args, **kwargs):
    """`(function(*args, **kwargs), seconds)`."""
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - start


# The story's prompts, one a call (or a command).
PROMPTS = ("ROMEO:\n", "\nJULIET:\n")


def story_across_calls(lm, args):
    """Part 1: the story in calls of `generate`, each continuing the
    memory of the one before, against one call on the whole text.
    Returns the story."""
    lm.compile(sampler="greedy")
    options = dict(stop_token_ids=None, memory_length=args.memory_length)
    story, memory, seconds = "", None, []
    for prompt in PROMPTS:
        # `max_length` counts this call's prompt and its new tokens.
        length = len(prompt) + args.new_tokens
        (text, memory), cost = timed(
            lm.generate,
            prompt,
            max_length=length,
            memory=memory,
            return_memory=True,
            **options,
        )
        story += text
        seconds.append(cost)
    # The whole story but the last call's continuation, in one call.
    whole = story[: -args.new_tokens]
    one, one_cost = timed(lm.generate, whole, max_length=len(story), **options)
    calls = len(PROMPTS)
    print(f"story: {calls} calls of {args.new_tokens} new tokens")
    print(repr(story))
    print(f"story: {calls} calls == one call: {one == story}")
    print(
        "story: seconds per call "
        + ", ".join(f"{s:.2f}" for s in seconds)
        + f"; one call on the whole text {one_cost:.2f} (each call "
        "compiles its lengths once: docs/streaming.md measures calls "
        "after that)"
    )
    return story if one == story else None


def story_across_commands(preset, args, folder, story):
    """Part 2: `keras-txl generate --state`, once per prompt, each a new
    process as a user runs them: the story of part 1 again."""
    state = os.path.join(folder, "story.npz")
    printed = []
    for prompt in PROMPTS:
        argv = ["generate", preset, "--prompt", prompt, "--state", state]
        argv += ["--sampler", "greedy", "--memory-length"]
        argv += [str(args.memory_length), "--max-length"]
        argv += [str(len(prompt) + args.new_tokens)]
        result = subprocess.run(
            [sys.executable, "-m", "keras_txl_cli", *argv],
            capture_output=True,
            text=True,
            check=True,
        )
        printed.append(result.stdout[:-1])  # the text, then a line break
    same = "".join(printed) == story
    print(f"commands: state file {os.path.getsize(state):,} bytes")
    print(f"commands: {len(PROMPTS)} commands == {len(PROMPTS)} calls: {same}")
    return same


def score_in_pieces(lm, args):
    """Part 3: a long text scored in pieces, the memory carried; the
    pieces' losses against one call on the whole text."""
    text = Path(args.text).read_text(encoding="utf-8")
    piece = 4 * args.segment_length  # a multiple: the same segments
    ids = lm.preprocessor.tokenizer(text[: args.pieces * piece + 1])
    ids = np.asarray(ids, "int32")[None]  # (1, pieces * piece + 1)
    inputs, targets = ids[:, :-1], ids[:, 1:]
    options = dict(
        scoring_mode="loss",
        segment_length=args.segment_length,
        memory_length=args.memory_length,
    )
    memory, losses, seconds, sizes = None, [], [], set()
    for start in range(0, inputs.shape[1], piece):
        stop = start + piece
        (loss, memory), cost = timed(
            lm.score,
            inputs[:, start:stop],
            target_ids=targets[:, start:stop],
            memory=memory,
            return_memory=True,
            **options,
        )
        losses.append(keras.ops.convert_to_numpy(loss))
        seconds.append(cost)
        sizes.add(sum(int(np.prod(v.shape)) for v in memory.values()))
    pieces = np.concatenate(losses, axis=1)  # (1, pieces * piece)
    whole = keras.ops.convert_to_numpy(
        lm.score(inputs, target_ids=targets, **options)
    )
    difference = float(np.abs(pieces - whole).max())
    print(
        f"score: {inputs.shape[1]:,} tokens in {len(losses)} pieces of "
        f"{piece}: {pieces.mean() / np.log(2):.4f} bits per character"
    )
    print(f"score: memory after each piece: {sorted(sizes)} numbers")
    print(f"score: pieces differ from one call by {difference:.1e} nats")
    later = np.median(seconds[1:]) if len(seconds) > 1 else seconds[0]
    print(
        f"score: seconds per piece {seconds[0]:.2f} (the first compiles), "
        f"then {later:.3f}"
    )
    return difference


def classify_document(lm, args):
    """Part 4: a document of 4 segments classified from its last token,
    with the memory and without: does its first segment change the
    prediction?"""
    T = args.segment_length
    text = Path(args.text).read_text(encoding="utf-8")
    ids = np.asarray(lm.preprocessor.tokenizer(text[: 8 * T]), "int32")
    documents = np.stack([ids[: 4 * T], ids[: 4 * T].copy()])  # (2, 4T)
    documents[1, :T] = ids[4 * T : 5 * T]  # another first segment
    for memory_length in (3 * T, 0):
        classifier = TransformerXLTextClassifier(
            lm.backbone,
            num_classes=2,
            segment_length=T,
            memory_length=memory_length,
            dropout=0.0,
        )
        classifier.predict(documents, verbose=0)  # compiles
        logits, cost = timed(classifier.predict, documents, verbose=0)
        change = float(np.abs(logits[0] - logits[1]).max())
        print(
            f"classify: memory {memory_length:>3}: 4 segments of {T} in "
            f"{cost:.2f} s; a new first segment moves the logits by "
            f"{change:.2e}"
        )


def main(argv=None):
    args = parse_args(argv)
    lm, preset = load_model(args)
    story = story_across_calls(lm, args)
    with tempfile.TemporaryDirectory() as folder:
        commands = story_across_commands(preset, args, folder, story)
    difference = score_in_pieces(lm, args)
    classify_document(lm, args)
    if not (story and commands and difference < 1e-4):
        raise SystemExit("A stream in pieces differs from one call.")


if __name__ == "__main__":
    main()
