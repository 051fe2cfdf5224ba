"""untuned_models_thirteenth.py's steps written in jax (jax.numpy, a jitted loss, gradients,
clipping and optimiser step), started from the torch model's initial parameters and data:
build(name, torch_model, data) -> step() returning the loss (ready). The runner sets
PJRT_NPROC=1 and XLA_FLAGS before jax's first import. Adam is untuned_models_eleventh_jax's,
clipping and cross-entropy the twelfth set's. The Transformer-XL's loss also takes and
returns its memory (carried from step to step, as the torch step carries it)."""
import math

from untuned_models_eleventh_jax import _adam
from untuned_models_twelfth_jax import _clip, _cross_entropy

NAMES = ("pixelcnn", "rwkv", "txl", "resnext")


def _conv(x, w, stride=1, pad=0, groups=1):
    import jax
    return jax.lax.conv_general_dilated(x, w, (stride, stride), ((pad, pad), (pad, pad)),
                                        dimension_numbers=("NCHW", "OIHW", "NCHW"),
                                        feature_group_count=groups)


def _bn(x, w, b, eps=1e-5):
    """BatchNorm2d in training mode (the batch's statistics, biased variance)."""
    mean = x.mean((0, 2, 3), keepdims=True)
    var = ((x - mean) ** 2).mean((0, 2, 3), keepdims=True)
    return (x - mean) / (var + eps) ** 0.5 * w[None, :, None, None] + b[None, :, None, None]


def _ln(x, p, name, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / (var + eps) ** 0.5 * p[name + ".weight"] + p[name + ".bias"]


def _pixelcnn_loss(model):
    import jax
    import jax.numpy as jnp
    masks = {k: jnp.asarray(v.numpy()) for k, v in model.named_buffers() if k.endswith("mask")}
    n_masked, last = len(masks), len(model) - 1

    def loss(params, inp, target):
        h = inp
        for i in range(n_masked):
            w = params[f"{3 * i}.weight"] * masks[f"{3 * i}.mask"]     # (forward's .data *= mask)
            h = _bn(_conv(h, w, pad=3), params[f"{3 * i + 1}.weight"], params[f"{3 * i + 1}.bias"])
            h = jax.nn.relu(h)
        logits = _conv(h, params[f"{last}.weight"]) + params[f"{last}.bias"][None, :, None, None]
        logits = logits.transpose(0, 2, 3, 1).reshape(-1, logits.shape[1])
        return _cross_entropy(logits, target.reshape(-1))
    return loss


def _rwkv_loss(model):
    import jax
    import jax.numpy as jnp
    n_layer = len(model.blocks)

    def shift(x):       # (nn.ZeroPad2d((0, 0, 1, -1)): the previous token, zeros first)
        return jnp.concatenate([jnp.zeros_like(x[:, :1]), x[:, :-1]], 1)

    def wkv(w, u, k, v):
        w = -jnp.exp(w)

        def step(carry, kv):
            a, b, p = carry
            kk, vv = kv
            ww = u + kk
            q = jnp.maximum(p, ww)
            e1, e2 = jnp.exp(p - q), jnp.exp(ww - q)
            y = (e1 * a + e2 * vv) / (e1 * b + e2)
            ww = w + p
            q = jnp.maximum(ww, kk)
            e1, e2 = jnp.exp(ww - q), jnp.exp(kk - q)
            return (e1 * a + e2 * vv, e1 * b + e2, q), y
        zeros = jnp.zeros_like(k[:, 0])
        _, ys = jax.lax.scan(step, (zeros, zeros, jnp.full_like(zeros, -1e38)),
                             (k.transpose(1, 0, 2), v.transpose(1, 0, 2)))
        return ys.transpose(1, 0, 2)

    def loss(params, inp, target):
        x = params["emb.weight"][inp]
        for i in range(n_layer):
            p = lambda k: params[f"blocks.{i}.{k}"]
            mix = lambda x, xx, m: x * m + xx * (1 - m)
            if i == 0:
                x = _ln(x, params, "blocks.0.ln0")
            y = _ln(x, params, f"blocks.{i}.ln1")
            yy = shift(y)
            k = mix(y, yy, p("att.time_mix_k")) @ p("att.key.weight").T
            v = mix(y, yy, p("att.time_mix_v")) @ p("att.value.weight").T
            r = mix(y, yy, p("att.time_mix_r")) @ p("att.receptance.weight").T
            att = jax.nn.sigmoid(r) * wkv(p("att.time_decay"), p("att.time_first"), k, v)
            x = x + att @ p("att.output.weight").T
            y = _ln(x, params, f"blocks.{i}.ln2")
            yy = shift(y)
            k = jnp.square(jax.nn.relu(mix(y, yy, p("ffn.time_mix_k")) @ p("ffn.key.weight").T))
            r = mix(y, yy, p("ffn.time_mix_r")) @ p("ffn.receptance.weight").T
            x = x + jax.nn.sigmoid(r) * (k @ p("ffn.value.weight").T)
        logits = _ln(x, params, "ln_out") @ params["head.weight"].T
        return _cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
    return loss


def _txl_loss(model):
    import jax
    import jax.numpy as jnp
    inv_freq = jnp.asarray(model.pos_emb.inv_freq.numpy())
    n_layer = len(model.layers)
    n_head, d_head = model.r_w_bias.shape
    mem_len = 32

    def attn(p, w, r, mem, mask, rwb, rrb):
        q_len, bsz = w.shape[:2]
        heads = jnp.concatenate([mem, w], 0) @ p("dec_attn.qkv_net.weight").T
        q, k, v = jnp.split(heads, 3, -1)
        q, k_len = q[-q_len:].reshape(q_len, bsz, n_head, d_head), k.shape[0]
        k, v = (t.reshape(k_len, bsz, n_head, d_head) for t in (k, v))
        rk = (r @ p("dec_attn.r_net.weight").T).reshape(r.shape[0], n_head, d_head)
        ac = jnp.einsum("ibnd,jbnd->ijbn", q + rwb, k)
        bd = jnp.einsum("ibnd,jnd->ijbn", q + rrb, rk)
        padded = jnp.concatenate([jnp.zeros_like(bd[:, :1]), bd], 1)     # (_rel_shift)
        bd = padded.reshape(k_len + 1, q_len, bsz, n_head)[1:].reshape(bd.shape)
        score = jnp.where(mask[:, :, None, None], -jnp.inf, (ac + bd) / math.sqrt(d_head))
        vec = jnp.einsum("ijbn,jbnd->ibnd", jax.nn.softmax(score, 1), v).reshape(q_len, bsz, -1)
        return w + vec @ p("dec_attn.o_net.weight").T

    def loss(params, mems, data, target):
        q_len = data.shape[0]
        h = params["word_emb.weight"][data] * math.sqrt(params["word_emb.weight"].shape[1])
        mlen = mems[0].shape[0]
        k_len = mlen + q_len
        mask = jnp.triu(jnp.ones((q_len, k_len), bool), 1 + mlen)
        pos = jnp.outer(jnp.arange(k_len - 1, -1, -1.0, dtype=h.dtype), inv_freq)
        r = jnp.concatenate([jnp.sin(pos), jnp.cos(pos)], -1)[:, None, :]
        hids = [h]
        for i in range(n_layer):
            p = lambda k: params[f"layers.{i}.{k}"]
            h = _ln(attn(p, h, r, mems[i], mask, params["r_w_bias"], params["r_r_bias"]),
                    params, f"layers.{i}.dec_attn.layer_norm")
            ff = jax.nn.relu(h @ p("pos_ff.CoreNet.0.weight").T + p("pos_ff.CoreNet.0.bias"))
            ff = ff @ p("pos_ff.CoreNet.2.weight").T + p("pos_ff.CoreNet.2.bias")
            h = _ln(h + ff, params, f"layers.{i}.pos_ff.layer_norm")
            hids.append(h)
        end = mlen + q_len
        new_mems = tuple(jax.lax.stop_gradient(jnp.concatenate([m, x], 0)[max(0, end - mem_len):end])
                         for m, x in zip(mems, hids))
        logits = h @ params["out_layer.weight"].T + params["out_layer.bias"]
        return _cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1)), new_mems
    return loss


def _resnext_loss(model):
    import jax
    card = model.stage_1.conv_conv.groups

    def block(p, x, stride):
        b = jax.nn.relu(_bn(_conv(x, p("conv_reduce.weight")), p("bn_reduce.weight"), p("bn_reduce.bias")))
        b = _conv(b, p("conv_conv.weight"), stride, 1, card)
        b = jax.nn.relu(_bn(b, p("bn.weight"), p("bn.bias")))
        b = _bn(_conv(b, p("conv_expand.weight")), p("bn_expand.weight"), p("bn_expand.bias"))
        s = jax.nn.relu(b.mean((2, 3)) @ p("se.fc.0.weight").T)
        b = b * jax.nn.sigmoid(s @ p("se.fc.2.weight").T)[:, :, None, None]
        res = _bn(_conv(x, p("shortcut.shortcut_conv.weight"), stride),
                  p("shortcut.shortcut_bn.weight"), p("shortcut.shortcut_bn.bias"))
        return jax.nn.relu(res + b)

    def loss(params, images, labels):
        x = jax.nn.relu(_bn(_conv(images, params["conv_1_3x3.weight"], pad=1),
                            params["bn_1.weight"], params["bn_1.bias"]))
        for k, stride in ((1, 1), (2, 2), (3, 2)):
            x = block(lambda n: params[f"stage_{k}.{n}"], x, stride)
        logits = x.mean((2, 3)) @ params["classifier.weight"].T + params["classifier.bias"]
        return _cross_entropy(logits, labels)
    return loss


def _sgd_nesterov(lr, momentum, wd):
    import jax
    import jax.numpy as jnp
    tm = jax.tree_util.tree_map

    def update(params, grads, buf):
        grads = tm(lambda g, p: g + wd * p, grads, params)
        buf = tm(lambda b, g: momentum * b + g, buf, grads)
        params = tm(lambda p, g, b: p - lr * (g + momentum * b), params, grads, buf)
        return params, buf
    return (lambda params: tm(jnp.zeros_like, params)), update


# name -> (loss maker, optimiser, clip norm or None, whether the loss carries a memory)
_SETUP = {
    "pixelcnn": (_pixelcnn_loss, lambda: _adam(1e-3, 0.9, 0.999, 1e-8, 0.0, decoupled=False), None, False),
    "rwkv": (_rwkv_loss, lambda: _adam(6e-4, 0.9, 0.99, 1e-8, 0.0, decoupled=False), 1.0, False),
    "txl": (_txl_loss, lambda: _adam(2.5e-4, 0.9, 0.999, 1e-8, 0.0, decoupled=False), 0.25, True),
    "resnext": (_resnext_loss, lambda: _sgd_nesterov(0.1, 0.9, 5e-4), None, False),
}


def build(name, model, data):
    import jax
    import jax.numpy as jnp
    make_loss, make_opt, clip, carries = _SETUP[name]
    loss = make_loss(model)
    opt_init, opt_update = make_opt()
    params = {k: jnp.asarray(v.detach().numpy()) for k, v in model.named_parameters()}
    args = tuple(jnp.asarray(d.numpy()) for d in data)

    @jax.jit
    def step(params, opt_state, carry, *args):
        if carries:
            (value, carry), grads = jax.value_and_grad(loss, has_aux=True)(params, carry, *args)
        else:
            value, grads = jax.value_and_grad(loss)(params, *args)
        if clip is not None:
            grads = _clip(grads, clip)
        params, opt_state = opt_update(params, grads, opt_state)
        return value, params, opt_state, carry

    width = params.get("word_emb.weight", jnp.zeros((1, 1))).shape[1]
    empty = tuple(jnp.zeros((0, args[0].shape[1], width), jnp.float32)
                  for _ in range(len(getattr(model, "layers", ())) + 1)) if carries else ()
    state = {"params": params, "opt": opt_init(params), "carry": empty}

    def run():
        value, state["params"], state["opt"], state["carry"] = step(
            state["params"], state["opt"], state["carry"], *args)
        return value.block_until_ready()
    return run
