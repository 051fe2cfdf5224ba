"""The events of a state-fuzzer scenario (tests/fuzz/state_programs.py draws the world and
the functions): calls of the functions with named, fresh, aliasing or out-of-range inputs,
under no_grad or inference_mode, by keyword, followed or not by a backward of the results;
and state changes eager code sees (attributes, globals, closure variables, tensors read
from the closure or globals rebound or written, NumPy writes, learning rate and other
hyperparameters, scheduler steps, train/eval, layers replaced, hooks added and removed,
requires_grad toggled, .grad cleared or set, the generator reseeded)."""

SCALES = (0.5, 1.5, -1.0, 0.25, 2.0)
LRS = (0.1, 0.05, 0.2, 0.01)
KINDS = ("fwd", "branch", "inplace", "index", "model", "step")
ACTS = ("nn.Tanh()", "nn.ReLU()", "nn.Sigmoid()")


class Event:
    def __init__(self, label, lines):
        self.label, self.lines, self.text = label, lines, "\n".join(lines) + "\n"


class Events:
    """Mixed into state_programs.Gen: the events, drawn after the world and functions."""

    def events(self):
        return [self.ev_call() if k == 0 and self.chance(0.8) or self.chance(0.5)
                else self.ev_state() for k in range(self.r.randint(4, 12))]

    def fresh(self, p, b, oob=False):
        """A fresh argument of kind p for batch size b (oob: an index out of range)."""
        shape = {"x": (b, self.D), "w": (self.D,), "v": (b, self.D), "t": (b, self.C)}.get(p)
        if shape:
            rg = self.chance({"x": 0.5, "w": 0.7}.get(p, 0))
            return f"T({shape}, {self.s()}{', rg=True' if rg else ''})"
        hi = {"idx": b, "y": self.C, "tok": self.V}[p]
        vals = [self.r.randrange(hi) for _ in range(self.r.randint(1, 3) if p == "idx" else b)]
        if oob:
            vals[self.r.randrange(len(vals))] = self.pick((hi, hi + 2, -hi - 1))
        return f"llgrad.tensor({vals})"

    def alias_args(self, fn, lines):
        """Two arguments sharing memory, or None when fn has no pair to alias."""
        B, D, s, A = self.B, self.D, self.s(), "llgrad.from_numpy(A)"
        if fn.params == ["v", "x"]:
            forms = {"the same tensor twice": ([], "v0", "v0"),
                     "two views of one base": ([f"P = T((2, {B}, {D}), {s})"], "P[0]", "P[1]"),
                     "two overlapping views": ([f"Q = T(({B + 1}, {D}), {s})"], "Q[1:]", "Q[:-1]"),
                     "two from_numpy of one array": ([f"A = N(({B}, {D}), {s})"], A, A)}
        elif fn.params == ["x", "w"]:
            forms = {"w a view of x's row": ([], "x0", "x0[0]"),
                     "from_numpy of one array and of its row": (
                         [f"A = N(({B}, {D}), {s})"], A, "llgrad.from_numpy(A[0])"),
                     **{f"w is the captured {c}": ([], "x0", c)
                        for c in ("G", "cfg.w", "nb") if c in self.feat}}
        else:
            return None
        how = self.pick(forms)
        lines += forms[how][0]
        return list(forms[how][1:]), how

    def ev_call(self):
        fn = self.pick(self.funcs)
        lines, label, args = [], f"call {fn.name}", None
        oob = self.chance(0.12) and ("idx" in fn.params or "tok" in fn.params and self.chance(0.5))
        if not oob and self.chance(0.15):
            got = self.alias_args(fn, lines)
            if got:
                args, how = got
                label += f" (aliasing: {how})"
        if args is None:
            fresh = oob or self.chance(0.3)
            b = self.pick(k for k in (1, 2, 3, 4, 5) if k != self.B) if fresh and \
                self.chance(0.3) else self.B
            args, n = [], 0
            two = "model2" in self.feat and self.chance(0.3)
            for p in fn.params:
                if p in ("model", "opt"):
                    args.append(p + "2" if two else p)
                elif not fresh:
                    args.append({"x": self.pick(("x0", "x1", "x0", "x1", "x0 * 1.5"))}
                                .get(p, f"{p}0"))
                else:
                    lines.append(f"a{n} = {self.fresh(p, b, oob and p in ('idx', 'tok'))}")
                    args.append(f"a{n}")
                    n += 1
            label += " (out-of-range index)" if oob else \
                f" (fresh inputs, batch {b})" if fresh else ""
        if self.chance(0.1) and fn.kind != "module":
            args = [f"{p}={a}" for p, a in zip(fn.params, args)]
            label += " by keyword"
        call = f"out = {fn.name}({', '.join(args)})"
        if self.chance(0.08 if fn.kind != "step" else 0.03):
            mode = self.pick(("no_grad", "no_grad", "inference_mode"))
            lines += [f"with llgrad.{mode}():", "    " + call]
            label += f" under {mode}"
        else:
            lines.append(call)
        if fn.kind != "step" and self.chance(0.6):
            lines.append("backward_all(out)")
            label += ", backward"
        return Event(label, lines)

    def ev_state(self):
        f, opts = self.feat, []
        text = "\n".join(ln for fn in self.funcs for ln in fn.lines)

        def add(weight, label, *lines, about=None):
            """An option; one about something no function reads is drawn less often."""
            weight *= 1 if about is None or any(a in text for a in about.split()) else 0.2
            opts.append((weight, label, list(lines)))
        v = self.pick(SCALES)
        add(2, "attribute", f"cfg.scale = {v}", about="cfg.scale")
        add(1.5, "attribute", "cfg.flag = not cfg.flag", about="cfg.flag")
        add(1, "attribute", f"cfg.n = {self.r.randint(0, 3)}", about="cfg.n")
        add(2, "global", f"alpha = {v}", about="alpha")
        add(0.5, "attribute", f"cfg.scale = {self.pick((1, 2))}", about="cfg.scale")   # an int
        add(0.3, "attribute deleted", self.pick(("del cfg.scale", "del cfg.flag")),
            about="cfg.scale cfg.flag")
        add(0.3, "global deleted", "del alpha", about="alpha")
        for fn in self.funcs:
            if fn.setter:
                add(2, "closure variable", f"{fn.setter}({v})")
        for t in [t for t in ("G", "cfg.w") if t in f]:
            add(1, "captured tensor rebound", f"{t} = T(({self.D},), {self.s()}, rg={self.rg[t]})",
                about=t)
            add(1, "captured tensor written", "with llgrad.no_grad():", f"    {t}.mul_(-1.5)",
                about=t)
        if "arr" in f:
            add(1, "NumPy write", self.pick(("arr += 1.0", "arr[0] = 5.0", "arr *= -1")),
                about="arr nb")
        if "opt" in f:
            add(1.5, "lr", f"opt.param_groups[0]['lr'] = {self.pick(LRS)}", about="opt")
            if "tlr" in f:
                add(1.5, "lr", f"opt.param_groups[0]['lr'].fill_({self.pick(LRS)})", about="opt")
            add(0.7, "zero_grad", "opt.zero_grad()")
            add(0.5, "hyperparameter", f"opt.param_groups[0]['weight_decay'] = "
                f"{self.pick((0.0, 0.1))}", about="opt")
            add(0.3, "optimiser state cleared", "opt.state.clear()", about="opt")
        if "sched" in f:
            add(1.5, "scheduler step", "sched.step()", about="opt")
        if "model" in f:
            add(1.5, "train/eval", self.pick(("model.train()", "model.eval()")), about="model")
            if any(fn.kind == "module" for fn in self.funcs):
                add(1.5, "train/eval", self.pick(("cnet.train()", "cnet.eval()")))
            if "model2" in f:
                add(1, "train/eval", self.pick(("model2.train()", "model2.eval()")))
            add(0.7, "parameter written", "with llgrad.no_grad():", "    model[0].weight.mul_(0.9)")
            add(0.5, ".grad cleared", "model[0].weight.grad = None")
            add(0.5, "layer replaced", f"model[{self.act}] = {self.pick(ACTS)}", about="model")
            add(0.3, "parameter rebound", f"model[-1].bias = nn.Parameter(T(({self.C},), "
                f"{self.s()}))", about="model")
        live = [t for t in ("x0", "w0", "W", "model[0].weight", "cfg.w") if self.rg.get(t)]
        if live:
            t, hook = self.pick(live), self.pick(("hook_count", "hook_scale"))
            h = f"h{self.n_handles}"
            add(2, "hook added", f"{h} = {t}.register_hook({hook})")
            opts[-1] += (t, h)
        if self.hooks:
            add(2, "hook removed", f"{self.pick(self.hooks)}.remove()")
        for t in list(self.rg):
            add(0.6, "requires_grad toggled", f"{t}.requires_grad_({not self.rg[t]})")
            opts[-1] += (t,)
        for t in [t for t in ("x0", "w0", "W") if t in self.rg]:
            add(0.6, ".grad cleared", f"{t}.grad = None")
            shape = {"x0": (self.B, self.D), "w0": (self.D,), "W": (self.D, self.C)}[t]
            add(0.3, ".grad set", f"{t}.grad = T({shape}, {self.s()})")
        for t in [t for t in ("x0", "v0") if t in self.rg]:
            add(1, "input rebound", f"{t} = T(({self.B}, {self.D}), {self.s()}, rg={self.rg[t]})")
        add(0.5, "generator reseeded", f"llgrad.manual_seed({self.s()})")
        weight, label, lines, *extra = self.r.choices(opts, [o[0] for o in opts])[0]
        if label == "hook added":
            self.hooks.append(extra[1])
            self.n_handles += 1
        if label == "hook removed":
            self.hooks.remove(lines[0].split(".")[0])
        elif label == "requires_grad toggled":
            self.rg[extra[0]] = not self.rg[extra[0]]
        return Event(label, lines)
