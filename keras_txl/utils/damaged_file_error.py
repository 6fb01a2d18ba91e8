import os


class DamagedFileError(ValueError):
    """A saved file that cannot be used: missing from its folder,
    truncated, not the format its name says, or holding the weights of
    another model.

    Its message is one line that names the file and says what is wrong
    with it; `path` and `problem` hold the two parts.

    Args:
        path: the file.
        problem: str. What is wrong, as the end of a sentence that starts
            with the file's name ("is truncated ...").

    Example:

    >>> error = DamagedFileError("run/config.json", "is not valid JSON.")
    >>> str(error)
    "'run/config.json' is not valid JSON."
    """

    def __init__(self, path, problem):
        self.path = os.fspath(path)
        self.problem = str(problem)
        super().__init__(f"'{self.path}' {self.problem}")
