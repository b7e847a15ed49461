"""Errors the CLI maps to exit codes: bad input or config → 2, anything else at run time → 1."""


class SimhashSparkError(Exception):
    exit_code = 1


class ConfigError(SimhashSparkError):
    """The configuration or a command-line argument is invalid."""

    exit_code = 2


class InputError(SimhashSparkError):
    """The input data cannot be processed as configured (missing column, wrong type, null ids, ...)."""

    exit_code = 2


class OutputError(SimhashSparkError):
    """The output location cannot be used (exists without --overwrite, not writable)."""

    exit_code = 2
