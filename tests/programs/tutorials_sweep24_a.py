"""Sweep 24 (H2, A): Dive into Deep Learning's NLP application chapters at toy sizes, nearly
verbatim (BERT's are in tutorials_sweep24_a2.py): natural language inference with
decomposable attention (Attend / Compare / Aggregate over two sentences, bmm of softmaxed
alignments, sums over tokens) and sentiment analysis with a bidirectional LSTM
(pretrained embeddings copied in and frozen, xavier_uniform_ over the LSTM's
_flat_weights_names, the first and last time steps concatenated). Synthetic data. Programs
`f(torch, env)`, see tutorial_harness.py."""


def _mlp(torch, num_inputs, num_hiddens, flatten):
    nn = torch.nn
    net = []
    net.append(nn.Dropout(0.2))
    net.append(nn.Linear(num_inputs, num_hiddens))
    net.append(nn.ReLU())
    if flatten:
        net.append(nn.Flatten(start_dim=1))
    net.append(nn.Dropout(0.2))
    net.append(nn.Linear(num_hiddens, num_hiddens))
    net.append(nn.ReLU())
    if flatten:
        net.append(nn.Flatten(start_dim=1))
    return nn.Sequential(*net)


def decomposable_attention(torch, env):
    """d2l 16.5: DecomposableAttention on (premises, hypotheses) -> 3 classes; Adam, the
    loss summed over the batch with reduction='none'; dropout active (llgrad draws torch's
    masks for a seed, so those steps are compared with torch too), predict_snli under
    eval(), then a fresh model trained with dropout's p set to 0."""
    nn, F = torch.nn, torch.nn.functional

    class Attend(nn.Module):
        def __init__(self, num_inputs, num_hiddens, **kwargs):
            super(Attend, self).__init__(**kwargs)
            self.f = _mlp(torch, num_inputs, num_hiddens, flatten=False)

        def forward(self, A, B):
            f_A = self.f(A)
            f_B = self.f(B)
            e = torch.bmm(f_A, f_B.permute(0, 2, 1))
            beta = torch.bmm(F.softmax(e, dim=-1), B)
            alpha = torch.bmm(F.softmax(e.permute(0, 2, 1), dim=-1), A)
            return beta, alpha

    class Compare(nn.Module):
        def __init__(self, num_inputs, num_hiddens, **kwargs):
            super(Compare, self).__init__(**kwargs)
            self.g = _mlp(torch, num_inputs, num_hiddens, flatten=False)

        def forward(self, A, B, beta, alpha):
            V_A = self.g(torch.cat([A, beta], dim=2))
            V_B = self.g(torch.cat([B, alpha], dim=2))
            return V_A, V_B

    class Aggregate(nn.Module):
        def __init__(self, num_inputs, num_hiddens, num_outputs, **kwargs):
            super(Aggregate, self).__init__(**kwargs)
            self.h = _mlp(torch, num_inputs, num_hiddens, flatten=True)
            self.linear = nn.Linear(num_hiddens, num_outputs)

        def forward(self, V_A, V_B):
            V_A = V_A.sum(dim=1)
            V_B = V_B.sum(dim=1)
            Y_hat = self.linear(self.h(torch.cat([V_A, V_B], dim=1)))
            return Y_hat

    class DecomposableAttention(nn.Module):
        def __init__(self, vocab, embed_size, num_hiddens, num_inputs_attend=10,
                     num_inputs_compare=20, num_inputs_agg=40, **kwargs):
            super(DecomposableAttention, self).__init__(**kwargs)
            self.embedding = nn.Embedding(len(vocab), embed_size)
            self.attend = Attend(num_inputs_attend, num_hiddens)
            self.compare = Compare(num_inputs_compare, num_hiddens)
            self.aggregate = Aggregate(num_inputs_agg, num_hiddens, num_outputs=3)

        def forward(self, X):
            premises, hypotheses = X
            A = self.embedding(premises)
            B = self.embedding(hypotheses)
            beta, alpha = self.attend(A, B)
            V_A, V_B = self.compare(A, B, beta, alpha)
            Y_hat = self.aggregate(V_A, V_B)
            return Y_hat

    torch.manual_seed(0)
    vocab = list(range(30))
    embed_size, num_hiddens = 10, 20
    net = DecomposableAttention(vocab, embed_size, num_hiddens)
    glove_embedding = env.randn(len(vocab), embed_size)       # "pretrained" vectors
    net.embedding.weight.data.copy_(glove_embedding)
    lr = 0.001
    trainer = torch.optim.Adam(net.parameters(), lr=lr)
    loss = nn.CrossEntropyLoss(reduction="none")
    env.rec("init", dict(net.state_dict()))

    def train_batch(net, X, y, loss, trainer):
        net.train()
        trainer.zero_grad()
        pred = net(X)
        l = loss(pred, y)
        l.sum().backward()
        trainer.step()
        train_loss_sum = l.sum()
        train_acc_sum = (pred.argmax(dim=1) == y).sum()
        return train_loss_sum, train_acc_sum

    step = env.step(train_batch)
    premises = env.randint(0, 30, (6, 7))
    hypotheses = env.randint(0, 30, (6, 7))
    labels = env.randint(0, 3, (6,))
    for i in range(4):
        l, acc = step(net, [premises, hypotheses], labels, loss, trainer)
        env.rec(f"loss {i}", l)
        env.rec(f"acc {i}", acc)
    env.rec("params", dict(net.state_dict()))

    def predict_snli(net, premise, hypothesis):
        net.eval()
        premise = premise.reshape((1, -1))
        hypothesis = hypothesis.reshape((1, -1))
        label = torch.argmax(net([premise, hypothesis]), dim=1)
        return 'entailment' if label == 0 else 'contradiction' if label == 1 else 'neutral'

    env.rec("predict", predict_snli(net, premises[0], hypotheses[0]))
    net.load_state_dict(env.init(DecomposableAttention(vocab, embed_size, num_hiddens))
                        .state_dict())
    for m in net.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    trainer = torch.optim.Adam(net.parameters(), lr=lr)
    for i in range(3):
        l, acc = step(net, [premises, hypotheses], labels, loss, trainer)
        env.rec(f"no-dropout loss {i}", l)
        env.rec(f"no-dropout acc {i}", acc)
    env.rec("no-dropout params", dict(net.state_dict()))


def birnn_sentiment(torch, env):
    """d2l 16.2: BiRNN over pretrained (copied, frozen) embeddings, net.apply(init_weights)
    with xavier_uniform_ on the LSTM's flat weights, the outputs of the first and last steps
    concatenated; d2l's train_batch (reduction='none', l.sum().backward()), then
    predict_sentiment."""
    nn = torch.nn

    class BiRNN(nn.Module):
        def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, **kwargs):
            super(BiRNN, self).__init__(**kwargs)
            self.embedding = nn.Embedding(vocab_size, embed_size)
            self.encoder = nn.LSTM(embed_size, num_hiddens, num_layers=num_layers,
                                   bidirectional=True)
            self.decoder = nn.Linear(4 * num_hiddens, 2)

        def forward(self, inputs):
            embeddings = self.embedding(inputs.T)
            self.encoder.flatten_parameters()
            outputs, _ = self.encoder(embeddings)
            encoding = torch.cat((outputs[0], outputs[-1]), dim=1)
            outs = self.decoder(encoding)
            return outs

    torch.manual_seed(0)
    vocab_size, embed_size, num_hiddens, num_layers = 20, 8, 10, 2
    net = BiRNN(vocab_size, embed_size, num_hiddens, num_layers)

    def init_weights(module):
        if type(module) == nn.Linear:
            nn.init.xavier_uniform_(module.weight)
        if type(module) == nn.LSTM:
            for param in module._flat_weights_names:
                if "weight" in param:
                    nn.init.xavier_uniform_(module._parameters[param])

    net.apply(init_weights)
    env.rec("init", dict(net.state_dict()))
    embeds = env.randn(vocab_size, embed_size)
    net.embedding.weight.data.copy_(embeds)
    net.embedding.weight.requires_grad = False
    lr = 0.01
    trainer = torch.optim.Adam(net.parameters(), lr=lr)
    loss = nn.CrossEntropyLoss(reduction="none")

    def train_batch(net, X, y, loss, trainer):
        net.train()
        trainer.zero_grad()
        pred = net(X)
        l = loss(pred, y)
        l.sum().backward()
        trainer.step()
        train_loss_sum = l.sum()
        train_acc_sum = (pred.argmax(dim=1) == y).sum()
        return train_loss_sum, train_acc_sum

    step = env.step(train_batch)
    X = env.randint(1, vocab_size, (5, 9))
    y = env.randint(0, 2, (5,))
    for epoch in range(4):
        env.rec(f"epoch {epoch}", step(net, X, y, loss, trainer))
    env.rec("params", dict(net.state_dict()))
    env.rec("embedding frozen", net.embedding.weight.grad is None)

    def predict_sentiment(net, sequence):
        sequence = torch.tensor(sequence)
        label = torch.argmax(net(sequence.reshape(1, -1)), dim=1)
        return 'positive' if label == 1 else 'negative'

    env.rec("predict", [predict_sentiment(net, [3, 4, 5, 6]),
                        predict_sentiment(net, [7, 1, 2])])
