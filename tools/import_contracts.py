"""import-linter contract types of this project (registered in pyproject.toml).

``private_modules``: a module whose name starts with ``_`` belongs to the package that
holds it. Only that package (its modules and subpackages) may import it, so a private
helper that another package needs is moved down to a shared layer (``fasttune._support``)
or made public, never reached into. Checked on direct imports, including those inside
functions; new private modules are covered without listing them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields, output


@dataclass
class _Breach:
    importer: str
    imported: str
    line_numbers: list[int] = field(default_factory=list)


def owner_of(module: str) -> str | None:
    """The package a module is private to (the parent of its innermost ``_name`` part).

    >>> owner_of("fasttune.logger._tfevents"), owner_of("fasttune.logger.csv")
    ('fasttune.logger', None)
    """
    parts = module.split(".")
    private = [i for i, part in enumerate(parts) if part.startswith("_") and i > 0]
    if not private or parts[private[-1]].startswith("__"):
        return None
    return ".".join(parts[: private[-1]])


class PrivateModulesContract(Contract):
    """Modules named ``_x`` are imported only from inside the package that holds them.

    Configuration options:
        - containers: The packages whose modules are checked (with all descendants).
    """

    type_name = "private_modules"

    containers = fields.ListField(subfield=fields.ModuleField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        breaches = []
        for container in self.containers:
            for imported in sorted(graph.find_descendants(container.name)):
                owner = owner_of(imported)
                if owner is None:
                    continue
                for importer in sorted(graph.find_modules_that_directly_import(imported)):
                    if importer == owner or importer.startswith(owner + "."):
                        continue
                    details = graph.get_import_details(importer=importer, imported=imported)
                    breaches.append(
                        _Breach(importer, imported, [d["line_number"] for d in details])
                    )
        return ContractCheck(kept=not breaches, metadata={"breaches": breaches})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for breach in check.metadata["breaches"]:
            lines = ", ".join(map(str, breach.line_numbers))
            output.print_error(
                f"- {breach.importer} -> {breach.imported} (l.{lines}): private to "
                f"{owner_of(breach.imported)}",
                bold=False,
            )
        output.new_line()
