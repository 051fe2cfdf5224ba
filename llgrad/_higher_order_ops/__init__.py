"""llgrad._higher_order_ops: the torch._higher_order_ops names programs import
(foreach_map, which the foreach recipe uses)."""
from .foreach_map import foreach_map  # noqa: F401
