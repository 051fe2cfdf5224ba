"""Programs whose compiled steps write into what the caller holds: MoCo (a momentum encoder
updated through .data, a queue of keys written in place at a pointer kept in a buffer tensor,
read back with int()); in-place input augmentation (a batch normalised in place through
sub_ / div_, a slice of a larger dataset tensor given as the batch, so the writes reach the
dataset; index_put_ with accumulate into a captured statistics buffer); a Mixtral-style sparse
mixture of experts (torch.where routing, index_add_). Programs `f(torch, env)`, see
tutorial_harness.py."""


def moco(torch, env, data_assign=False):
    """data_assign: the official code's `param_k.data = param_k.data * m + ...` (a new
    memory for each key parameter); else the in-place `param_k.data.mul_(m).add_(...)`."""
    nn, F = torch.nn, torch.nn.functional
    dim, K, m, T = 4, 8, 0.9, 0.2

    class MoCo(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder_q = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, dim))
            self.encoder_k = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, dim))
            for param_q, param_k in zip(self.encoder_q.parameters(),
                                        self.encoder_k.parameters()):
                param_k.data.copy_(param_q.data)
                param_k.requires_grad = False
            self.register_buffer("queue", torch.zeros(dim, K))
            self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

        @torch.no_grad()
        def _momentum_update_key_encoder(self):
            for param_q, param_k in zip(self.encoder_q.parameters(),
                                        self.encoder_k.parameters()):
                if data_assign:
                    param_k.data = param_k.data * m + param_q.data * (1.0 - m)
                else:
                    param_k.data.mul_(m).add_(param_q.data, alpha=1.0 - m)

        @torch.no_grad()
        def _dequeue_and_enqueue(self, keys):
            batch_size = keys.shape[0]
            ptr = int(self.queue_ptr)
            assert K % batch_size == 0
            self.queue[:, ptr:ptr + batch_size] = keys.T
            ptr = (ptr + batch_size) % K
            self.queue_ptr[0] = ptr

        def forward(self, im_q, im_k):
            q = F.normalize(self.encoder_q(im_q), dim=1)
            with torch.no_grad():
                self._momentum_update_key_encoder()
                k = F.normalize(self.encoder_k(im_k), dim=1)
            l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
            l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])
            logits = torch.cat([l_pos, l_neg], dim=1) / T
            labels = torch.zeros(logits.shape[0], dtype=torch.long)
            self._dequeue_and_enqueue(k)
            return logits, labels

    model = env.init(MoCo())
    with torch.no_grad():
        model.queue.copy_(F.normalize(env.randn(dim, K), dim=0))
    optimizer = torch.optim.SGD(model.encoder_q.parameters(), lr=0.1, momentum=0.9,
                                weight_decay=1e-4)
    criterion = nn.CrossEntropyLoss()

    def train_step(im_q, im_k):
        output, target = model(im_q, im_k)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    x = env.randn(4, 6)
    for i in range(5):
        im_q, im_k = x + 0.1 * env.randn(4, 6), x + 0.1 * env.randn(4, 6)
        env.rec(f"step {i}", (train_step(im_q, im_k), int(model.queue_ptr)))
    env.rec("queue", model.queue)
    env.rec("key encoder", list(model.encoder_k.parameters()))


def inplace_inputs(torch, env):
    nn, F = torch.nn, torch.nn.functional
    data = env.randn(12, 5) * 3 + 1
    labels = env.randint(0, 3, (12,))
    model = env.init(nn.Linear(5, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    class_counts = torch.zeros(3)
    confusion = torch.zeros(3, 3)

    def train_step(x, y):
        mean, std = x.mean(dim=0, keepdim=True), x.std(dim=0, keepdim=True)
        x.sub_(mean).div_(std + 1e-5)               # normalised in place: the caller sees it
        x.clamp_(-2.0, 2.0)
        optimizer.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            class_counts.index_put_((y,), torch.ones_like(y, dtype=torch.float),
                                    accumulate=True)
            confusion[y, out.argmax(1)] += 1       # (repeated pairs: one write, as eagerly)
        return loss.item()

    train_step = env.step(train_step)
    for epoch in range(2):
        losses = []
        for i in range(0, 12, 4):
            losses.append(train_step(data[i:i + 4], labels[i:i + 4]))
        env.rec(f"epoch {epoch}", losses)
    env.rec("data", data)
    env.rec("counts", (class_counts, confusion))


def sparse_moe(torch, env):
    """A Mixtral-style sparse mixture of experts trained with its routing inside the
    compiled step: torch.where(selected_experts == i) picks each expert's tokens (their
    counts guards of the trace), index_add_ combines the weighted outputs."""
    nn, F = torch.nn, torch.nn.functional
    d, n_experts, top_k = 6, 4, 2

    class SparseMoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(d, n_experts, bias=False)
            self.experts = nn.ModuleList([nn.Sequential(nn.Linear(d, 8), nn.SiLU(),
                                                        nn.Linear(8, d))
                                          for _ in range(n_experts)])

        def forward(self, tokens):
            router_logits = self.gate(tokens)
            weights, selected_experts = torch.topk(router_logits, top_k)
            weights = F.softmax(weights, dim=1, dtype=torch.float).to(tokens.dtype)
            results = torch.zeros_like(tokens)
            for i, expert in enumerate(self.experts):
                batch_idx, nth_expert = torch.where(selected_experts == i)
                if batch_idx.numel() == 0:
                    continue
                contribution = weights[batch_idx, nth_expert, None] * expert(tokens[batch_idx])
                results.index_add_(0, batch_idx, contribution)
            return results, router_logits

    moe = env.init(SparseMoE())
    head = env.init(nn.Linear(d, 2))
    optimizer = torch.optim.Adam(list(moe.parameters()) + list(head.parameters()), lr=1e-2)
    x, y = env.randn(10, d), env.randint(0, 2, (10,))

    def step(x, y):
        optimizer.zero_grad()
        out, logits = moe(x)
        loss = F.cross_entropy(head(out + x), y)
        z_loss = torch.logsumexp(logits, dim=-1).pow(2).mean()      # router z-loss
        (loss + 1e-3 * z_loss).backward()
        optimizer.step()
        return loss.item(), torch.bincount(logits.topk(top_k)[1].flatten(), minlength=n_experts)

    step = env.step(step)
    for i in range(4):
        env.rec(f"step {i}", step(x, y))
    env.rec("experts", [e[0].weight for e in moe.experts])
