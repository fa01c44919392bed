"""The one mechanism behind every fault catalogue: named faults, validation, the active set.

A catalogue is a fixed, ordered set of `Fault`s of one kind ("fault" for the fake deployment's,
"engine fault" for the toy engine's behind the real Dynamo frontend). `ActiveFaults` is the set
switched on; asking it about a name outside its catalogue is a programming error and raises, so
a typo in code cannot silently switch a fault off.

One idiom asks: `faults.active("name")`, on the set the code holds (the deployment's
`state.faults`, a worker's `worker.runtime.faults`, the toy engine's `engine.faults`). Code
shared by both deployments (the runtime, the system servers' routes) asks the same set about
faults of either catalogue: a catalogue declares the other's names it may be asked about
(`foreign`), and its set answers them off.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Fault:
    """One named way of breaking the contract.

    `applies_to`: the fake deployments (deployment faults: a backend, or `vllm-sidecar` for vLLM
    with the native sidecar's routes) or request surfaces (engine faults) where it can manifest;
    a no-op elsewhere. `observed`: what the real Dynamo 1.6.1 frontend did with it,
    where that was measured (engine faults). `slow`: a run against it waits out the deadlines
    it breaks, tens of seconds longer than against another fault (the kill matrix gives it a
    shard of its own)."""

    name: str
    description: str
    applies_to: frozenset[str]
    observed: str = ""
    slow: bool = False


class UnknownFaultError(ValueError):
    """Names outside the catalogue; the message lists the valid ones."""

    def __init__(self, kind: str, unknown: Iterable[str], valid: Iterable[str]) -> None:
        self.unknown = tuple(unknown)
        super().__init__(
            f"unknown {kind}(s): {', '.join(self.unknown)}; valid {kind}s are: {', '.join(valid)}"
        )


class Catalogue:
    def __init__(self, kind: str, faults: Iterable[Fault], *, foreign: Iterable[str] = ()) -> None:
        ordered = tuple(faults)
        self.kind = kind
        self.by_name: Mapping[str, Fault] = MappingProxyType({f.name: f for f in ordered})
        self.names: tuple[str, ...] = tuple(f.name for f in ordered)
        if len(self.by_name) != len(ordered):
            raise ValueError(f"a {kind} name is used twice")
        # Another catalogue's faults, asked by code shared with it: always off here, and
        # never switched on (`validate` refuses them).
        self.foreign: frozenset[str] = frozenset(foreign) - self.by_name.keys()

    def validate(self, names: Iterable[str]) -> tuple[str, ...]:
        """The names sorted and de-duplicated, or `UnknownFaultError`."""
        wanted = list(names)
        unknown = [name for name in wanted if name not in self.by_name]
        if unknown:
            raise UnknownFaultError(self.kind, unknown, self.names)
        return tuple(sorted(set(wanted)))

    def lines(self) -> list[str]:
        """`NAME<TAB>description` lines, as the `--list-*` options print them."""
        return [f"{name}\t{self.by_name[name].description}" for name in self.names]


class ActiveFaults:
    """The faults of one catalogue switched on now; safe to replace from another thread."""

    def __init__(self, catalogue: Catalogue, names: Iterable[str] = ()) -> None:
        self.catalogue = catalogue
        self._lock = threading.Lock()
        self.flags: Mapping[str, bool] = {}
        self._switch(catalogue.validate(names))

    def active(self, name: str) -> bool:
        try:
            return self.flags[name]
        except KeyError:
            raise KeyError(f"no {self.catalogue.kind} named {name!r} in the catalogue") from None

    def set(self, names: Iterable[str]) -> tuple[str, ...]:
        """Replace the active set (validated as a whole: nothing changes on error)."""
        valid = self.catalogue.validate(names)
        with self._lock:
            self._switch(valid)
        return valid

    def _switch(self, names: Iterable[str]) -> None:
        active = frozenset(names)
        # Every catalogue name, switched on or off, and the foreign ones off: one lookup
        # answers (and a typo raises).
        flags = dict.fromkeys(self.catalogue.foreign, False)
        flags.update((name, name in active) for name in self.catalogue.names)
        self.flags = flags

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(name for name, on in self.flags.items() if on))
