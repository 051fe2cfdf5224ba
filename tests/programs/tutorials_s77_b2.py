"""More programs of tests/programs/test_tutorials_s77_b.py (stop 77, file b): d2l.ai's BERT
pretraining loss, Karpathy's makemore MLP and nanoGPT training loop (warmup-cosine lr written
into the param groups, CPU bfloat16 autocast, gradient accumulation and clipping, a checkpoint
saved and resumed mid-run) and pytorch/examples time_sequence_prediction."""
import math


def bert_pretraining(torch, env):
    """d2l.ai 'Pretraining BERT': MaskLM gathering X[batch_idx, pred_positions], NextSentencePred
    on the <cls> encoding, the weighted MLM loss plus the NSP loss."""
    nn = torch.nn
    vocab_size, num_hiddens, max_len = 20, 16, 12

    class BERTEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_embedding = nn.Embedding(vocab_size, num_hiddens)
            self.segment_embedding = nn.Embedding(2, num_hiddens)
            self.blks = nn.Sequential()
            for i in range(2):
                self.blks.add_module(f"{i}", nn.TransformerEncoderLayer(
                    num_hiddens, 2, 32, dropout=0.0, batch_first=True, bias=False))
            self.pos_embedding = nn.Parameter(torch.zeros(1, max_len, num_hiddens))

        def forward(self, tokens, segments, valid_lens):
            X = self.token_embedding(tokens) + self.segment_embedding(segments)
            X = X + self.pos_embedding[:, :X.shape[1], :]
            mask = torch.arange(X.shape[1])[None, :] >= valid_lens[:, None]
            for blk in self.blks:
                X = blk(X, src_key_padding_mask=mask)
            return X

    class MaskLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(num_hiddens, num_hiddens), nn.ReLU(),
                                     nn.LayerNorm(num_hiddens), nn.Linear(num_hiddens, vocab_size))

        def forward(self, X, pred_positions):
            num_pred_positions = pred_positions.shape[1]
            pred_positions = pred_positions.reshape(-1)
            batch_size = X.shape[0]
            batch_idx = torch.arange(0, batch_size)
            batch_idx = torch.repeat_interleave(batch_idx, num_pred_positions)
            masked_X = X[batch_idx, pred_positions]
            masked_X = masked_X.reshape((batch_size, num_pred_positions, -1))
            return self.mlp(masked_X)

    class BERTModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = BERTEncoder()
            self.hidden = nn.Sequential(nn.Linear(num_hiddens, num_hiddens), nn.Tanh())
            self.mlm = MaskLM()
            self.nsp = nn.Linear(num_hiddens, 2)

        def forward(self, tokens, segments, valid_lens=None, pred_positions=None):
            encoded_X = self.encoder(tokens, segments, valid_lens)
            mlm_Y_hat = self.mlm(encoded_X, pred_positions) if pred_positions is not None else None
            nsp_Y_hat = self.nsp(self.hidden(encoded_X[:, 0, :]))
            return encoded_X, mlm_Y_hat, nsp_Y_hat

    net = env.init(BERTModel())
    loss = nn.CrossEntropyLoss(reduction="none")
    trainer = torch.optim.Adam(net.parameters(), lr=0.01)

    def _get_batch_loss_bert(tokens_X, segments_X, valid_lens_x, pred_positions_X,
                             mlm_weights_X, mlm_Y, nsp_y):
        _, mlm_Y_hat, nsp_Y_hat = net(tokens_X, segments_X, valid_lens_x.reshape(-1),
                                      pred_positions_X)
        mlm_l = loss(mlm_Y_hat.reshape(-1, vocab_size), mlm_Y.reshape(-1)) * \
            mlm_weights_X.reshape(-1, 1).squeeze(1)
        mlm_l = mlm_l.sum() / (mlm_weights_X.sum() + 1e-8)
        nsp_l = loss(nsp_Y_hat, nsp_y).mean()
        l = mlm_l + nsp_l
        return mlm_l, nsp_l, l

    def train_step(*batch):
        trainer.zero_grad()
        mlm_l, nsp_l, l = _get_batch_loss_bert(*batch)
        l.backward()
        trainer.step()
        return mlm_l, nsp_l

    train_step = env.step(train_step)
    n = 4
    tokens = env.randint(0, vocab_size, (n, max_len))
    segments = torch.cat([torch.zeros(n, 6, dtype=torch.long),
                          torch.ones(n, 6, dtype=torch.long)], 1)
    valid_lens = torch.tensor([12.0, 10.0, 9.0, 12.0])
    pred_positions = env.randint(1, 9, (n, 3))
    mlm_weights = torch.tensor([[1.0, 1.0, 0.0]] * n)
    mlm_Y = env.randint(0, vocab_size, (n, 3))
    nsp_y = env.randint(0, 2, (n,))
    for step in range(3):
        mlm_l, nsp_l = train_step(tokens, segments, valid_lens, pred_positions, mlm_weights,
                                  mlm_Y, nsp_y)
        env.rec(f"losses {step}", (mlm_l.item(), nsp_l.item()))
    env.rec("state", dict(net.state_dict()))


def makemore_mlp(torch, env):
    """Karpathy's makemore part 2: C[Xb] embedding lookup, p.grad = None, p.data += -lr * grad,
    a step-decayed lr, split losses under torch.no_grad()."""
    F = torch.nn.functional
    block_size, vocab = 3, 12
    g = env
    C = g.randn(vocab, 4)
    W1 = g.randn(12, 20) * (5 / 3) / (12 ** 0.5)
    b1 = g.randn(20) * 0.01
    W2 = g.randn(20, vocab) * 0.01
    b2 = g.randn(vocab) * 0
    parameters = [C, W1, b1, W2, b2]
    for p in parameters:
        p.requires_grad = True
    Xtr, Ytr = g.randint(0, vocab, (40, block_size)), g.randint(0, vocab, (40,))

    def step(Xb, Yb, lr):
        emb = C[Xb]
        embcat = emb.view(emb.shape[0], -1)
        h = torch.tanh(embcat @ W1 + b1)
        logits = h @ W2 + b2
        loss = F.cross_entropy(logits, Yb)
        for p in parameters:
            p.grad = None
        loss.backward()
        for p in parameters:
            p.data += -lr * p.grad
        return loss

    step = env.step(step)
    lossi = []
    for i in range(6):
        ix = g.randint(0, Xtr.shape[0], (8,))
        Xb, Yb = Xtr[ix], Ytr[ix]
        lr = 0.1 if i < 3 else 0.01
        loss = step(Xb, Yb, lr)
        lossi.append(loss.log10().item())
    env.rec("lossi", lossi)

    @torch.no_grad()
    def split_loss():
        emb = C[Xtr]
        h = torch.tanh(emb.view(emb.shape[0], -1) @ W1 + b1)
        return F.cross_entropy(h @ W2 + b2, Ytr).item()
    env.rec("split loss", split_loss())
    env.rec("params", parameters)


def nanogpt_loop(torch, env):
    """nanoGPT's train.py at toy size: get_lr() warmup + cosine written into each param group,
    autocast(device_type='cpu', dtype=torch.bfloat16), a disabled GradScaler, gradient
    accumulation, clip_grad_norm_, AdamW with decay / no-decay groups, estimate_loss() under
    no_grad, and a checkpoint dict saved and loaded mid-run into a fresh model."""
    nn, F = torch.nn, torch.nn.functional
    from contextlib import nullcontext
    block_size, vocab_size, n_embd = 8, 16, 16

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=False)   # (nanoGPT's bias=False)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                     nn.Linear(4 * n_embd, n_embd))

        def attn(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            k = k.view(B, T, 2, C // 2).transpose(1, 2)
            q = q.view(B, T, 2, C // 2).transpose(1, 2)
            v = v.view(B, T, 2, C // 2).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0,
                                               is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(vocab_size, n_embd), wpe=nn.Embedding(block_size, n_embd),
                h=nn.ModuleList([Block() for _ in range(2)]), ln_f=nn.LayerNorm(n_embd)))
            self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight

        def forward(self, idx, targets=None):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long)
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
            return logits, loss

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
            decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
            optim_groups = [{'params': decay_params, 'weight_decay': weight_decay},
                            {'params': nodecay_params, 'weight_decay': 0.0}]
            return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

    learning_rate, warmup_iters, lr_decay_iters, min_lr = 1e-2, 2, 8, 1e-3
    gradient_accumulation_steps, grad_clip = 2, 1.0

    def get_lr(it):
        if it < warmup_iters:
            return learning_rate * (it + 1) / (warmup_iters + 1)
        if it > lr_decay_iters:
            return min_lr
        decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return min_lr + coeff * (learning_rate - min_lr)

    data = env.randint(0, vocab_size, (200,))
    offsets = [env.choice(200 - block_size - 1) for _ in range(64)]

    def get_batch(i):
        ix = offsets[(4 * i) % 64:(4 * i) % 64 + 4]
        x = torch.stack([data[j:j + block_size] for j in ix])
        y = torch.stack([data[j + 1:j + 1 + block_size] for j in ix])
        return x, y

    ctx = nullcontext()   # (nanoGPT: autocast on 'cuda'; on 'cpu' its ctx is nullcontext)
    amp = torch.amp.autocast(device_type='cpu', dtype=torch.bfloat16)

    def make():
        model = env.init(GPT())
        optimizer = model.configure_optimizers(0.1, learning_rate, (0.9, 0.95))
        return model, optimizer

    def train(model, optimizer, iter_num, n_iters):
        scaler = torch.amp.GradScaler('cpu', enabled=False)

        def micro_step(X, Y):
            with ctx:
                logits, loss = model(X, Y)
                loss = loss / gradient_accumulation_steps
            scaler.scale(loss).backward()
            return loss

        def update():
            scaler.unscale_(optimizer)
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            return norm

        micro_step, update = env.step(micro_step), env.step(update)
        for _ in range(n_iters):
            lr = get_lr(iter_num)
            for param_group in optimizer.param_groups:
                param_group['lr'] = lr
            for micro in range(gradient_accumulation_steps):
                X, Y = get_batch(iter_num * gradient_accumulation_steps + micro)
                loss = micro_step(X, Y)
            norm = update()
            env.rec(f"iter {iter_num}", (loss.item() * gradient_accumulation_steps, norm.item()))
            iter_num += 1
        return iter_num

    @torch.no_grad()
    def estimate_loss(model):
        model.eval()
        X, Y = get_batch(3)
        with amp:
            logits, loss = model(X, Y)
        model.train()
        return loss.float().item(), str(logits.dtype)

    model, optimizer = make()
    iter_num = train(model, optimizer, 0, 3)
    env.rec("val", estimate_loss(model), cross=False)
    checkpoint = {'model': model.state_dict(), 'optimizer': optimizer.state_dict(),
                  'iter_num': iter_num, 'best_val_loss': 1e9}
    torch.save(checkpoint, env.path('ckpt.pt'))
    checkpoint = torch.load(env.path('ckpt.pt'), map_location='cpu')
    model, optimizer = make()
    state_dict = checkpoint['model']
    unwanted_prefix = '_orig_mod.'
    for k, v in list(state_dict.items()):
        if k.startswith(unwanted_prefix):
            state_dict[k[len(unwanted_prefix):]] = state_dict.pop(k)
    model.load_state_dict(state_dict)
    optimizer.load_state_dict(checkpoint['optimizer'])
    iter_num = train(model, optimizer, checkpoint['iter_num'], 3)
    env.rec("state", dict(model.state_dict()))


def time_sequence(torch, env):
    """pytorch/examples time_sequence_prediction: two LSTMCells unrolled over a sine wave with
    future steps, LBFGS with a closure, test prediction under no_grad, double precision."""
    nn = torch.nn

    class Sequence(nn.Module):
        def __init__(self):
            super(Sequence, self).__init__()
            self.lstm1 = nn.LSTMCell(1, 12)
            self.lstm2 = nn.LSTMCell(12, 12)
            self.linear = nn.Linear(12, 1)

        def forward(self, input, future=0):
            outputs = []
            h_t = torch.zeros(input.size(0), 12, dtype=torch.double)
            c_t = torch.zeros(input.size(0), 12, dtype=torch.double)
            h_t2 = torch.zeros(input.size(0), 12, dtype=torch.double)
            c_t2 = torch.zeros(input.size(0), 12, dtype=torch.double)
            for input_t in input.split(1, dim=1):
                h_t, c_t = self.lstm1(input_t, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            for i in range(future):
                h_t, c_t = self.lstm1(output, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            outputs = torch.cat(outputs, dim=1)
            return outputs

    T, L = 4, 12
    x = env.tensor(
        [[math.sin((i + 2 * k) / 2.0) for i in range(L)] for k in range(8)]).double()
    input, target = x[2:, :-1], x[2:, 1:]
    test_input, test_target = x[:2, :-1], x[:2, 1:]
    seq = env.init(Sequence()).double()
    criterion = nn.MSELoss()
    optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8, max_iter=4)

    def closure():
        optimizer.zero_grad()
        out = seq(input)
        loss = criterion(out, target)
        loss.backward()
        return loss

    closure = env.step(closure)
    for i in range(2):
        loss = optimizer.step(closure)
        env.rec(f"step {i}", loss.item())
        with torch.no_grad():
            future = 3
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            env.rec(f"test {i}", loss.item())
            y = pred.detach().numpy()
        env.rec(f"pred {i}", env.tensor(y))
