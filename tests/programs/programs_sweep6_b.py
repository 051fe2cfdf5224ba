"""Sequence programs as the books and tutorials write them: name classification with nn.RNN
over a PackedSequence (pack_sequence, enforce_sorted=False) from a custom Dataset and
collate_fn; d2l's seq2seq with Bahdanau (additive) attention, masked softmax over valid
lengths, teacher forcing and d2l's masked cross-entropy loss; d2l's RNN from scratch (one-hot
inputs, hand-made parameters, hand-written SGD and gradient clipping, state detached between
minibatches, perplexity); RNNCell / GRUCell / LSTMCell loops with scheduled teacher forcing;
a sentiment classifier (pad_sequence collate, pack_padded_sequence into a 2-layer
bidirectional LSTM, pad_packed_sequence); d2l's attention chapter (Nadaraya-Watson kernel
regression, multi-head attention with transpose_qkv and valid lengths, sinusoidal positional
encoding); a gated convolutional language model (GLU, causal Conv1d, tied embeddings).
Programs `f(torch, env)`, see tutorial_harness.py."""
import math

NAMES = {"English": ["Abbott", "Ada", "Bing", "Dale"], "French": ["Abel", "Bouvier", "Cote"],
         "Italian": ["Abate", "Bianchi", "Conti", "Di"]}
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def names_rnn_packed(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    rnn_utils = nn.utils.rnn
    categories = list(NAMES)

    def line_to_tensor(line):
        idx = torch.tensor([LETTERS.index(c) for c in line.lower()])
        return F.one_hot(idx, len(LETTERS)).float()

    class NamesDataset(torch.utils.data.Dataset):
        def __init__(self):
            self.items = [(n, c) for c in categories for n in NAMES[c]]

        def __len__(self):
            return len(self.items)

        def __getitem__(self, i):
            name, cat = self.items[i]
            return line_to_tensor(name), torch.tensor(categories.index(cat))

    def collate(batch):
        xs, ys = zip(*batch)
        return rnn_utils.pack_sequence(list(xs), enforce_sorted=False), torch.stack(ys)

    class CharRNN(nn.Module):
        def __init__(self, input_size, hidden_size, output_size):
            super().__init__()
            self.rnn = nn.RNN(input_size, hidden_size, num_layers=2, nonlinearity="tanh")
            self.h2o = nn.Linear(hidden_size, output_size)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, packed):
            rnn_out, hidden = self.rnn(packed)
            return self.softmax(self.h2o(hidden[-1]))

    model = env.init(CharRNN(len(LETTERS), 12, len(categories)))
    loader = torch.utils.data.DataLoader(NamesDataset(), batch_size=4, shuffle=False,
                                         collate_fn=collate)
    criterion = nn.NLLLoss()
    optimizer = optim.SGD(model.parameters(), lr=0.1)

    def train_step(packed, labels):
        optimizer.zero_grad()
        out = model(packed)
        loss = criterion(out, labels)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 3)
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for epoch in range(2):
        env.rec(f"epoch {epoch}", [train_step(p, y) for p, y in loader])
    model.eval()
    with torch.no_grad():
        out = model(rnn_utils.pack_sequence([line_to_tensor("Bianca")]))
        topv, topi = out.topk(2, 1, True)
        env.rec("predict", (topv, topi, [categories[i] for i in topi[0].tolist()]))
        packed = collate([NamesDataset()[i] for i in (0, 4, 9)])[0]
        env.rec("packed", (packed.data, packed.batch_sizes, packed.sorted_indices,
                           packed.unsorted_indices))


def sequence_mask(torch, X, valid_len, value=0):
    """d2l's: the entries past each row's valid length set to value."""
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(torch, X, valid_lens):
    """d2l's: softmax over the last axis, masking the entries past the valid lengths."""
    if valid_lens is None:
        return torch.nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = sequence_mask(torch, X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return torch.nn.functional.softmax(X.reshape(shape), dim=-1)


def bahdanau_seq2seq(torch, env):
    nn = torch.nn
    vocab, embed, hidden, layers, bos = 12, 8, 16, 2, 1

    class AdditiveAttention(nn.Module):
        def __init__(self, key_size, query_size, num_hiddens, dropout):
            super().__init__()
            self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
            self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
            self.w_v = nn.Linear(num_hiddens, 1, bias=False)
            self.dropout = nn.Dropout(dropout)

        def forward(self, queries, keys, values, valid_lens):
            queries, keys = self.W_q(queries), self.W_k(keys)
            features = queries.unsqueeze(2) + keys.unsqueeze(1)
            features = torch.tanh(features)
            scores = self.w_v(features).squeeze(-1)
            self.attention_weights = masked_softmax(torch, scores, valid_lens)
            return torch.bmm(self.dropout(self.attention_weights), values)

    class Seq2SeqEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab, embed)
            self.rnn = nn.GRU(embed, hidden, layers, dropout=0.0)

        def forward(self, X):
            X = self.embedding(X).permute(1, 0, 2)
            output, state = self.rnn(X)
            return output, state

    class Seq2SeqAttentionDecoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = AdditiveAttention(hidden, hidden, hidden, 0.0)
            self.embedding = nn.Embedding(vocab, embed)
            self.rnn = nn.GRU(embed + hidden, hidden, layers)
            self.dense = nn.Linear(hidden, vocab)

        def init_state(self, enc_outputs, enc_valid_lens):
            outputs, hidden_state = enc_outputs
            return (outputs.permute(1, 0, 2), hidden_state, enc_valid_lens)

        def forward(self, X, state):
            enc_outputs, hidden_state, enc_valid_lens = state
            X = self.embedding(X).permute(1, 0, 2)
            outputs, self._attention_weights = [], []
            for x in X:
                query = torch.unsqueeze(hidden_state[-1], dim=1)
                context = self.attention(query, enc_outputs, enc_outputs, enc_valid_lens)
                x = torch.cat((context, torch.unsqueeze(x, dim=1)), dim=-1)
                out, hidden_state = self.rnn(x.permute(1, 0, 2), hidden_state)
                outputs.append(out)
                self._attention_weights.append(self.attention.attention_weights)
            outputs = self.dense(torch.cat(outputs, dim=0))
            return outputs.permute(1, 0, 2), [enc_outputs, hidden_state, enc_valid_lens]

    class EncoderDecoder(nn.Module):
        def __init__(self, encoder, decoder):
            super().__init__()
            self.encoder, self.decoder = encoder, decoder

        def forward(self, enc_X, dec_X, enc_valid_len):
            enc_outputs = self.encoder(enc_X)
            dec_state = self.decoder.init_state(enc_outputs, enc_valid_len)
            return self.decoder(dec_X, dec_state)

    class MaskedSoftmaxCELoss(nn.CrossEntropyLoss):
        def forward(self, pred, label, valid_len):
            weights = torch.ones_like(label)
            weights = sequence_mask(torch, weights, valid_len)
            self.reduction = "none"
            unweighted_loss = super(MaskedSoftmaxCELoss, self).forward(pred.permute(0, 2, 1),
                                                                       label)
            weighted_loss = (unweighted_loss * weights).mean(dim=1)
            return weighted_loss

    def grad_clipping(net, theta):
        params = [p for p in net.parameters() if p.requires_grad]
        norm = torch.sqrt(sum(torch.sum((p.grad ** 2)) for p in params))
        if norm > theta:
            for param in params:
                param.grad[:] *= theta / norm

    net = env.init(EncoderDecoder(Seq2SeqEncoder(), Seq2SeqAttentionDecoder()))
    optimizer = torch.optim.Adam(net.parameters(), lr=0.005)
    loss = MaskedSoftmaxCELoss()
    X = env.randint(3, vocab, (4, 5))
    Y = env.randint(3, vocab, (4, 6))
    X_valid_len = torch.tensor([5, 3, 4, 2])
    Y_valid_len = torch.tensor([6, 4, 5, 3])

    def train_batch(X, X_valid_len, Y, Y_valid_len):
        optimizer.zero_grad()
        bos_col = torch.tensor([bos] * Y.shape[0]).reshape(-1, 1)
        dec_input = torch.cat([bos_col, Y[:, :-1]], 1)          # teacher forcing
        Y_hat, _ = net(X, dec_input, X_valid_len)
        l = loss(Y_hat, Y, Y_valid_len)
        l.sum().backward()
        grad_clipping(net, 1)
        num_tokens = Y_valid_len.sum()
        optimizer.step()
        return l.sum().item(), num_tokens.item()

    train_batch = env.step(train_batch)
    for epoch in range(3):
        env.rec(f"epoch {epoch}", train_batch(X, X_valid_len, Y, Y_valid_len))

    net.eval()
    enc_X = X[1:2]
    enc_outputs = net.encoder(enc_X)
    dec_state = net.decoder.init_state(enc_outputs, X_valid_len[1:2])
    dec_X = torch.unsqueeze(torch.tensor([bos], dtype=torch.long), dim=0)
    output_seq, attention_weight_seq = [], []
    for _ in range(5):
        Y_hat, dec_state = net.decoder(dec_X, dec_state)
        dec_X = Y_hat.argmax(dim=2)
        pred = dec_X.squeeze(dim=0).type(torch.int32).item()
        attention_weight_seq.append(net.decoder._attention_weights[0])
        output_seq.append(pred)
    env.rec("greedy", (output_seq, torch.cat(attention_weight_seq, 0)))


def rnn_scratch(torch, env):
    F = torch.nn.functional
    vocab_size, num_hiddens, batch_size, num_steps, lr = 10, 16, 3, 5, 1.0
    corpus = [int(v) for v in env.np.integers(0, vocab_size, 80)]

    def get_params():
        def normal(shape):
            return env.randn(*shape) * 0.01

        W_xh = normal((vocab_size, num_hiddens))
        W_hh = normal((num_hiddens, num_hiddens))
        b_h = torch.zeros(num_hiddens)
        W_hq = normal((num_hiddens, vocab_size))
        b_q = torch.zeros(vocab_size)
        params = [W_xh, W_hh, b_h, W_hq, b_q]
        for param in params:
            param.requires_grad_(True)
        return params

    def init_rnn_state(batch_size, num_hiddens):
        return (torch.zeros((batch_size, num_hiddens)),)

    def rnn(inputs, state, params):
        W_xh, W_hh, b_h, W_hq, b_q = params
        H, = state
        outputs = []
        for X in inputs:
            H = torch.tanh(torch.mm(X, W_xh) + torch.mm(H, W_hh) + b_h)
            Y = torch.mm(H, W_hq) + b_q
            outputs.append(Y)
        return torch.cat(outputs, dim=0), (H,)

    class RNNModelScratch:
        def __init__(self):
            self.params = get_params()

        def __call__(self, X, state):
            X = F.one_hot(X.T, vocab_size).type(torch.float32)
            return rnn(X, state, self.params)

        def begin_state(self, batch_size):
            return init_rnn_state(batch_size, num_hiddens)

    def grad_clipping(params, theta):
        norm = torch.sqrt(sum(torch.sum((p.grad ** 2)) for p in params))
        if norm > theta:
            for param in params:
                param.grad[:] *= theta / norm

    def sgd(params, lr, batch_size):
        with torch.no_grad():
            for param in params:
                param -= lr * param.grad / batch_size
                param.grad.zero_()

    net = RNNModelScratch()
    loss = torch.nn.CrossEntropyLoss()

    def train_batch(X, Y, state):
        for s in state:
            s.detach_()
        y = Y.T.reshape(-1)
        y_hat, state = net(X, state)
        l = loss(y_hat, y.long()).mean()
        l.backward()
        grad_clipping(net.params, 1)
        sgd(net.params, lr, batch_size=1)
        return l.item() * y.numel(), y.numel(), state

    train_batch = env.step(train_batch)
    # sequential partitioning (d2l's seq_data_iter_sequential)
    num_tokens = ((len(corpus) - 1) // batch_size) * batch_size
    Xs = torch.tensor(corpus[0: num_tokens]).reshape(batch_size, -1)
    Ys = torch.tensor(corpus[1: 1 + num_tokens]).reshape(batch_size, -1)
    for epoch in range(2):
        state = net.begin_state(batch_size)
        total, count = 0.0, 0
        for i in range(0, Xs.shape[1] // num_steps * num_steps, num_steps):
            l, n, state = train_batch(Xs[:, i: i + num_steps], Ys[:, i: i + num_steps], state)
            total, count = total + l, count + n
        env.rec(f"perplexity {epoch}", math.exp(total / count))

    def predict(prefix, num_preds):
        state = net.begin_state(batch_size=1)
        outputs = [prefix[0]]
        get_input = lambda: torch.tensor([outputs[-1]]).reshape((1, 1))
        for y in prefix[1:]:
            _, state = net(get_input(), state)
            outputs.append(y)
        for _ in range(num_preds):
            y, state = net(get_input(), state)
            outputs.append(int(y.argmax(dim=1).reshape(1)))
        return outputs

    env.rec("predict", predict([1, 2, 3], 6))
    env.rec("params", net.params)


def cells_teacher_forcing(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc1 = nn.RNNCell(2, 10, nonlinearity="relu")
            self.enc2 = nn.GRUCell(10, 10)
            self.dec = nn.LSTMCell(1, 10)
            self.out = nn.Linear(10, 1)

        def forward(self, src, trg, teacher):
            h1 = torch.zeros(src.size(1), 10)
            h2 = torch.zeros(src.size(1), 10)
            for t in range(src.size(0)):
                h1 = self.enc1(src[t], h1)
                h2 = self.enc2(h1, h2)
            h, c = h2, torch.zeros_like(h2)
            inp = torch.zeros(src.size(1), 1)
            outs = []
            for t in range(trg.size(0)):
                h, c = self.dec(inp, (h, c))
                pred = self.out(h)
                outs.append(pred)
                inp = trg[t] if teacher[t] else pred.detach()
            return torch.stack(outs)

    model = env.init(Seq2Seq())
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    src = env.randn(6, 5, 2)
    trg = torch.cumsum(src[:4, :, :1], 0)

    def step(src, trg, teacher):
        optimizer.zero_grad()
        out = model(src, trg, teacher)
        loss = F.mse_loss(out, trg)
        loss.backward()
        optimizer.step()
        return loss.item()

    step = env.step(step)
    for epoch in range(4):
        ratio = 1.0 - epoch * 0.3
        teacher = [bool(env.np.random() < ratio) for _ in range(trg.size(0))]
        env.rec(f"epoch {epoch}", (teacher, step(src, trg, teacher)))
    with torch.no_grad():
        env.rec("free running", model(src, trg, [False] * 4))
    env.rec("cells", (model.enc1(src[0]), model.enc2(src[0, :, :1].expand(5, 10)),
                      model.dec(trg[0])[1]))


def sentiment_bilstm(torch, env):
    nn, optim = torch.nn, torch.optim
    rnn_utils = nn.utils.rnn
    PAD, vocab = 0, 20

    class ReviewDataset(torch.utils.data.Dataset):
        def __init__(self, n):
            self.texts = [[int(v) for v in env.np.integers(1, vocab, env.choice(6) + 2)]
                          for _ in range(n)]
            self.labels = [float(sum(t) % 2) for t in self.texts]

        def __len__(self):
            return len(self.texts)

        def __getitem__(self, idx):
            return torch.tensor(self.texts[idx], dtype=torch.long), self.labels[idx]

    def collate_batch(batch):
        texts, labels = zip(*batch)
        lengths = torch.tensor([len(t) for t in texts])
        padded = rnn_utils.pad_sequence(texts, batch_first=True, padding_value=PAD)
        return padded, lengths, torch.tensor(labels)

    class BiLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab, 8, padding_idx=PAD)
            self.lstm = nn.LSTM(8, 12, num_layers=2, bidirectional=True, batch_first=True)
            self.fc = nn.Linear(24, 1)

        def forward(self, text, lengths):
            embedded = self.embedding(text)
            packed = rnn_utils.pack_padded_sequence(embedded, lengths, batch_first=True,
                                                    enforce_sorted=False)
            packed_out, (hidden, cell) = self.lstm(packed)
            out, out_lengths = rnn_utils.pad_packed_sequence(packed_out, batch_first=True)
            hidden = torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1)
            return self.fc(hidden).squeeze(1), out, out_lengths

    model = env.init(BiLSTM())
    loader = torch.utils.data.DataLoader(ReviewDataset(10), batch_size=4, shuffle=False,
                                         collate_fn=collate_batch)
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    criterion = nn.BCEWithLogitsLoss()

    def binary_accuracy(preds, y):
        rounded = torch.round(torch.sigmoid(preds))
        return (rounded == y).float().sum() / len(y)

    def train_step(text, lengths, labels):
        optimizer.zero_grad()
        predictions, _, _ = model(text, lengths)
        loss = criterion(predictions, labels)
        acc = binary_accuracy(predictions, labels)
        loss.backward()
        optimizer.step()
        return loss.item(), acc.item()

    train_step = env.step(train_step)
    for epoch in range(2):
        env.rec(f"epoch {epoch}", [train_step(*b) for b in loader])
    text, lengths, _ = next(iter(loader))
    with torch.no_grad():
        env.rec("outputs", model(text, lengths))
    env.rec("embedding pad row", model.embedding.weight[PAD])


def d2l_attention(torch, env):
    nn, F = torch.nn, torch.nn.functional

    # Nadaraya-Watson kernel regression with a learnable bandwidth
    class NWKernelRegression(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones((1,)) * 0.8)

        def forward(self, queries, keys, values):
            queries = queries.repeat_interleave(keys.shape[1]).reshape((-1, keys.shape[1]))
            self.attention_weights = F.softmax(-((queries - keys) * self.w) ** 2 / 2, dim=1)
            return torch.bmm(self.attention_weights.unsqueeze(1),
                             values.unsqueeze(-1)).reshape(-1)

    n_train = 12
    x_train = torch.sort(env.rand(n_train) * 5)[0]
    y_train = 2 * torch.sin(x_train) + x_train ** 0.8
    X_tile = x_train.repeat((n_train, 1))
    Y_tile = y_train.repeat((n_train, 1))
    keys = X_tile[(1 - torch.eye(n_train)).type(torch.bool)].reshape((n_train, -1))
    values = Y_tile[(1 - torch.eye(n_train)).type(torch.bool)].reshape((n_train, -1))
    net = NWKernelRegression()
    loss = nn.MSELoss(reduction="none")
    trainer = torch.optim.SGD(net.parameters(), lr=0.5)

    def nw_step(x_train, keys, values, y_train):
        trainer.zero_grad()
        l = loss(net(x_train, keys, values), y_train)
        l.sum().backward()
        trainer.step()
        return float(l.sum())

    nw_step = env.step(nw_step)
    env.rec("nw", [nw_step(x_train, keys, values, y_train) for _ in range(4)])
    env.rec("nw w", net.w)

    class DotProductAttention(nn.Module):
        def __init__(self, dropout):
            super().__init__()
            self.dropout = nn.Dropout(dropout)

        def forward(self, queries, keys, values, valid_lens=None):
            d = queries.shape[-1]
            scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
            self.attention_weights = masked_softmax(torch, scores, valid_lens)
            return torch.bmm(self.dropout(self.attention_weights), values)

    def transpose_qkv(X, num_heads):
        X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
        X = X.permute(0, 2, 1, 3)
        return X.reshape(-1, X.shape[2], X.shape[3])

    def transpose_output(X, num_heads):
        X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
        X = X.permute(0, 2, 1, 3)
        return X.reshape(X.shape[0], X.shape[1], -1)

    class MultiHeadAttention(nn.Module):
        def __init__(self, num_hiddens, num_heads, dropout, bias=False):
            super().__init__()
            self.num_heads = num_heads
            self.attention = DotProductAttention(dropout)
            self.W_q = nn.LazyLinear(num_hiddens, bias=bias)
            self.W_k = nn.LazyLinear(num_hiddens, bias=bias)
            self.W_v = nn.LazyLinear(num_hiddens, bias=bias)
            self.W_o = nn.LazyLinear(num_hiddens, bias=bias)

        def forward(self, queries, keys, values, valid_lens):
            queries = transpose_qkv(self.W_q(queries), self.num_heads)
            keys = transpose_qkv(self.W_k(keys), self.num_heads)
            values = transpose_qkv(self.W_v(values), self.num_heads)
            if valid_lens is not None:
                valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)
            output = self.attention(queries, keys, values, valid_lens)
            return self.W_o(transpose_output(output, self.num_heads))

    class PositionalEncoding(nn.Module):
        def __init__(self, num_hiddens, dropout, max_len=100):
            super().__init__()
            self.dropout = nn.Dropout(dropout)
            self.P = torch.zeros((1, max_len, num_hiddens))
            X = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(
                10000, torch.arange(0, num_hiddens, 2, dtype=torch.float32) / num_hiddens)
            self.P[:, :, 0::2] = torch.sin(X)
            self.P[:, :, 1::2] = torch.cos(X)

        def forward(self, X):
            X = X + self.P[:, :X.shape[1], :].to(X.device)
            return self.dropout(X)

    attention = MultiHeadAttention(16, 4, 0.0)
    pos = PositionalEncoding(16, 0.0)
    X = pos(env.randn(2, 5, 16))
    Y = env.randn(2, 7, 10)
    valid_lens = torch.tensor([3, 6])
    attention(X, Y, Y, valid_lens)                  # (materialises the lazy layers)
    env.init(attention)
    head = nn.Linear(16, 3)
    env.init(head)
    optimizer = torch.optim.Adam(list(attention.parameters()) + list(head.parameters()),
                                 lr=1e-2)
    target = env.randint(0, 3, (2, 5))

    def mha_step(X, Y, valid_lens, target):
        optimizer.zero_grad()
        out = head(attention(X, Y, Y, valid_lens))
        l = F.cross_entropy(out.reshape(-1, 3), target.reshape(-1))
        l.backward()
        optimizer.step()
        return l.item()

    mha_step = env.step(mha_step)
    env.rec("mha", [mha_step(X, Y, valid_lens, target) for _ in range(3)])
    env.rec("weights", attention.attention.attention_weights)
    env.rec("2d valid lens", masked_softmax(torch, env.rand(2, 2, 4),
                                            torch.tensor([[1, 3], [2, 4]])))
    env.rec("P", pos.P[0, :4])


def gated_conv_lm(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    vocab, dim, k = 16, 12, 3

    class GatedConvLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.convs = nn.ModuleList([nn.Conv1d(dim, 2 * dim, k) for _ in range(2)])
            self.norm = nn.LayerNorm(dim)
            self.out = nn.Linear(dim, vocab)
            self.out.weight = self.emb.weight                   # weight tying

        def forward(self, tokens):
            h = self.emb(tokens).transpose(1, 2)                # (B, C, T)
            for conv in self.convs:
                residual = h
                h = F.pad(h, (k - 1, 0))                        # causal: pad the past only
                h = F.glu(conv(h), dim=1) + residual
            return self.out(self.norm(h.transpose(1, 2)))

    model = env.init(GatedConvLM())
    env.rec("tied", (model.out.weight is model.emb.weight,
                     len(list(model.parameters())), sorted(model.state_dict())))
    optimizer = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    data = env.randint(0, vocab, (4, 9))

    def step(data):
        optimizer.zero_grad()
        logits = model(data[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), data[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        return loss.item()

    step = env.step(step)
    losses = [step(data) for _ in range(4)]
    env.rec("ppl", [math.exp(l) for l in losses])
    env.rec("emb", model.emb.weight)
    # causality: changing a later token leaves earlier logits alone
    with torch.no_grad():
        a = model(data[:1])
        b = data[:1].clone()
        b[0, 6] = (b[0, 6] + 1) % vocab
        b = model(b)
    env.rec("causal", ((a[0, :6] - b[0, :6]).abs().max().item() == 0.0,
                       (a[0, 6:] - b[0, 6:]).abs().max().item() > 0))
    env.rec("glu module", nn.GLU(dim=-1)(data[:2, :8].float()))
