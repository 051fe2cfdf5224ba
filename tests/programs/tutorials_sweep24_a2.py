"""Sweep 24 (H2, A2): Dive into Deep Learning's BERT chapters at toy size, nearly verbatim:
pretraining with masked language modelling and next-sentence prediction (d2l's encoder
blocks with valid lengths, segment embeddings, a learned positional parameter, MaskLM's
gather of the masked positions by repeat_interleave, the weighted MLM loss), the
get_bert_encoding of a sentence pair, then BERTClassifier fine-tuned for natural language
inference sharing the pretrained encoder. Synthetic data. Programs `f(torch, env)`, see
tutorial_harness.py."""
import math

from programs_sweep6_b import masked_softmax

def bert_pretraining(torch, env):
    """d2l 15.8-15.10: BERTModel (d2l's EncoderBlock with DotProductAttention over valid
    lengths), MaskLM, NextSentencePred; _get_batch_loss_bert with the masked positions'
    weights; Adam; then get_bert_encoding of a sentence pair. Dropout 0 so every number
    is compared with torch."""
    nn = torch.nn

    class DotProductAttention(nn.Module):
        def __init__(self, dropout):
            super().__init__()
            self.dropout = nn.Dropout(dropout)

        def forward(self, queries, keys, values, valid_lens=None):
            d = queries.shape[-1]
            scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
            self.attention_weights = masked_softmax(torch, scores, valid_lens)
            return torch.bmm(self.dropout(self.attention_weights), values)

    class MultiHeadAttention(nn.Module):
        def __init__(self, num_hiddens, num_heads, dropout, bias=False, **kwargs):
            super().__init__()
            self.num_heads = num_heads
            self.attention = DotProductAttention(dropout)
            self.W_q = nn.LazyLinear(num_hiddens, bias=bias)
            self.W_k = nn.LazyLinear(num_hiddens, bias=bias)
            self.W_v = nn.LazyLinear(num_hiddens, bias=bias)
            self.W_o = nn.LazyLinear(num_hiddens, bias=bias)

        def forward(self, queries, keys, values, valid_lens):
            queries = self.transpose_qkv(self.W_q(queries))
            keys = self.transpose_qkv(self.W_k(keys))
            values = self.transpose_qkv(self.W_v(values))
            if valid_lens is not None:
                valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)
            output = self.attention(queries, keys, values, valid_lens)
            output_concat = self.transpose_output(output)
            return self.W_o(output_concat)

        def transpose_qkv(self, X):
            X = X.reshape(X.shape[0], X.shape[1], self.num_heads, -1)
            X = X.permute(0, 2, 1, 3)
            return X.reshape(-1, X.shape[2], X.shape[3])

        def transpose_output(self, X):
            X = X.reshape(-1, self.num_heads, X.shape[1], X.shape[2])
            X = X.permute(0, 2, 1, 3)
            return X.reshape(X.shape[0], X.shape[1], -1)

    class PositionWiseFFN(nn.Module):
        def __init__(self, ffn_num_hiddens, ffn_num_outputs):
            super().__init__()
            self.dense1 = nn.LazyLinear(ffn_num_hiddens)
            self.relu = nn.ReLU()
            self.dense2 = nn.LazyLinear(ffn_num_outputs)

        def forward(self, X):
            return self.dense2(self.relu(self.dense1(X)))

    class AddNorm(nn.Module):
        def __init__(self, norm_shape, dropout):
            super().__init__()
            self.dropout = nn.Dropout(dropout)
            self.ln = nn.LayerNorm(norm_shape)

        def forward(self, X, Y):
            return self.ln(self.dropout(Y) + X)

    class TransformerEncoderBlock(nn.Module):
        def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, use_bias=False):
            super().__init__()
            self.attention = MultiHeadAttention(num_hiddens, num_heads, dropout, use_bias)
            self.addnorm1 = AddNorm(num_hiddens, dropout)
            self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens)
            self.addnorm2 = AddNorm(num_hiddens, dropout)

        def forward(self, X, valid_lens):
            Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))
            return self.addnorm2(Y, self.ffn(Y))

    class BERTEncoder(nn.Module):
        def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks,
                     dropout, max_len=1000, **kwargs):
            super(BERTEncoder, self).__init__(**kwargs)
            self.token_embedding = nn.Embedding(vocab_size, num_hiddens)
            self.segment_embedding = nn.Embedding(2, num_hiddens)
            self.blks = nn.Sequential()
            for i in range(num_blks):
                self.blks.add_module(f"{i}", TransformerEncoderBlock(
                    num_hiddens, ffn_num_hiddens, num_heads, dropout, True))
            self.pos_embedding = nn.Parameter(torch.randn(1, max_len, num_hiddens))

        def forward(self, tokens, segments, valid_lens):
            X = self.token_embedding(tokens) + self.segment_embedding(segments)
            X = X + self.pos_embedding[:, :X.shape[1], :]
            for blk in self.blks:
                X = blk(X, valid_lens)
            return X

    class MaskLM(nn.Module):
        def __init__(self, vocab_size, num_hiddens, **kwargs):
            super(MaskLM, self).__init__(**kwargs)
            self.mlp = nn.Sequential(nn.LazyLinear(num_hiddens), nn.ReLU(),
                                     nn.LayerNorm(num_hiddens), nn.LazyLinear(vocab_size))

        def forward(self, X, pred_positions):
            num_pred_positions = pred_positions.shape[1]
            pred_positions = pred_positions.reshape(-1)
            batch_size = X.shape[0]
            batch_idx = torch.arange(0, batch_size)
            batch_idx = torch.repeat_interleave(batch_idx, num_pred_positions)
            masked_X = X[batch_idx, pred_positions]
            masked_X = masked_X.reshape((batch_size, num_pred_positions, -1))
            mlm_Y_hat = self.mlp(masked_X)
            return mlm_Y_hat

    class NextSentencePred(nn.Module):
        def __init__(self, **kwargs):
            super(NextSentencePred, self).__init__(**kwargs)
            self.output = nn.LazyLinear(2)

        def forward(self, X):
            return self.output(X)

    class BERTModel(nn.Module):
        def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks,
                     dropout, max_len=1000):
            super(BERTModel, self).__init__()
            self.encoder = BERTEncoder(vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                                       num_blks, dropout, max_len=max_len)
            self.hidden = nn.Sequential(nn.LazyLinear(num_hiddens), nn.Tanh())
            self.mlm = MaskLM(vocab_size, num_hiddens)
            self.nsp = NextSentencePred()

        def forward(self, tokens, segments, valid_lens=None, pred_positions=None):
            encoded_X = self.encoder(tokens, segments, valid_lens)
            if pred_positions is not None:
                mlm_Y_hat = self.mlm(encoded_X, pred_positions)
            else:
                mlm_Y_hat = None
            nsp_Y_hat = self.nsp(self.hidden(encoded_X[:, 0, :]))
            return encoded_X, mlm_Y_hat, nsp_Y_hat

    torch.manual_seed(0)
    vocab_size, max_len, batch = 25, 12, 4
    net = BERTModel(vocab_size, num_hiddens=16, ffn_num_hiddens=32, num_heads=2, num_blks=2,
                    dropout=0.0, max_len=max_len)
    loss = nn.CrossEntropyLoss()
    tokens_X = env.randint(5, vocab_size, (batch, max_len))
    segments_X = torch.cat([torch.zeros(batch, 6, dtype=torch.long),
                            torch.ones(batch, 6, dtype=torch.long)], 1)
    valid_lens_x = torch.tensor([12, 10, 9, 12], dtype=torch.float32)
    pred_positions_X = env.randint(1, 9, (batch, 3))
    mlm_weights_X = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 0.0],
                                  [1.0, 1.0, 1.0]])
    mlm_Y = env.randint(5, vocab_size, (batch, 3))
    nsp_y = torch.tensor([0, 1, 1, 0])
    net(tokens_X, segments_X, None, pred_positions_X)   # the lazy layers take their shapes
    env.init(net)
    trainer = torch.optim.Adam(net.parameters(), lr=0.01)

    def _get_batch_loss_bert(net, loss, vocab_size, tokens_X, segments_X, valid_lens_x,
                             pred_positions_X, mlm_weights_X, mlm_Y, nsp_y):
        _, mlm_Y_hat, nsp_Y_hat = net(tokens_X, segments_X, valid_lens_x.reshape(-1),
                                      pred_positions_X)
        mlm_l = loss(mlm_Y_hat.reshape(-1, vocab_size), mlm_Y.reshape(-1)) * \
            mlm_weights_X.reshape(-1, 1)
        mlm_l = mlm_l.sum() / (mlm_weights_X.sum() + 1e-8)
        nsp_l = loss(nsp_Y_hat, nsp_y)
        l = mlm_l + nsp_l
        return mlm_l, nsp_l, l

    def train_step(*batch):
        trainer.zero_grad()
        mlm_l, nsp_l, l = _get_batch_loss_bert(net, loss, vocab_size, *batch)
        l.backward()
        trainer.step()
        return mlm_l, nsp_l

    train_step = env.step(train_step)
    for step in range(4):
        mlm_l, nsp_l = train_step(tokens_X, segments_X, valid_lens_x, pred_positions_X,
                                  mlm_weights_X, mlm_Y, nsp_y)
        env.rec(f"step {step}", (mlm_l, nsp_l))
        if step == 0:
            env.rec("grads", {n: p.grad for n, p in net.named_parameters()
                              if "W_k.bias" not in n})
    # (the key projections' biases have a zero gradient, softmax ignoring a shift per
    # query; Adam turns its rounding noise into steps of lr, different in each library)
    env.rec("params", {k: v for k, v in net.state_dict().items() if "W_k.bias" not in k})

    def get_bert_encoding(net, tokens_a, tokens_b=None):
        tokens = [1] + tokens_a + [2] + tokens_b + [2]
        segments = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
        token_ids = torch.tensor(tokens).unsqueeze(0)
        segments = torch.tensor(segments).unsqueeze(0)
        valid_len = torch.tensor(len(tokens)).unsqueeze(0)
        encoded_X, _, _ = net(token_ids, segments, valid_len)
        return encoded_X

    encoded = get_bert_encoding(net, [5, 6, 7], [8, 9])
    env.rec("encoding", (encoded.shape[1], encoded[:, 0, :3], encoded[:, 2, :3]))

    # d2l 16.7: fine-tuning for natural language inference; the classifier shares the
    # pretrained encoder and hidden layer (one more pretraining step after it sees them)
    class BERTClassifier(nn.Module):
        def __init__(self, bert):
            super(BERTClassifier, self).__init__()
            self.encoder = bert.encoder
            self.hidden = bert.hidden
            self.output = nn.LazyLinear(3)

        def forward(self, inputs):
            tokens_X, segments_X, valid_lens_x = inputs
            encoded_X = self.encoder(tokens_X, segments_X, valid_lens_x)
            return self.output(self.hidden(encoded_X[:, 0, :]))

    clf = BERTClassifier(net)
    labels = env.randint(0, 3, (batch,))
    clf((tokens_X, segments_X, valid_lens_x))
    env.rec("classifier init", dict(clf.output.state_dict()))
    clf_trainer = torch.optim.Adam(clf.parameters(), lr=1e-3)
    clf_loss = nn.CrossEntropyLoss(reduction='none')

    def train_batch(net, X, y, loss, trainer):
        net.train()
        trainer.zero_grad()
        pred = net(X)
        l = loss(pred, y)
        l.sum().backward()
        trainer.step()
        return l.sum(), (pred.argmax(dim=1) == y).sum()

    fine_tune = env.step(train_batch)
    for i in range(3):
        env.rec(f"fine-tune {i}", fine_tune(clf, (tokens_X, segments_X, valid_lens_x), labels,
                                            clf_loss, clf_trainer))
    env.rec("pretrain after", train_step(tokens_X, segments_X, valid_lens_x, pred_positions_X,
                                         mlm_weights_X, mlm_Y, nsp_y))
    env.rec("classifier", dict(clf.output.state_dict()))
