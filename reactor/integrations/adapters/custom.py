"""An adapter a platform team declares in the policy (`adapters.custom`, parsed in config.py): one pod template, a
replica count where declared, and the name the operator gives its child (`childName`) where declared.

Everything else is the base class's: no refusals of its own, the rollout its status and its child report.
Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from reactor.integrations.adapters import naming
from reactor.integrations.adapters.base import NO_NAMING_RULE, Adapter, Obj, Part


@dataclass(frozen=True)
class CustomAdapter(Adapter):
    """`template`: the declared pod spec and replica paths. `child_name`: the declared naming rule (`{owner}` for
    the resource's name), or None: links to the kind cannot be confirmed from the owner's side, so the reactor only
    recommends on it."""

    template: Part = Part("", ("spec", "template", "spec"))
    child_name: str | None = None

    def parts(self, obj: Obj) -> tuple[Part, ...]:
        return (self.template,)

    def names_child(self, owner: Obj, child_kind: str, child: Obj) -> str | None:
        return None if self.child_name is None else naming.by_pattern(self.child_name, owner, child_kind, child)

    def recommend_only(self) -> str:
        return "" if self.child_name is not None else NO_NAMING_RULE.format(kind=self.kind)
