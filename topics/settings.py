"""Settings declared once (issue 20): a field of a frozen config dataclass made with
``setting(...)`` carries its environment variable and its help text. From that one declaration:

- ``from_env(cls, env, **given)`` reads every declared variable, typed by the field's annotation
  (``int``, ``float``, ``str``, ``bool``, or one of them ``| None``); a value that does not parse is
  a ``ConfigError`` naming the variable;
- ``click_options(cls)`` makes a command-line option per setting (``--max-batch`` for
  ``max_batch``), whose help names the variable; a given option wins over the variable;
- ``settings_of(cls)`` lists them (the docs' tables are checked against it).

A field without ``setting`` (the ``KafkaConfig`` a config holds, say) is not read from the
environment. Validation stays in the class's ``__post_init__``, so a value is checked the same
whichever way it came.

Why not pydantic-settings (it is in the lock, through a test tool): its ``BaseSettings`` reads the
environment whenever a config is constructed, where Kadence's configs are frozen dataclasses
that a test or a caller builds explicitly and the environment reaches only through
``from_env``; it makes pydantic models of them (validation on every construction); and its
command line is argparse's, where the ``kadence`` commands are click's. What is needed here,
reading typed variables named in field metadata and making click options, is this module.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import ConfigError

__all__ = [
    "Setting",
    "click_options",
    "from_env",
    "given_options",
    "milliseconds_as_seconds",
    "milliseconds_setting",
    "session_timeout_setting",
    "setting",
    "settings_of",
]

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])

_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def setting(
    default: Any = dataclasses.MISSING,
    *,
    env: str,
    help: str,
    default_factory: Any = dataclasses.MISSING,
    parse: Callable[[str], object] | None = None,
    keep_empty: bool = False,
    option: str | None = None,
    repr: bool = True,
) -> Any:
    """A dataclass field read from ``env`` (and given on the command line), described by ``help``.
    ``parse``: text to value for a field of another type than int, float, str or bool (it raises
    ``ConfigError`` or ``ValueError`` for bad text). ``keep_empty``: a variable set to nothing is
    that value (which the config's checks then refuse: an empty Kafka bootstrap is a mistake to
    report, not a reason to fall back to localhost) instead of the default."""
    metadata: dict[str, object] = {
        "kadence_env": env,
        "kadence_help": help,
        "kadence_parse": parse,
        "kadence_keep_empty": keep_empty,
        "kadence_option": option,
    }
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata, repr=repr)
    return dataclasses.field(default=default, metadata=metadata, repr=repr)


def milliseconds_as_seconds(text: str) -> float:
    """A variable in milliseconds (``KADENCE_..._MS``) for a field in seconds (``milliseconds_setting``)."""
    try:
        ms = int(text)
    except ValueError:
        raise ValueError("must be a whole number of milliseconds") from None
    if ms < 0:
        raise ValueError("must not be negative")
    return ms / 1000


def milliseconds_setting(default_s: float, *, env: str, help: str) -> Any:
    """A field in seconds read from a variable in milliseconds; its help names the unit and the
    default as the variable gives them."""
    return setting(
        default_s, env=env, help=f"{help}, in ms (default {round(default_s * 1000)})", parse=milliseconds_as_seconds
    )


_SESSION_TIMEOUT_ENV = "KADENCE_SESSION_TIMEOUT_MS"
_SESSION_TIMEOUT_HELP = "how soon the group notices a dead instance"


def session_timeout_setting(*, seconds: bool = False) -> Any:
    """``KADENCE_SESSION_TIMEOUT_MS``, declared once for every component in a consumer group: a
    field in milliseconds (the processor, the timer service), or in seconds (``seconds``)."""
    if seconds:
        return milliseconds_setting(10.0, env=_SESSION_TIMEOUT_ENV, help=_SESSION_TIMEOUT_HELP)
    return setting(10_000, env=_SESSION_TIMEOUT_ENV, help=_SESSION_TIMEOUT_HELP)


@dataclass(frozen=True)
class Setting:
    name: str
    env: str
    #: the value's type: int, float, str or bool (str for a setting with its own parser)
    type: type
    optional: bool
    #: the default's text for help and docs ("" for a computed default)
    default: str
    help: str
    #: the setting's own text-to-value function, if it has one
    parser: Callable[[str], object] | None = None
    #: a variable set to nothing is read (and checked) rather than ignored
    keep_empty: bool = False
    #: the command-line option's name when it is not the field's (``--dir`` for ``directory``)
    option_name: str | None = None

    @property
    def option(self) -> str:
        return self.option_name or "--" + self.name.replace("_", "-")

    def parse(self, raw: str, source: str | None = None) -> Any:
        """``raw`` as this setting's type; ``ConfigError`` naming ``source`` (default: the variable)."""
        source = source or self.env
        text = raw.strip()
        if self.optional and text == "":
            return None
        if self.keep_empty and text == "" and self.type is str:
            return text
        try:
            if self.parser is not None:
                return self.parser(text)
            if self.type is bool:
                if text.lower() in _TRUE:
                    return True
                if text.lower() in _FALSE:
                    return False
                raise ValueError(text)
            return self.type(text)
        except ConfigError as exc:
            raise ConfigError(f"{source}={raw!r}: {exc}") from None
        except ValueError as exc:
            if self.parser is not None:
                raise ConfigError(f"{source}={raw!r}: {exc}") from None
            kind = {int: "an integer", float: "a number", bool: "true or false"}.get(self.type, "a string")
            raise ConfigError(f"{source}={raw!r}: {self.name} must be {kind}") from None


def _value_type(hint: Any) -> tuple[type, bool]:
    args = typing.get_args(hint)
    if args and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1 and rest[0] in (int, float, str, bool):
            return rest[0], True
    if hint in (int, float, str, bool):
        return hint, False
    raise TypeError(f"a setting must be int, float, str or bool (or one of them | None), not {hint!r}")


def settings_of(cls: type) -> list[Setting]:
    """The declared settings of a config dataclass, in field order."""
    hints = typing.get_type_hints(cls)
    out: list[Setting] = []
    for f in dataclasses.fields(cls):
        env = f.metadata.get("kadence_env")
        if env is None:
            continue
        parser = f.metadata.get("kadence_parse")
        kind, optional = (str, False) if parser is not None else _value_type(hints[f.name])
        default = "" if f.default is dataclasses.MISSING or parser is not None else _shown(f.default)
        keep_empty = bool(f.metadata.get("kadence_keep_empty"))
        option = f.metadata.get("kadence_option")
        out.append(
            Setting(f.name, env, kind, optional, default, f.metadata["kadence_help"], parser, keep_empty, option)
        )
    return out


def _shown(default: object) -> str:
    return "" if default is None else str(default)


def from_env(
    cls: type[_T],
    env: Mapping[str, str] | None = None,
    *,
    prefix: tuple[str, str] | None = None,
    defaults: Mapping[str, Any] | None = None,
    **given: Any,
) -> _T:
    """An instance of ``cls``: each declared setting from its variable when set (and not empty),
    else from ``defaults`` (what a config file gives: beneath the environment), else its declared
    default; ``given`` (the fields without a setting, options from the command line) wins over
    all. ``prefix=(declared, used)``: read each variable with its ``declared`` prefix replaced
    by ``used`` (one declaration for two instances: the archive's store, ``KADENCE_ARCHIVE_``,
    and the payload store, ``KADENCE_PAYLOAD_``)."""
    env = os.environ if env is None else env
    kw: dict[str, Any] = dict(defaults or {})
    for s in settings_of(cls):
        if s.name in given:
            continue
        var = s.env
        if prefix is not None:
            if not var.startswith(prefix[0]):
                raise ValueError(f"{var} does not start with {prefix[0]}")
            var = prefix[1] + var[len(prefix[0]) :]
        raw = env.get(var)
        if raw is not None and (raw.strip() != "" or s.keep_empty):
            kw[s.name] = s.parse(raw, var)
    kw.update(given)
    return cls(**kw)


def click_options(cls: type, *, leave_out: frozenset[str] = frozenset()) -> Callable[[_F], _F]:
    """A decorator adding one option per declared setting of ``cls`` (but the fields named in
    ``leave_out``); an option not given arrives as None (the variable or the default applies:
    ``given_options``)."""
    import click

    def decorate(command: _F) -> _F:
        for s in reversed([s for s in settings_of(cls) if s.name not in leave_out]):
            shown = f"; default {s.default}" if s.default else ""
            command = click.option(
                s.option,
                s.name,
                type=click.BOOL if s.type is bool else s.type,
                default=None,
                help=f"{s.help} [env {s.env}{shown}]",
            )(command)
        return command

    return decorate


def given_options(cls: type, options: Mapping[str, object]) -> dict[str, Any]:
    """The options of ``click_options(cls)`` that were given on the command line (a setting with
    its own parser parses the option's text: ``ConfigError`` naming the option)."""
    out: dict[str, Any] = {}
    for s in settings_of(cls):
        value = options.get(s.name)
        if value is not None:
            out[s.name] = s.parse(str(value), s.option) if s.parser is not None else value
    return out
