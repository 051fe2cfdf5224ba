"""Session 67 (p5), tutorial-style programs of the trainer kind, run with PyTorch, with llgrad
eagerly and with llgrad compiling the training step (tutorial_harness.py):

- a Trainer class (Keras / Lightning style): callbacks with batch and epoch hooks, a logs
  dict of metrics, early stopping on the validation loss, the best state kept by
  copy.deepcopy(state_dict()) and restored; its bound train_step compiled in __init__,
  counting self.global_step, beside a __repr__ naming type(self);
- a HuggingFace-style classifier: a config dataclass, an attention mask (made from the
  padding when absent), model(**batch) returning a dict with the loss, LambdaLR warm-up;
- outputs as an attribute dict (`class ModelOutput(dict)` read as out.loss), nested, with a
  counter returned in it;
- gradient accumulation decided in the step by a counter, a metrics dict of .item() sums;
- early stopping inside the step: `if loss.item() < self.best:` keeps clones of the state.

trainer_callbacks traced every call and ran eagerly from the ninth with a recompile-limit
warning: the __repr__ naming `type` kept the step counter guarded by value
(tests/compile/test_type_reads_s67_p5.py). attrdict_outputs returned plain dicts from
compiled calls where eager returns the ModelOutput (out.stats raised AttributeError), and
a counter returned inside one traced again at every call (tracer/pytree.py: remade_dict).

Until session 68: trainer_callbacks_on_self (the callbacks held by the trainer) traced
every call, the lists their hooks grow between the calls guarded by their items as part of
`self` (compile/caller_lists.py marks them as appended to); dataclass_output (a dataclass
returned by the compiled step) ran eagerly (tracer/pytree.py: made_dataclasses)."""
import copy
import dataclasses
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def trainer_callbacks(torch, env, on_self=False):
    """A Trainer class (Lightning/Keras style): callbacks with on_train_batch_end /
    on_epoch_end hooks, a logs dict of metrics, early stopping on the validation loss, the
    best state kept by copy.deepcopy(state_dict()), restored at the end; its train_step a
    bound method compiled in __init__, counting self.global_step; a __repr__ naming
    type(self)."""
    nn, F = torch.nn, torch.nn.functional

    class Callback:
        def __repr__(self):
            return f"{type(self).__name__}()"

        def on_train_batch_end(self, trainer, logs):
            pass

        def on_epoch_end(self, trainer, epoch, logs):
            pass

    class History(Callback):
        def __init__(self):
            self.losses, self.epochs = [], []

        def on_train_batch_end(self, trainer, logs):
            self.losses.append(logs["loss"])

        def on_epoch_end(self, trainer, epoch, logs):
            self.epochs.append(dict(logs))

    class EarlyStopping(Callback):
        def __init__(self, patience, min_delta=0.0):
            self.patience, self.min_delta = patience, min_delta
            self.best, self.wait = math.inf, 0

        def on_epoch_end(self, trainer, epoch, logs):
            if logs["val_loss"] < self.best - self.min_delta:
                self.best, self.wait = logs["val_loss"], 0
                trainer.best_state = copy.deepcopy(trainer.model.state_dict())
            else:
                self.wait += 1
                if self.wait >= self.patience:
                    trainer.stop = True

    class Trainer:
        def __init__(self, model, opt, callbacks):
            self.model, self.opt = model, opt
            if on_self:     # (else fit is given them: the step's guards do not reach them)
                self.callbacks = callbacks
            self.global_step, self.stop, self.best_state = 0, False, None
            self.train_step = env.step(self._train_step)

        def __repr__(self):
            return f"{type(self).__name__}(step={self.global_step})"

        def _train_step(self, x, y):
            self.model.train()
            logits = self.model(x)
            loss = F.cross_entropy(logits, y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            self.global_step += 1
            acc = (logits.argmax(1) == y).float().mean()
            return {"loss": loss.detach(), "acc": acc}

        @torch.no_grad()
        def evaluate(self, x, y):
            self.model.eval()
            return F.cross_entropy(self.model(x), y).item()

        def fit(self, batches, val, epochs, callbacks=None):
            callbacks = self.callbacks if callbacks is None else callbacks
            for epoch in range(epochs):
                for x, y in batches:
                    out = self.train_step(x, y)
                    logs = {k: v.item() for k, v in out.items()}
                    for cb in callbacks:
                        cb.on_train_batch_end(self, logs)
                logs = {"val_loss": self.evaluate(*val), "step": self.global_step}
                for cb in callbacks:
                    cb.on_epoch_end(self, epoch, logs)
                if self.stop:
                    break
            if self.best_state is not None:
                self.model.load_state_dict(self.best_state)

    model = env.init(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.0),
                                   nn.Linear(16, 3)))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    history, stopper = History(), EarlyStopping(patience=2)
    trainer = Trainer(model, opt, [history, stopper])
    batches = [(env.randn(8, 6), env.randint(0, 3, (8,))) for _ in range(2)]
    val = (env.randn(16, 6), env.randint(0, 3, (16,)))
    trainer.fit(batches, val, epochs=6, callbacks=None if on_self else [history, stopper])
    env.rec("losses", history.losses)
    env.rec("epochs", [(e["val_loss"], e["step"]) for e in history.epochs])
    env.rec("stopped", (trainer.stop, stopper.wait, trainer.global_step, repr(trainer)))
    env.rec("params", dict(model.state_dict()))
    if env.compiled:        # (on self: EarlyStopping.wait, a number the loop changes, is an
        # input from its second value on: one trace more; History's lists grown by the loop
        # are guarded as appended to, compile/caller_lists.py)
        assert trainer.train_step.n_traces <= 2 + on_self, trainer.train_step.n_traces


def trainer_callbacks_on_self(torch, env):
    trainer_callbacks(torch, env, on_self=True)


def hf_style_classifier(torch, env):
    """A HuggingFace-style model: a config dataclass, embeddings + one self-attention layer
    with an attention mask (padding), forward(input_ids, attention_mask=None, labels=None)
    returning a dict with the loss, called as model(**batch); the step takes the batch dict
    and a linear warm-up schedule (LambdaLR) steps the lr."""
    nn, F = torch.nn, torch.nn.functional

    @dataclasses.dataclass
    class Config:
        vocab_size: int = 20
        hidden_size: int = 16
        num_heads: int = 2
        num_labels: int = 3
        max_len: int = 7
        dropout: float = 0.0
        pad_token_id: int = 0

    class SelfAttention(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.h, self.d = cfg.num_heads, cfg.hidden_size // cfg.num_heads
            self.qkv = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size, bias=False)
            self.out = nn.Linear(cfg.hidden_size, cfg.hidden_size)

        def forward(self, x, attention_mask):
            b, t, _ = x.shape
            q, k, v = self.qkv(x).view(b, t, 3, self.h, self.d).permute(2, 0, 3, 1, 4)
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.d)
            ext = (1.0 - attention_mask[:, None, None, :].to(scores.dtype)) * -1e4
            probs = (scores + ext).softmax(-1)
            ctx = (probs @ v).transpose(1, 2).reshape(b, t, -1)
            return self.out(ctx)

    class Classifier(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.config = cfg
            self.embed = nn.Embedding(cfg.vocab_size, cfg.hidden_size,
                                      padding_idx=cfg.pad_token_id)
            self.pos = nn.Embedding(cfg.max_len, cfg.hidden_size)
            self.ln1 = nn.LayerNorm(cfg.hidden_size)
            self.attn = SelfAttention(cfg)
            self.ln2 = nn.LayerNorm(cfg.hidden_size)
            self.head = nn.Linear(cfg.hidden_size, cfg.num_labels)

        def forward(self, input_ids, attention_mask=None, labels=None):
            if attention_mask is None:
                attention_mask = (input_ids != self.config.pad_token_id).long()
            t = input_ids.shape[1]
            x = self.ln1(self.embed(input_ids) + self.pos(torch.arange(t)))
            x = self.ln2(x + self.attn(x, attention_mask))
            m = attention_mask.unsqueeze(-1).to(x.dtype)
            pooled = (x * m).sum(1) / m.sum(1).clamp(min=1.0)
            logits = self.head(pooled)
            out = {"logits": logits}
            if labels is not None:
                out["loss"] = F.cross_entropy(logits.view(-1, self.config.num_labels),
                                              labels.view(-1))
            return out

    cfg = Config()
    model = env.init(Classifier(cfg))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    warmup = 3
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))

    def train_step(batch):
        model.train()
        outputs = model(**batch)
        loss = outputs["loss"]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        return loss.detach(), outputs["logits"].detach()

    step = env.step(train_step)
    for it in range(6):
        ids = env.randint(1, cfg.vocab_size, (4, cfg.max_len))
        lengths = [cfg.max_len, 4, 5, 2]
        mask = torch.zeros(4, cfg.max_len, dtype=torch.long)
        for i, n in enumerate(lengths):
            mask[i, :n] = 1
        ids = ids * mask          # (padding: token 0)
        batch = {"input_ids": ids, "attention_mask": mask,
                 "labels": env.randint(0, cfg.num_labels, (4,))}
        if it % 3 == 2:
            del batch["attention_mask"]         # (the model makes it from the padding)
        loss, logits = step(batch)
        env.rec(f"step {it}", (loss, logits, sched.get_last_lr()))
    env.rec("params", dict(model.state_dict()))


def attrdict_outputs(torch, env):
    """A model returning its outputs as an attribute dict (`class ModelOutput(dict)` with
    __getattr__ reading the items, as HuggingFace's outputs are read: out.loss), the compiled
    step returning one too, nested, with the step count as a number."""
    nn, F = torch.nn, torch.nn.functional

    class ModelOutput(dict):
        def __getattr__(self, name):
            try:
                return self[name]
            except KeyError:
                raise AttributeError(name) from None

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.body, self.head = nn.Linear(4, 8), nn.Linear(8, 3)

        def forward(self, x, labels=None):
            logits = self.head(F.gelu(self.body(x)))
            out = ModelOutput(logits=logits)
            if labels is not None:
                out["loss"] = F.cross_entropy(logits, labels)
            return out

    model = env.init(Model())
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    count = {"n": 0}

    def train_step(batch):
        out = model(**batch)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        count["n"] += 1
        return ModelOutput(loss=out.loss.detach(), stats=ModelOutput(
            acc=(out.logits.argmax(-1) == batch["labels"]).float().mean(), step=count["n"]))

    step = env.step(train_step)
    for it in range(5):
        out = step({"x": env.randn(6, 4), "labels": env.randint(0, 3, (6,))})
        env.rec(f"step {it}", (type(out).__name__, type(out.stats).__name__, out.loss,
                               out.stats.acc, out.stats.step))
    env.rec("params", dict(model.state_dict()))


def accum_inside_step(torch, env):
    """Gradient accumulation decided inside the compiled step by a counter on the trainer:
    `if self.micro % accum == 0:` clip, step and zero; a running metrics dict summed with
    .item() numbers in the step (`self.metrics["loss"] += loss.item()`)."""
    nn, F = torch.nn, torch.nn.functional

    class Accumulator:
        def __init__(self, model, accum):
            self.model, self.accum = model, accum
            self.opt = torch.optim.AdamW(model.parameters(), lr=0.02)
            self.micro = 0
            self.metrics = {"loss": 0.0, "n": 0}

        def step(self, x, y):
            loss = F.mse_loss(self.model(x), y)
            (loss / self.accum).backward()
            self.micro += 1
            self.metrics["loss"] += loss.item()
            self.metrics["n"] += 1
            if self.micro % self.accum == 0:
                nn.utils.clip_grad_norm_(self.model.parameters(), 0.5)
                self.opt.step()
                self.opt.zero_grad()
                return loss.detach(), True
            return loss.detach(), False

    acc = Accumulator(env.init(nn.Linear(4, 2)), accum=2)
    step = env.step(acc.step)
    for it in range(7):
        env.rec(f"step {it}", step(env.randn(5, 4), env.randn(5, 2)))
    env.rec("metrics", (acc.metrics["loss"] / acc.metrics["n"], acc.metrics["n"], acc.micro))
    env.rec("params", dict(acc.model.state_dict()))
    if env.compiled:
        assert step.n_traces <= 3, step.n_traces


def best_state_in_step(torch, env):
    """Early stopping inside the compiled step: when the loss improves on self.best (a
    Python float, compared with loss.item()), the best state is kept as detached clones of
    the state_dict and the patience counter reset, else the counter grows."""
    nn, F = torch.nn, torch.nn.functional

    class Trainer:
        def __init__(self, model):
            self.model = model
            self.opt = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.5)
            self.best, self.bad, self.best_state = math.inf, 0, None

        def train_step(self, x, y):
            loss = F.mse_loss(self.model(x), y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            value = loss.item()
            if value < self.best:
                self.best, self.bad = value, 0
                self.best_state = {k: v.detach().clone()
                                   for k, v in self.model.state_dict().items()}
            else:
                self.bad += 1
            return loss.detach()

    tr = Trainer(env.init(nn.Linear(3, 1)))
    step = env.step(tr.train_step)
    x, y = env.randn(8, 3), env.randn(8, 1)
    for it in range(8):
        env.rec(f"loss {it}", step(x, y))
    env.rec("best", (tr.best, tr.bad))
    env.rec("best_state", tr.best_state)


def dataclass_output(torch, env):
    """A model returning a dataclass output (HuggingFace's ModelOutput style: loss, logits,
    hidden states as fields, None where not asked), the step reading output.loss."""
    nn, F = torch.nn, torch.nn.functional

    @dataclasses.dataclass
    class Output:
        loss: object = None
        logits: object = None
        hidden: object = None

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.body, self.head = nn.Linear(5, 8), nn.Linear(8, 3)

        def forward(self, x, labels=None, output_hidden=False):
            h = torch.tanh(self.body(x))
            logits = self.head(h)
            loss = None if labels is None else F.cross_entropy(logits, labels)
            return Output(loss=loss, logits=logits, hidden=h if output_hidden else None)

    model = env.init(Model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_step(x, y):
        out = model(x, labels=y)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        return Output(loss=out.loss.detach(), logits=out.logits.detach())

    step = env.step(train_step)
    for it in range(4):
        o = step(env.randn(6, 5), env.randint(0, 3, (6,)))
        env.rec(f"step {it}", (o.loss, o.logits, o.hidden is None, type(o).__name__))
    env.rec("params", dict(model.state_dict()))
    if env.compiled:
        assert step.n_traces == 1, step.n_traces


PROGRAMS = {
    "trainer_callbacks": trainer_callbacks,
    "trainer_callbacks_on_self": trainer_callbacks_on_self,
    "hf_style_classifier": hf_style_classifier,
    "attrdict_outputs": attrdict_outputs,
    "accum_inside_step": accum_inside_step,
    "best_state_in_step": best_state_in_step,
    "dataclass_output": dataclass_output,
}
FAST = ("trainer_callbacks", "attrdict_outputs")


@pytest.mark.parametrize("name,program", program_params(
    PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST)))
def test_program(name, program):
    run_tutorial(program, rtol=2e-4, atol=1e-5)
