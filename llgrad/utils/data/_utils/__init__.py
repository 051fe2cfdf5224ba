"""DataLoader internals (torch.utils.data._utils): collate."""
from . import collate  # noqa: F401
