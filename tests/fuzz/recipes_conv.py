# Fuzz recipe of 2-D convolution (exec'd in programs.py's namespace: Gen, rg_of, RECIPES,
# ...). Its backward ops (convolution_backward_input / _weight) run wherever the program's
# gradients are compared: the recipe covers all three.
from llgrad.ir.ops_conv import out_size as _conv_out_size


def r_conv(g):
    """F.conv2d of a 3-D or 4-D float value with a fresh weight (and bias): kernel, stride,
    padding, dilation and groups drawn; 'same' padding sometimes."""
    x = g.need(lambda v: v.float and len(v.shape) in (3, 4) and 0 not in v.shape[-3:])
    shape = x.shape
    c, hw = shape[-3], shape[-2:]
    groups = g.choice([d for d in range(1, c + 1) if c % d == 0])
    o = groups * g.int(1, 2)
    k = (g.int(1, 3), g.int(1, 3))
    dil = (g.int(1, 2), g.int(1, 2))
    if g.chance(20):
        stride, pad, text_pad = (1, 1), "same", "'same'"
        th, tw = dil[0] * (k[0] - 1), dil[1] * (k[1] - 1)
        out = hw
        if (th % 2 or tw % 2) and 0 in shape:
            return False
    else:
        stride = (g.int(1, 3), g.int(1, 2))
        pad = (g.int(0, 2), g.int(0, 1))
        text_pad = repr(pad)
        out = _conv_out_size(hw, k, stride, pad, dil)
    if min(out) < 1:
        return False
    w = g.input((o, c // groups) + k, x.dtype)
    b = g.input((o,), x.dtype) if g.chance(50) else None
    v = g.new(shape[:-3] + (o,) + tuple(out), x.dtype, rg=rg_of(x, w, b))
    g.emit(f"{v} = F.conv2d({x}, {w}, {b}, {stride!r}, {text_pad}, {dil!r}, {groups})",
           x, w, b)
    g.op("convolution")


RECIPES.update({
    r_conv: (1, {"convolution", "convolution_backward_input", "convolution_backward_weight"}),
})
