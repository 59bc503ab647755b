"""One typed registry: classes of one kind by name, registered with a decorator or found
through entry points (lm-evaluation-harness's `Registry[T]`).

Environments, reducers and scorers each have one. Built-ins and third parties register the
same way: an entry point in the kind's group (built-ins in this project's pyproject.toml)
names a class, registered under the entry point's name when first asked for, or a module whose
`@register_...` decorators register its classes when it is imported. A name holding `{k}`
(reducers only) registers a family: `pass@{k}` serves pass@1, pass@2, ... Plugins declared
under an old name of a group (`_util.deprecated.OLD_ENTRY_POINT_GROUPS`) still load, with a
DeprecationWarning.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any, Generic, TypeVar

from gym_metrics._util.deprecated import old_groups, warn_old_group
from gym_metrics.errors import InvalidInputError, NotFoundError

T = TypeVar("T")
C = TypeVar("C", bound=type)

K = "{k}"
"""Placeholder of a family's parameter."""
MAX_K = 100_000
"""The largest k of a family member (`pass@100000`): a task needs k rollouts for it, and
`collect --num-repeats` makes at most as many; a larger k failed deep inside (OverflowError)."""


@dataclass(frozen=True)
class _Family(Generic[T]):
    pattern: str
    regex: re.Pattern[str]
    cls: type[T]


@dataclass(frozen=True)
class Snapshot(Generic[T]):
    """What a registry holds at one moment (see `Registry.snapshot`)."""

    classes: dict[str, type[T]]
    families: dict[str, _Family[T]]
    loaded: frozenset[str]


class Registry(Generic[T]):
    """Subclasses of `base` by name.

    `groups`: the entry-point groups searched, the current name first; older names after it
    (and those `OLD_ENTRY_POINT_GROUPS` maps to the first) are searched too, so plugins
    written for them keep working, with a DeprecationWarning. A name in the current group
    wins over the same name in an old one. `named`: registering sets the class's `name`
    ClassVar (and refuses a class that already names itself differently). `families`: names
    holding `{k}` register parametrised families, whose members get `name` and `k` set.
    """

    def __init__(
        self, kind: str, base: type[T], groups: Sequence[str], *, named: bool = False, families: bool = False
    ) -> None:
        self.kind, self.base = kind, base
        self.groups = tuple(dict.fromkeys([*groups, *old_groups(groups[0])]))
        self._named, self._families_allowed = named, families
        self._classes: dict[str, type[T]] = {}
        self._families: dict[str, _Family[T]] = {}
        self._members: dict[tuple[str, int], type[T]] = {}
        self._loaded: set[str] = set()

    @property
    def group(self) -> str:
        """The entry-point group new plugins declare."""
        return self.groups[0]

    # ----- registering -----

    def register(self, name: str) -> Callable[[C], C]:
        """Class decorator: make the class available as `get(name)`. Registering a name again
        replaces the earlier class, with a warning naming both when it is another class (a
        plugin shadowing a shipped one, or two of a user's own)."""

        def deco(cls: C) -> C:
            self.add(name, cls)
            return cls

        return deco

    def add(self, name: str, cls: object) -> None:
        """Register `cls` as `name` (what the decorator does)."""
        if not (isinstance(cls, type) and issubclass(cls, self.base)):
            raise TypeError(f"@register_{self.kind}({name!r}) needs a {self.base.__name__} subclass, got {cls!r}")
        if not name or name != name.strip():
            raise ValueError(f"bad {self.kind} name {name!r}")
        if self._named:
            own = cls.__dict__.get("name")
            if own and own != name:
                raise ValueError(f"{cls.__name__}.name is {own!r} but it is registered as {name!r}")
            setattr(cls, "name", name)
        if self._families_allowed and K in name:
            if name.count(K) != 1:
                raise ValueError(f"a family name holds {K} once, got {name!r}")
            self._families[name] = _Family(name, family_regex(name), cls)
            self._members.clear()
        else:
            earlier = self._classes.get(name)
            if earlier is not None and _where(earlier) != _where(cls):
                warnings.warn(f"@register_{self.kind}({name!r}): {_where(cls)} replaces {_where(earlier)}", stacklevel=3)
            self._classes[name] = cls

    # ----- finding -----

    def find(self, name: str) -> type[T] | None:
        """The class registered as `name` (or the family member it names), loading the entry
        points that could provide it; None when none does. Raises NotFoundError when the
        entry point named `name` fails to load."""
        found = self._lookup(name)
        if found is None:
            self._load_entry_points(name, all_others=False)
            found = self._lookup(name)
        return found

    def get(self, name: str) -> type[T]:
        """The class registered as `name`; NotFoundError listing the known names otherwise."""
        found = self.find(name)
        if found is None:
            broken = self._load_entry_points(name, all_others=True)  # a plugin module may register it
            found = self._lookup(name)
            if found is None:
                note = f" (plugins that failed to load: {'; '.join(broken)})" if broken else ""
                raise NotFoundError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names()) or 'none'}{note}")
        return found

    def names(self) -> list[str]:
        """Every name and family pattern `get` accepts, entry points included (not loaded)."""
        return sorted({*self._classes, *self._families, *(ep.name for ep in self._entry_points())})

    # ----- tests -----

    def snapshot(self) -> Snapshot[T]:
        """The registrations as they are now, for `restore` (tests that register classes)."""
        return Snapshot(dict(self._classes), dict(self._families), frozenset(self._loaded))

    def restore(self, snapshot: Snapshot[T]) -> None:
        self._classes = dict(snapshot.classes)
        self._families = dict(snapshot.families)
        self._loaded = set(snapshot.loaded)
        self._members.clear()

    # ----- internals -----

    def _lookup(self, name: str) -> type[T] | None:
        if name in self._classes:
            return self._classes[name]
        for family in self._families.values():
            match = family.regex.fullmatch(name)
            if match:
                digits = match.group(1)
                if len(digits) > len(str(MAX_K)) or int(digits) > MAX_K:
                    raise InvalidInputError(f"{self.kind} {name!r}: k is at most {MAX_K:,} (a task needs k rollouts)")
                return self._member(family, int(digits))
        return None

    def _member(self, family: _Family[T], k: int) -> type[T]:
        """The family member for one k: a subclass whose ClassVars name and k are fixed, so an
        instance needs no configuration (one class per k, made once)."""
        key = (family.pattern, k)
        member = self._members.get(key)
        if member is None or not issubclass(member, family.cls):
            cls = family.cls
            name = family.pattern.replace(K, str(k))
            member = type(cls.__name__ + f"_{k}", (cls,), {"name": name, "k": k, "__module__": cls.__module__})
            self._members[key] = member
        return member

    def _entry_points(self) -> list[EntryPoint]:
        """Every plugin, one per name: the current group's, else the first old group's."""
        found: dict[str, EntryPoint] = {}
        for group in self.groups:
            for ep in entry_points(group=group):
                found.setdefault(ep.name, ep)
        return list(found.values())

    def _load_entry_points(self, name: str, *, all_others: bool) -> list[str]:
        """Load the entry point named `name` (or the family pattern matching it); with
        `all_others`, every other not yet loaded too. Returns why other plugins failed to load;
        the one named `name` failing is an error at once."""
        pending = [ep for ep in self._entry_points() if ep.name not in self._loaded]
        first = [ep for ep in pending if _provides(ep.name, name)]
        for ep in first:
            self._load(ep)
        broken = []
        if all_others:
            for ep in pending:
                if ep not in first:
                    try:
                        self._load(ep)
                    except NotFoundError as exc:
                        broken.append(str(exc))
        return broken

    def _load(self, ep: EntryPoint) -> None:
        self._loaded.add(ep.name)
        if ep.group != self.group:
            warn_old_group(ep.group, self.group, ep.name)
        try:
            obj: Any = ep.load()
        except Exception as exc:
            raise NotFoundError(f"{self.kind} plugin {ep.name!r} ({ep.value}) failed to load: {exc!r}") from exc
        if isinstance(obj, type) and issubclass(obj, self.base):
            self.add(ep.name, obj)
        elif not isinstance(obj, ModuleType):
            raise NotFoundError(
                f"{self.kind} plugin {ep.name!r} ({ep.value}) is neither a {self.base.__name__} subclass nor a module"
            )


def family_regex(pattern: str) -> re.Pattern[str]:
    """`pass@{k}` -> a regex matching pass@1, pass@2, ... with k as group 1."""
    prefix, _, suffix = pattern.partition(K)
    return re.compile(re.escape(prefix) + r"([1-9][0-9]*)" + re.escape(suffix))


def _provides(entry: str, name: str) -> bool:
    return entry == name or (K in entry and family_regex(entry).fullmatch(name) is not None)


def _where(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
