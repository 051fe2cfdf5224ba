"""The named tuples ops return (torch.return_types.max, linalg_qr, ...): one factory, and the
registry llgrad.return_types reads, so that pickle finds each class by its name (a saved
`torch.max(x, 1)` loads back) and isinstance checks name them as torch's code does."""
import collections

REGISTRY = {}       # name -> class (llgrad.return_types.<name>)


def named_result(name, fields=("values", "indices")):
    """The class llgrad.return_types.<name>: a named tuple of fields printed as torch's."""
    fields = list(fields)

    def __repr__(self):
        inner = ",\n".join(f"{f}={getattr(self, f)!r}" for f in fields)
        return f"llgrad.return_types.{name}(\n{inner})"
    cls = type(name, (collections.namedtuple(name, fields),), {
        "__slots__": (), "__repr__": __repr__, "__str__": __repr__,
        "__module__": "llgrad.return_types",
        "__doc__": f"({', '.join(fields)}), as torch.return_types.{name}."})
    REGISTRY[name] = cls
    return cls
