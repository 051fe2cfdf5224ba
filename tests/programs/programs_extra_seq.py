"""Sequence programs of common kinds: a GRU encoder-decoder with attention, teacher forcing
and packed padded batches; a char-level LSTM language model with tied embedding/output
weights and truncated BPTT; a TransformerEncoder text classifier with a key-padding mask;
a dilated, depthwise-separable Conv1d classifier. Programs `f(torch, env)`, see
tutorial_harness.py."""
import math


def seq2seq_gru_packed(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    rnn_utils = nn.utils.rnn
    PAD, SOS, EOS = 0, 1, 2
    SRC_V, TGT_V, EMB, HID = 12, 10, 8, 12

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(SRC_V, EMB, padding_idx=PAD)
            self.gru = nn.GRU(EMB, HID, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(2 * HID, HID)

        def forward(self, src, src_len):
            embedded = self.embedding(src)
            packed = rnn_utils.pack_padded_sequence(embedded, src_len, batch_first=True,
                                                    enforce_sorted=False)
            packed_outputs, hidden = self.gru(packed)
            outputs, _ = rnn_utils.pad_packed_sequence(packed_outputs, batch_first=True)
            hidden = torch.tanh(self.fc(torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1)))
            return outputs, hidden

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(TGT_V, EMB)
            self.attn_proj = nn.Linear(2 * HID, HID, bias=False)
            self.gru = nn.GRU(EMB + 2 * HID, HID, batch_first=True)
            self.fc_out = nn.Linear(HID + 2 * HID + EMB, TGT_V)

        def forward(self, input, hidden, encoder_outputs, mask):
            embedded = self.embedding(input.unsqueeze(1))                      # (B, 1, E)
            scores = torch.bmm(self.attn_proj(encoder_outputs), hidden.unsqueeze(2)).squeeze(2)
            attn = F.softmax(scores.masked_fill(mask == 0, -1e10), dim=1)     # (B, S)
            weighted = torch.bmm(attn.unsqueeze(1), encoder_outputs)            # (B, 1, 2H)
            output, hidden = self.gru(torch.cat((embedded, weighted), dim=2), hidden.unsqueeze(0))
            prediction = self.fc_out(torch.cat((output, weighted, embedded), dim=2).squeeze(1))
            return prediction, hidden.squeeze(0), attn

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder, self.decoder = Encoder(), Decoder()

        def create_mask(self, src):
            return (src != PAD)

        def forward(self, src, src_len, trg, teacher_forcing):
            batch_size, trg_len = trg.shape
            outputs = torch.zeros(batch_size, trg_len, TGT_V)
            encoder_outputs, hidden = self.encoder(src, src_len)
            mask = self.create_mask(src)[:, :encoder_outputs.shape[1]]
            input = trg[:, 0]
            for t in range(1, trg_len):
                output, hidden, _ = self.decoder(input, hidden, encoder_outputs, mask)
                outputs[:, t] = output
                top1 = output.argmax(1)
                input = trg[:, t] if teacher_forcing else top1
            return outputs

    model = env.init(Seq2Seq())
    optimizer = optim.Adam(model.parameters(), lr=5e-3)
    criterion = nn.CrossEntropyLoss(ignore_index=PAD)

    def make_batch(lengths, trg_len=4):
        seqs = [env.randint(3, SRC_V, (n,)) for n in lengths]
        src = rnn_utils.pad_sequence(seqs, batch_first=True, padding_value=PAD)
        trg = env.randint(3, TGT_V, (len(lengths), trg_len))
        trg[:, 0] = SOS
        trg[0, -1] = EOS
        trg[1, -2:] = torch.tensor([EOS, PAD])
        return src, torch.tensor(lengths), trg

    batches = [make_batch([4, 6, 3]), make_batch([6, 2, 5])]
    teacher_forcing_ratio = 0.5
    forcing = [env.choice(100) / 100 < teacher_forcing_ratio for _ in range(4)]

    def train_step(src, src_len, trg, teacher_forcing):
        model.train()
        optimizer.zero_grad()
        output = model(src, src_len, trg, teacher_forcing)
        output_dim = output.shape[-1]
        loss = criterion(output[:, 1:].reshape(-1, output_dim), trg[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for epoch in range(2):
        for i, (src, src_len, trg) in enumerate(batches):
            env.rec(f"loss {epoch} {i}", train_step(src, src_len, trg, forcing[2 * epoch + i]))
    env.rec("state", model.state_dict())

    # greedy decoding with attention weights, stopping when every sequence emitted EOS
    model.eval()
    src, src_len, _ = batches[0]
    with torch.no_grad():
        encoder_outputs, hidden = model.encoder(src, src_len)
        mask = model.create_mask(src)
        input = torch.full((src.shape[0],), SOS, dtype=torch.long)
        tokens, attentions = [], []
        for _ in range(6):
            output, hidden, attention = model.decoder(input, hidden, encoder_outputs, mask)
            input = output.argmax(1)
            tokens.append(input)
            attentions.append(attention)
            if (input == EOS).all():
                break
    env.rec("decoded", torch.stack(tokens, dim=1))
    env.rec("attention", torch.stack(attentions, dim=1))


def char_lstm_tbptt(torch, env):
    nn, F = torch.nn, torch.nn.functional
    text = ("the quick brown fox jumps over the lazy dog. "
            "pack my box with five dozen liquor jugs! ") * 2
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    ntokens = len(chars)
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)

    def batchify(data, bsz):
        nbatch = data.size(0) // bsz
        data = data.narrow(0, 0, nbatch * bsz)
        return data.view(bsz, -1).t().contiguous()

    class RNNModel(nn.Module):
        def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.0, tie_weights=True):
            super(RNNModel, self).__init__()
            self.ntoken = ntoken
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            if tie_weights:
                if nhid != ninp:
                    raise ValueError('When using the tied flag, nhid must be equal to emsize')
                self.decoder.weight = self.encoder.weight
            self.init_weights()
            self.nhid, self.nlayers = nhid, nlayers

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output).view(-1, self.ntoken)
            return F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))

    def repackage_hidden(h):
        """Wraps hidden states in new Tensors, to detach them from their history."""
        if isinstance(h, torch.Tensor):
            return h.detach()
        return tuple(repackage_hidden(v) for v in h)

    bptt, batch_size, lr, clip = 7, 4, 2.0, 0.25
    train_data = batchify(data, batch_size)

    def get_batch(source, i):
        seq_len = min(bptt, len(source) - 1 - i)
        return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)

    model = env.init(RNNModel(ntokens, 10, 10, 2))
    env.rec("tied", (model.decoder.weight is model.encoder.weight,
                     len(list(model.parameters())), len(model.state_dict())))
    criterion = nn.NLLLoss()

    def train_step(data, targets, hidden):
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        return loss.item(), hidden

    train_step = env.step(train_step)
    for epoch in range(2):
        model.train()
        hidden = model.init_hidden(batch_size)
        total_loss = 0.
        for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
            data, targets = get_batch(train_data, i)
            hidden = repackage_hidden(hidden)
            loss, hidden = train_step(data, targets, hidden)
            total_loss += loss * len(data)
            env.rec(f"loss {epoch} {batch}", loss)
        env.rec(f"ppl {epoch}", math.exp(total_loss / (train_data.size(0) - 1)))
        lr /= 2
    env.rec("state", model.state_dict())
    env.rec("still tied", bool(torch.equal(model.decoder.weight, model.encoder.weight)))

    # generation: greedy (the same in both libraries) and sampled (each library's stream)
    model.eval()
    with torch.no_grad():
        for greedy in (True, False):
            hidden = model.init_hidden(1)
            input = torch.tensor([[stoi["t"]]], dtype=torch.long)
            out = []
            for _ in range(12):
                output, hidden = model(input, hidden)
                if greedy:
                    idx = output.argmax(dim=1).item()
                else:
                    word_weights = output.squeeze().div(0.8).exp()
                    idx = torch.multinomial(word_weights, 1)[0].item()
                input.fill_(idx)
                out.append(chars[idx])
            env.rec(f"generated greedy={greedy}", "".join(out), cross=greedy)


def transformer_classifier(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    VOCAB, D, NCLS, MAXLEN, PAD = 20, 16, 3, 10, 0

    class TransformerClassifier(nn.Module):
        def __init__(self, nlayers=2, nhead=4):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, D, padding_idx=PAD)
            self.pos_embed = nn.Parameter(torch.zeros(1, MAXLEN, D))
            nn.init.trunc_normal_(self.pos_embed, std=0.02)
            layer = nn.TransformerEncoderLayer(D, nhead, dim_feedforward=32, dropout=0.0,
                                               activation="gelu", batch_first=True,
                                               norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, nlayers, norm=nn.LayerNorm(D),
                                                 enable_nested_tensor=False)
            self.head = nn.Sequential(nn.Dropout(0.0), nn.Linear(D, NCLS))

        def forward(self, tokens):
            padding_mask = tokens == PAD                              # True where padded
            x = self.embed(tokens) * math.sqrt(D) + self.pos_embed[:, :tokens.size(1)]
            x = self.encoder(x, src_key_padding_mask=padding_mask)
            keep = (~padding_mask).unsqueeze(-1).type_as(x)
            pooled = (x * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)
            return self.head(pooled)

    model = env.init(TransformerClassifier())
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or "pos_embed" in name else decay).append(p)
    optimizer = optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": no_decay, "weight_decay": 0.0}], lr=3e-3)
    warmup = 3
    scheduler = optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup))
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    lengths = [8, 5, 3, 8, 6, 2]
    tokens = env.randint(1, VOCAB, (len(lengths), 8))
    for b, n in enumerate(lengths):
        tokens[b, n:] = PAD
    labels = env.randint(0, NCLS, (len(lengths),))

    def train_step(tokens, labels):
        model.train()
        optimizer.zero_grad(set_to_none=True)
        logits = model(tokens)
        loss = criterion(logits, labels)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        return loss.detach(), (logits.argmax(-1) == labels).float().mean()

    train_step = env.step(train_step)
    for i in range(4):
        env.rec(f"step {i}", train_step(tokens, labels))
        scheduler.step()
        env.rec(f"lr {i}", scheduler.get_last_lr())
    # (the key projection's bias has no effect on the attention, its gradient is rounding
    # noise that Adam scales up: compared are the query and value parts)
    state = model.state_dict()
    for k in [k for k in state if k.endswith("in_proj_bias")]:
        state[k] = torch.cat([state[k][:D], state[k][2 * D:]])
    env.rec("state", state)

    model.eval()
    with torch.no_grad():
        env.rec("eval logits", model(tokens))
        # padding positions do not change the prediction: the same sequence, padded more
        short = tokens[2:3, :4]
        env.rec("padding invariance", (model(short), model(tokens[2:3])))


def conv1d_classifier(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class SeparableBlock(nn.Module):
        def __init__(self, cin, cout, dilation):
            super().__init__()
            self.depthwise = nn.Conv1d(cin, cin, kernel_size=3, padding=dilation,
                                       dilation=dilation, groups=cin, bias=False)
            self.pointwise = nn.Conv1d(cin, cout, kernel_size=1)
            self.norm = nn.GroupNorm(num_groups=2, num_channels=cout)
            self.act = nn.SiLU()
            self.skip = nn.Identity() if cin == cout else nn.Conv1d(cin, cout, 1, bias=False)

        def forward(self, x):
            return self.act(self.norm(self.pointwise(self.depthwise(x)))) + self.skip(x)

    class Net(nn.Module):
        def __init__(self, in_ch=2, n_classes=4):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv1d(in_ch, 8, kernel_size=5, stride=2, padding=2,
                                                bias=False),
                                      nn.BatchNorm1d(8), nn.ReLU(), nn.MaxPool1d(2))
            self.blocks = nn.Sequential(SeparableBlock(8, 8, 1), SeparableBlock(8, 12, 2),
                                        nn.Dropout(p=0.0))
            self.max_pool = nn.AdaptiveMaxPool1d(1)
            self.avg_pool = nn.AdaptiveAvgPool1d(1)
            self.fc = nn.Linear(24, n_classes)

        def forward(self, x):
            x = self.blocks(self.stem(x))
            x = torch.cat([self.max_pool(x), self.avg_pool(x)], dim=1).squeeze(-1)
            return self.fc(x)

    model = env.init(Net())
    optimizer = optim.NAdam(model.parameters(), lr=5e-3, weight_decay=1e-4)
    scheduler = optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=2, T_mult=2,
                                                               eta_min=1e-4)
    criterion = nn.CrossEntropyLoss()
    x, y = env.randn(8, 2, 32), env.randint(0, 4, (8,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4)
    iters = len(loader)

    def train_step(xb, yb):
        optimizer.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        optimizer.step()
        return loss

    train_step = env.step(train_step)
    for epoch in range(3):
        model.train()
        for i, (xb, yb) in enumerate(loader):
            env.rec(f"loss {epoch} {i}", train_step(xb, yb))
            scheduler.step(epoch + (i + 1) / iters)
            env.rec(f"lr {epoch} {i}", optimizer.param_groups[0]["lr"])
    env.rec("state", model.state_dict())
    model.eval()
    with torch.no_grad():
        probs = F.softmax(model(x), dim=1)
        env.rec("probs", probs)
        env.rec("top2", probs.topk(2, dim=1).indices)
