"""What the fresh-process tests run in a child process, as a user would
(`python tests/app/fresh_process_child.py MODE FOLDER`):

- `train FOLDER`: tiny runs of every tokenizer kind (`keras-txl train`
  with `--tokenizer char`, `byte`, `word`, and `keras-txl convert` of the
  HuggingFace fixture for the WikiText-103 tokenizer), in FOLDER.
- `train_and_use FOLDER`: `train`, then `use` in the same process (the
  JAX child: a process start and imports fewer; the TensorFlow child's
  `use` starts from `import keras_txl` alone).
- `use FOLDER`, in one process: after `import keras_txl` alone, each run
  through `TransformerXLCausalLM.from_preset` and `keras_hub.models.
  CausalLM.from_preset`, generated text, and `keras.models.clone_model`
  of tied adaptive models (`load`); then every subcommand on its success
  path and on its documented errors, through `keras_txl_cli.cli.main`,
  with what a user sees (stdout, stderr, exit status) of each (`cli`);
  prints both as JSON.
- `torch FOLDER`: on torch, a character run trained, evaluated, sampled
  and exported through `main`, and its logits of two segments; prints
  JSON.

Imports nothing of keras_txl at module level: the `use` mode must start
from `import keras_txl`.
"""

import contextlib
import io
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures")
HUGGINGFACE = os.path.join(FIXTURES, "hf_transfo_xl")
# The runs, by tokenizer kind, in FOLDER.
RUNS = {
    "char": os.path.join("runs", "keras-txl"),
    "byte": os.path.join("runs", "byte"),
    "word": os.path.join("runs", "word"),
    "wikitext103": os.path.join("runs", "wt103"),
}
PROMPTS = {"char": "the ", "byte": "the ", "word": "the", "wikitext103": "The"}
TINY = [
    "--size",
    "tiny",
    "--steps",
    "2",
    "--segment-length",
    "8",
    "--batch-size",
    "2",
    "--memory-length",
    "8",
    "--eval-memory-length",
    "8",
    "--steps-per-epoch",
    "2",
    "--dropout",
    "0",
    "--valid-tokens",
    "32",
    # Validated without and with memory (each length a compile).
    "--validation-memory-lengths",
    "0,8",
    "--progress",
    "lines",  # the fit lines name the unit too
    "--sample-tokens",  # generation is the `load` and `cli` modes'
    "0",
]
TEXT = (
    "the quick brown fox jumps over the lazy dog .\n"
    "pack my box with five dozen liquor jugs .\n"
    "नमस्ते दुनिया , 你好 世界 , café naïve déjà vu .\n"
) * 6


def _corpus(folder):
    path = os.path.join(folder, "corpus.txt")
    if not os.path.exists(path):
        with open(path, "w", encoding="utf-8") as file:
            file.write(TEXT)
    return path


def _call(argv):
    """`keras-txl ARGV` in this process: `{"argv", "status", "out",
    "err"}`, the status 'exception' (and the traceback in `err`) when an
    exception escapes `main`."""
    from keras_txl_cli.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exit_:
            status = exit_.code
        except BaseException:  # what a user would see as a traceback
            status = "exception"
            err.write(traceback.format_exc())
    return {
        "argv": argv,
        "status": status,
        "out": out.getvalue(),
        "err": err.getvalue(),
    }


def _report(results):
    """The results on stdout's last line, after anything else printed."""
    print("\nRESULTS " + json.dumps(results))


def train(folder):
    os.chdir(folder)
    corpus = _corpus(folder)
    results = []
    for kind in ("char", "byte", "word"):
        results.append(
            _call(
                ["train", "--corpus", corpus, "--tokenizer", kind]
                + ["--output", RUNS[kind]]
                + TINY
            )
        )
    results.append(_call(["convert", HUGGINGFACE, RUNS["wikitext103"]]))
    return results


def load(folder):
    import keras_txl  # noqa: F401 (the only import before loading)

    os.chdir(folder)
    import keras_hub
    import numpy as np

    results = {}
    for index, (kind, run) in enumerate(RUNS.items()):
        lm = keras_txl.models.TransformerXLCausalLM.from_preset(run)
        task = keras_hub.models.CausalLM.from_preset(run)
        # The two routes load the same model: each generates for half of
        # the kinds (a generation compiles; twice per kind costs a minute).
        model = (lm, task)[index % 2]
        try:
            text = model.generate(PROMPTS[kind], max_length=12)
        except Exception as error:  # reported, the test decides
            text = {"error": f"{type(error).__name__}: {error}"}
        ours, theirs = lm.get_weights(), task.get_weights()
        same = len(ours) == len(theirs) > 0 and all(
            np.array_equal(a, b) for a, b in zip(ours, theirs)
        )
        results[kind] = {
            "classes": [type(lm).__name__, type(task).__name__],
            "tokenizer": type(task.preprocessor.tokenizer).__name__,
            "same_weights": same,
            "texts": [text],
        }
    results["clones"] = _clones(lm)
    return results


def _clones(lm):
    """Weight counts of `keras.models.clone_model` and of the original:
    the WikiText-103 run (an adaptive softmax tied to its embedding), and a
    user's own functional model tied the same way."""
    import keras

    from keras_txl.layers import AdaptiveEmbedding
    from keras_txl.layers import AdaptiveSoftmax

    tokens = keras.Input((None,), dtype="int32")
    embedding = AdaptiveEmbedding(
        vocabulary_size=40, embedding_dim=8, output_dim=8, cutoffs=[10]
    )
    hidden = keras.layers.Dense(8)(embedding(tokens))
    softmax = AdaptiveSoftmax(
        vocabulary_size=40,
        cutoffs=[10],
        embedding=embedding,
        tie_weights=True,
        tie_projections=True,
    )
    functional = keras.Model(tokens, softmax(hidden))
    return {
        name: [len(model.weights), len(keras.models.clone_model(model).weights)]
        for name, model in (("causal_lm", lm), ("functional", functional))
    }


def cli(folder):
    os.chdir(folder)
    corpus = _corpus(folder)
    char, byte = RUNS["char"], RUNS["byte"]
    empty = os.path.join(folder, "empty")
    os.makedirs(empty, exist_ok=True)
    # A preset folder that lost its config.json.
    broken = os.path.join(folder, "no_config")
    os.makedirs(broken, exist_ok=True)
    for name in ("task.json", "model.weights.h5", "metadata.json"):
        source = os.path.join(char, name)
        with (
            open(source, "rb") as file,
            open(os.path.join(broken, name), "wb") as copy,
        ):
            copy.write(file.read())
    missing = os.path.join(folder, "missing.txt")
    exported = os.path.join(folder, "exported_" + os.environ["KERAS_BACKEND"])
    tensorflow = os.environ["KERAS_BACKEND"] == "tensorflow"
    models = os.path.join(folder, "ablation_models")
    ablate_tiny = ["ablate", "--corpus", corpus, "--steps", "2"]
    ablate_tiny += ["--segment-length"]
    ablate_tiny += ["4", "--batch-size", "2", "--size", "micro"]
    ablate_tiny += ["--num-seeds", "1", "--eval-tokens", "32"]
    ablate_tiny += ["--eval-batch-size", "2", "--memory-sweep", "1"]
    ablate_tiny += ["--recl-contexts", "4", "--no-cost"]
    ablate_tiny += ["--variants", "recurrence_relative"]
    model_file = os.path.join(models, "seed_0", "recurrence_relative.keras")
    success = [
        ["evaluate", char],
        ["evaluate", byte, "--corpus", corpus],
        # Devanagari, Chinese, accented Latin: bytes of several
        # characters, which a byte-level model may split.
        ["generate", byte, "--prompt", "नमस्ते ", "--max-length", "40"],
        # (`convert`'s success path is the `train` mode's last run.)
        ["generate", RUNS["word"], "--prompt", "the quick"]
        + ["--max-length", "12"],
    ]
    if tensorflow:
        # Under another backend `export` hands the run's folder to a
        # TensorFlow child process (`keras_txl.export.saved_model`), which
        # the torch test's export runs, and serves: on JAX it was that
        # route again, a TensorFlow process more.
        success.insert(3, ["export", char, exported])
    if os.environ["KERAS_BACKEND"] == "jax":
        # Once, on JAX children: two prompts more, and `ablate` and
        # `recl`, whose success tests/app/test_ablate_command.py checks
        # in process on each backend (a minute of TensorFlow compiles).
        success += [
            ["generate", byte, "--prompt", "你好", "--max-length", "40"],
            ["generate", byte, "--prompt", "déjà vu ", "--max-length", "40"],
            ablate_tiny
            + ["--output", os.path.join(folder, "ablate")]
            + ["--save-models", models],
            ["recl", model_file, "--corpus", corpus, "--segment-length", "4"]
            + ["--contexts", "2,4", "--batch-size", "2"]
            + ["--eval-tokens", "32"],
        ]

    # Each error with what its one line must say: the argument at fault,
    # and the fix.
    def no_file(option, path):
        return [f"{option} '{path}' does not exist", "Check the path"]

    def no_model(path):
        return [f"No model in '{path}'", "Pass the --output folder of a"]

    cases = {
        "success": [[argv, None] for argv in success],
        "error": [
            [
                ["train", "--corpus", missing, "--output", "new"],
                no_file("--corpus", missing),
            ],
            [
                ["train", "--corpus", corpus, "--output", char],
                [f"'{char}' already holds a model", "Pass --resume to "],
            ],
            [["train", "--steps", "0"], ["--steps", "an integer >= 1"]],
            [["evaluate", empty], no_model(empty)],
            [
                ["evaluate", char, "--corpus", missing],
                no_file("--corpus", missing),
            ],
            [
                ["evaluate", char, "--split", "test"],
                ["no test part", "use --split valid, or --corpus FILE"],
            ],
            [["generate", empty, "--prompt", "a"], no_model(empty)],
            [
                ["generate", char, "--prompt", "the quick"]
                + ["--max-length", "3"],
                ["--max-length (3) is shorter", "Use at least 9"],
            ],
            [
                ["generate", char, "--prompt", "a", "--top-p", "0.5"],
                ["top_p=0.5", "`--sampler top_p`"],
            ],
            [["generate", char, "--prompt", ""], ["--prompt must not be"]],
            [["export", empty, os.path.join(folder, "out1")], no_model(empty)],
            [
                ["export", broken, os.path.join(folder, "out2")],
                ["has no config.json", "copy the whole folder"],
            ],
            [
                ["export", char, broken],  # a folder that holds files
                [f"'{broken}' already exists", "(`--overwrite` on the"],
            ],
            [
                ["convert", missing, os.path.join(folder, "out3")],
                [f"SOURCE '{missing}' does not exist", "Pass a HuggingFace"],
            ],
            [
                ["convert", RUNS["wikitext103"], char],  # OUT_DIR holds a run
                [f"'{char}' already holds a preset", "Pass --overwrite"],
            ],
            [["ablate", "--corpus", missing], no_file("--corpus", missing)],
            [
                ["ablate", "--variants", "nonsense"],
                ["--variants", "must be names among recurrence_relative"],
            ],
            [
                ["recl", missing, "--corpus", corpus],
                no_file("MODEL", missing) + ["Pass a .keras file"],
            ],
        ],
    }
    if os.environ["KERAS_BACKEND"] == "jax":  # the model `ablate` saved
        cases["error"].append(
            [
                ["recl", model_file, "--corpus", missing],
                no_file("--corpus", missing),
            ]
        )
    results = {
        kind: [dict(_call(argv), expected=says) for argv, says in argvs]
        for kind, argvs in cases.items()
    }
    return results


def torch(folder):
    """On torch: `train` (dropout 0.1), `evaluate`, `generate` and
    `export` of a character run; then the logits of two segments threaded
    through `call_with_memory` (`torch_logits.npz`), which the test
    compares with the export served by TensorFlow."""
    os.chdir(folder)
    corpus = _corpus(folder)
    run = os.path.join("runs", "torch")
    tiny = list(TINY)
    tiny[tiny.index("--dropout") + 1] = "0.1"
    # The whole validation part, which `evaluate RUN` reads.
    tiny[tiny.index("--valid-tokens") + 1] = "0"
    argvs = {
        "train": ["train", "--corpus", corpus, "--output", run]
        + ["--metrics-json", "train.json"]
        + tiny,
        "evaluate": ["evaluate", run, "--metrics-json", "evaluate.json"],
        "generate": ["generate", run, "--prompt", "the ", "--max-length", "20"],
        "export": ["export", run, "exported", "--batch-size", "1"],
    }
    results = {name: _call(argv) for name, argv in argvs.items()}

    import keras
    import numpy as np

    from keras_txl.models import TransformerXLCausalLM

    lm = TransformerXLCausalLM.from_preset(run)
    rng = np.random.default_rng(0)
    segments = rng.integers(0, 20, (2, 1, 8)).astype("int32")  # (n, b, T)
    memory = lm.backbone.initial_memory(1, 8)
    logits = []
    for segment in segments:
        segment_logits, memory = lm.call_with_memory(segment, memory)
        logits.append(keras.ops.convert_to_numpy(segment_logits))
    np.savez("torch_logits.npz", segments=segments, logits=np.stack(logits))
    results["backend"] = keras.backend.backend()
    return results


def use(folder):
    """`load`, then `cli`, in one process (runs another backend trained)."""
    return {"load": load(folder), "cli": cli(folder)}


def train_and_use(folder):
    """`train`, then `use` in the same process."""
    trained = train(folder)
    return {"train": trained, "use": use(folder)}


if __name__ == "__main__":
    mode, folder = sys.argv[1:]
    modes = {"train": train, "use": use, "train_and_use": train_and_use}
    _report({**modes, "torch": torch}[mode](folder))
