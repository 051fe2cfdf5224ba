"""More programs of tests/programs/test_tutorials_s77_b.py (stop 77, file b): d2l.ai's
Bahdanau-attention seq2seq (sequence_mask writing through a boolean index, masked_softmax,
MaskedSoftmaxCELoss, grad_clipping), a siamese network with a contrastive loss, and
micrograd's demo (an MLP with an SVM max-margin loss, L2 regularisation and a decaying lr)."""


def bahdanau_seq2seq(torch, env):
    nn, F = torch.nn, torch.nn.functional
    vocab, embed, hid = 12, 8, 16

    def sequence_mask(X, valid_len, value=0):
        maxlen = X.size(1)
        mask = torch.arange((maxlen), dtype=torch.float32)[None, :] < valid_len[:, None]
        X[~mask] = value
        return X

    def masked_softmax(X, valid_lens):
        if valid_lens is None:
            return nn.functional.softmax(X, dim=-1)
        shape = X.shape
        if valid_lens.dim() == 1:
            valid_lens = torch.repeat_interleave(valid_lens, shape[1])
        else:
            valid_lens = valid_lens.reshape(-1)
        X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
        return nn.functional.softmax(X.reshape(shape), dim=-1)

    class AdditiveAttention(nn.Module):
        def __init__(self, num_hiddens):
            super().__init__()
            self.W_k = nn.LazyLinear(num_hiddens, bias=False)
            self.W_q = nn.LazyLinear(num_hiddens, bias=False)
            self.w_v = nn.LazyLinear(1, bias=False)

        def forward(self, queries, keys, values, valid_lens):
            queries, keys = self.W_q(queries), self.W_k(keys)
            features = queries.unsqueeze(2) + keys.unsqueeze(1)
            features = torch.tanh(features)
            scores = self.w_v(features).squeeze(-1)
            self.attention_weights = masked_softmax(scores, valid_lens)
            return torch.bmm(self.attention_weights, values)

    class Seq2SeqEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab, embed)
            self.rnn = nn.GRU(embed, hid, 2)

        def forward(self, X):
            embs = self.embedding(X.t().type(torch.int64))
            outputs, state = self.rnn(embs)
            return outputs, state

    class Seq2SeqAttentionDecoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = AdditiveAttention(hid)
            self.embedding = nn.Embedding(vocab, embed)
            self.rnn = nn.GRU(embed + hid, hid, 2)
            self.dense = nn.LazyLinear(vocab)

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

        def forward(self, enc_X, dec_X, enc_valid_lens):
            enc_all_outputs = self.encoder(enc_X)
            dec_state = self.decoder.init_state(enc_all_outputs, enc_valid_lens)
            return self.decoder(dec_X, dec_state)[0]

    class MaskedSoftmaxCELoss(nn.CrossEntropyLoss):
        def forward(self, pred, label, valid_len):
            weights = torch.ones_like(label)
            weights = sequence_mask(weights, valid_len)
            self.reduction = 'none'
            unweighted_loss = super(MaskedSoftmaxCELoss, self).forward(
                pred.permute(0, 2, 1), label)
            return (unweighted_loss * weights).mean(dim=1)

    def grad_clipping(net, theta):
        params = [p for p in net.parameters() if p.requires_grad]
        norm = torch.sqrt(sum(torch.sum((p.grad ** 2)) for p in params))
        if norm > theta:
            for param in params:
                param.grad[:] *= theta / norm

    net = EncoderDecoder(Seq2SeqEncoder(), Seq2SeqAttentionDecoder())
    X, Y = env.randint(1, vocab, (4, 5)), env.randint(1, vocab, (4, 5))
    X_valid_len, Y_valid_len = torch.tensor([5, 3, 4, 2]), torch.tensor([5, 4, 2, 3])
    net(X, Y, X_valid_len)
    env.init(net)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.005)
    loss = MaskedSoftmaxCELoss()

    def train_step(X, X_valid_len, Y, Y_valid_len):
        optimizer.zero_grad()
        bos = torch.tensor([0] * Y.shape[0]).reshape(-1, 1)
        dec_input = torch.cat([bos, Y[:, :-1]], 1)
        Y_hat = net(X, dec_input, X_valid_len)
        l = loss(Y_hat, Y, Y_valid_len)
        l.sum().backward()
        grad_clipping(net, 1)
        num_tokens = Y_valid_len.sum()
        optimizer.step()
        return l.sum(), num_tokens

    train_step = env.step(train_step)
    for epoch in range(4):
        l, n = train_step(X, X_valid_len, Y, Y_valid_len)
        env.rec(f"loss {epoch}", (l.item(), n.item()))
    net.eval()
    with torch.no_grad():
        env.rec("attention", net.decoder._attention_weights[-1])
    env.rec("state", dict(net.state_dict()))


def siamese_contrastive(torch, env):
    nn, F = torch.nn, torch.nn.functional

    class SiameseNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.cnn1 = nn.Sequential(
                nn.Conv2d(1, 4, kernel_size=3, stride=1), nn.ReLU(inplace=True),
                nn.MaxPool2d(2, stride=2), nn.Conv2d(4, 8, kernel_size=3, stride=1),
                nn.ReLU(inplace=True))
            self.fc1 = nn.Sequential(nn.Linear(8 * 2 * 2, 32), nn.ReLU(inplace=True),
                                     nn.Linear(32, 8))

        def forward_once(self, x):
            output = self.cnn1(x)
            output = output.view(output.size()[0], -1)
            return self.fc1(output)

        def forward(self, input1, input2):
            return self.forward_once(input1), self.forward_once(input2)

    class ContrastiveLoss(torch.nn.Module):
        def __init__(self, margin=2.0):
            super(ContrastiveLoss, self).__init__()
            self.margin = margin

        def forward(self, output1, output2, label):
            euclidean_distance = F.pairwise_distance(output1, output2, keepdim=True)
            loss_contrastive = torch.mean((1 - label) * torch.pow(euclidean_distance, 2) +
                                          (label) * torch.pow(torch.clamp(
                                              self.margin - euclidean_distance, min=0.0), 2))
            return loss_contrastive

    net = env.init(SiameseNetwork())
    criterion = ContrastiveLoss()
    optimizer = torch.optim.Adam(net.parameters(), lr=0.0005)
    ds = torch.utils.data.TensorDataset(env.randn(16, 1, 10, 10), env.randn(16, 1, 10, 10),
                                        env.randint(0, 2, (16, 1)).float())
    loader = torch.utils.data.DataLoader(ds, batch_size=8)

    def train_step(img0, img1, label):
        optimizer.zero_grad()
        output1, output2 = net(img0, img1)
        loss_contrastive = criterion(output1, output2, label)
        loss_contrastive.backward()
        optimizer.step()
        return loss_contrastive

    train_step = env.step(train_step)
    counter, loss_history = [], []
    for epoch in range(2):
        for i, (img0, img1, label) in enumerate(loader, 0):
            loss_contrastive = train_step(img0, img1, label)
            loss_history.append(loss_contrastive.item())
    env.rec("loss history", loss_history)
    with torch.no_grad():
        out1, out2 = net(ds[0][0].unsqueeze(0), ds[1][1].unsqueeze(0))
        env.rec("dissimilarity", F.pairwise_distance(out1, out2).item())
    env.rec("state", dict(net.state_dict()))


def micrograd_demo(torch, env):
    nn = torch.nn
    X = env.randn(20, 2)
    y = (X[:, 0] * X[:, 1] > 0).float() * 2 - 1

    class MLP(nn.Module):
        def __init__(self, nin, nouts):
            super().__init__()
            sz = [nin] + nouts
            self.layers = nn.ModuleList([nn.Linear(sz[i], sz[i + 1]) for i in range(len(nouts))])

        def forward(self, x):
            for i, layer in enumerate(self.layers):
                x = layer(x)
                if i != len(self.layers) - 1:
                    x = x.relu()
            return x

    model = env.init(MLP(2, [16, 16, 1]))

    def loss(batch_size=None):
        Xb, yb = X, y
        scores = model(Xb).squeeze(1)
        losses = (1 + -yb * scores).relu()
        data_loss = losses.sum() * (1.0 / losses.numel())
        alpha = 1e-4
        reg_loss = alpha * sum((p * p).sum() for p in model.parameters())
        total_loss = data_loss + reg_loss
        accuracy = ((yb > 0) == (scores > 0)).float().mean()
        return total_loss, accuracy

    def step(k):
        total_loss, acc = loss()
        model.zero_grad()
        total_loss.backward()
        learning_rate = 1.0 - 0.9 * k / 100
        for p in model.parameters():
            p.data -= learning_rate * p.grad
        return total_loss, acc

    step = env.step(step)
    for k in range(5):
        total_loss, acc = step(k)
        env.rec(f"step {k}", (total_loss.item(), acc.item() * 100))
    env.rec("state", dict(model.state_dict()))
