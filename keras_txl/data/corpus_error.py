"""The error raised for a corpus that cannot be used."""


class CorpusError(ValueError):
    """A corpus is missing, empty, unreadable or too short for the request.

    The message is one line that names the file or the numbers involved and
    says how to fix the call, so that a command-line tool can print it
    without a traceback:

    ```python
    try:
        text = keras_txl.data.load_text(path)
    except keras_txl.data.CorpusError as error:
        raise SystemExit(f"error: {error}")
    ```
    """
