"""Sweep 24 (H2, C): more Dive into Deep Learning chapters at toy sizes, nearly verbatim:
the Transformer encoder-decoder from scratch (PositionWiseFFN, AddNorm, positional
encoding as a precomputed tensor sliced per length, decoder blocks caching their keys in a
state list, dec_valid_lens from arange().repeat in training, greedy prediction feeding the
state back), AutoRec (a masked reconstruction loss over observed ratings only), DeepFM
(first-order embedding weights plus the FM's square-of-sum minus sum-of-squares, an MLP
over the flattened embeddings, BCE), ResNeXt blocks (grouped 3x3 convolutions, LazyConv2d,
LazyBatchNorm2d) and fine-tuning with a ten-times learning rate for the new output layer's
parameter group. Synthetic data. Programs `f(torch, env)`, see tutorial_harness.py."""
import math

from programs_sweep6_b import masked_softmax


def transformer_seq2seq(torch, env):
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
        def __init__(self, num_hiddens, num_heads, dropout, bias=False):
            super().__init__()
            self.num_heads = num_heads
            self.attention = DotProductAttention(dropout)
            self.W_q = nn.Linear(num_hiddens, num_hiddens, bias=bias)
            self.W_k = nn.Linear(num_hiddens, num_hiddens, bias=bias)
            self.W_v = nn.Linear(num_hiddens, num_hiddens, bias=bias)
            self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

        def transpose_qkv(self, X):
            X = X.reshape(X.shape[0], X.shape[1], self.num_heads, -1)
            X = X.permute(0, 2, 1, 3)
            return X.reshape(-1, X.shape[2], X.shape[3])

        def transpose_output(self, X):
            X = X.reshape(-1, self.num_heads, X.shape[1], X.shape[2])
            X = X.permute(0, 2, 1, 3)
            return X.reshape(X.shape[0], X.shape[1], -1)

        def forward(self, queries, keys, values, valid_lens):
            queries = self.transpose_qkv(self.W_q(queries))
            keys = self.transpose_qkv(self.W_k(keys))
            values = self.transpose_qkv(self.W_v(values))
            if valid_lens is not None:
                valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)
            output = self.attention(queries, keys, values, valid_lens)
            return self.W_o(self.transpose_output(output))

    class PositionalEncoding(nn.Module):
        def __init__(self, num_hiddens, dropout, max_len=1000):
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

    class TransformerEncoder(nn.Module):
        def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks,
                     dropout, use_bias=False):
            super().__init__()
            self.num_hiddens = num_hiddens
            self.embedding = nn.Embedding(vocab_size, num_hiddens)
            self.pos_encoding = PositionalEncoding(num_hiddens, dropout)
            self.blks = nn.Sequential()
            for i in range(num_blks):
                self.blks.add_module("block" + str(i), TransformerEncoderBlock(
                    num_hiddens, ffn_num_hiddens, num_heads, dropout, use_bias))

        def forward(self, X, valid_lens):
            X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))
            self.attention_weights = [None] * len(self.blks)
            for i, blk in enumerate(self.blks):
                X = blk(X, valid_lens)
                self.attention_weights[i] = blk.attention.attention.attention_weights
            return X

    class TransformerDecoderBlock(nn.Module):
        def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, i):
            super().__init__()
            self.i = i
            self.attention1 = MultiHeadAttention(num_hiddens, num_heads, dropout)
            self.addnorm1 = AddNorm(num_hiddens, dropout)
            self.attention2 = MultiHeadAttention(num_hiddens, num_heads, dropout)
            self.addnorm2 = AddNorm(num_hiddens, dropout)
            self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens)
            self.addnorm3 = AddNorm(num_hiddens, dropout)

        def forward(self, X, state):
            enc_outputs, enc_valid_lens = state[0], state[1]
            if state[2][self.i] is None:
                key_values = X
            else:
                key_values = torch.cat((state[2][self.i], X), dim=1)
            state[2][self.i] = key_values
            if self.training:
                batch_size, num_steps, _ = X.shape
                dec_valid_lens = torch.arange(1, num_steps + 1, device=X.device).repeat(
                    batch_size, 1)
            else:
                dec_valid_lens = None
            X2 = self.attention1(X, key_values, key_values, dec_valid_lens)
            Y = self.addnorm1(X, X2)
            Y2 = self.attention2(Y, enc_outputs, enc_outputs, enc_valid_lens)
            Z = self.addnorm2(Y, Y2)
            return self.addnorm3(Z, self.ffn(Z)), state

    class TransformerDecoder(nn.Module):
        def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks,
                     dropout):
            super().__init__()
            self.num_hiddens = num_hiddens
            self.num_blks = num_blks
            self.embedding = nn.Embedding(vocab_size, num_hiddens)
            self.pos_encoding = PositionalEncoding(num_hiddens, dropout)
            self.blks = nn.Sequential()
            for i in range(num_blks):
                self.blks.add_module("block" + str(i), TransformerDecoderBlock(
                    num_hiddens, ffn_num_hiddens, num_heads, dropout, i))
            self.dense = nn.LazyLinear(vocab_size)

        def init_state(self, enc_outputs, enc_valid_lens):
            return [enc_outputs, enc_valid_lens, [None] * self.num_blks]

        def forward(self, X, state):
            X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))
            self._attention_weights = [[None] * len(self.blks) for _ in range(2)]
            for i, blk in enumerate(self.blks):
                X, state = blk(X, state)
                self._attention_weights[0][i] = blk.attention1.attention.attention_weights
                self._attention_weights[1][i] = blk.attention2.attention.attention_weights
            return self.dense(X), state

    class EncoderDecoder(nn.Module):
        def __init__(self, encoder, decoder):
            super().__init__()
            self.encoder = encoder
            self.decoder = decoder

        def forward(self, enc_X, dec_X, *args):
            enc_all_outputs = self.encoder(enc_X, *args)
            dec_state = self.decoder.init_state(enc_all_outputs, *args)
            return self.decoder(dec_X, dec_state)[0]

    torch.manual_seed(0)
    src_vocab, tgt_vocab, bos, num_steps = 14, 13, 1, 6
    encoder = TransformerEncoder(src_vocab, 16, 32, 2, 2, 0.0)
    decoder = TransformerDecoder(tgt_vocab, 16, 32, 2, 2, 0.0)
    net = EncoderDecoder(encoder, decoder)
    X = env.randint(3, src_vocab, (4, num_steps))
    Y = env.randint(3, tgt_vocab, (4, num_steps))
    X_valid_len = torch.tensor([6, 4, 5, 3])
    Y_valid_len = torch.tensor([6, 5, 3, 4])
    net(X, Y, X_valid_len)          # the lazy layers take their shapes
    env.init(net)

    def loss_fn(Y_hat, Y, Y_valid_len):      # d2l's Seq2Seq.loss: averaged over valid tokens
        l = nn.functional.cross_entropy(Y_hat.reshape(-1, Y_hat.shape[-1]), Y.reshape(-1),
                                        reduction='none')
        mask = (torch.arange(Y.shape[1])[None, :] < Y_valid_len[:, None]).type(torch.float32)
        return (l * mask.reshape(-1)).sum() / mask.sum()

    optimizer = torch.optim.Adam(net.parameters(), lr=0.005)

    def train_step(X, X_valid_len, Y, Y_valid_len):
        net.train()
        optimizer.zero_grad()
        dec_input = torch.cat([torch.full((Y.shape[0], 1), bos), Y[:, :-1]], 1)
        Y_hat = net(X, dec_input, X_valid_len)
        l = loss_fn(Y_hat, Y, Y_valid_len)
        l.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1)
        optimizer.step()
        return l

    train_step = env.step(train_step)
    for epoch in range(4):
        env.rec(f"epoch {epoch}", train_step(X, X_valid_len, Y, Y_valid_len))
        if epoch == 0:
            env.rec("grads", {n: p.grad for n, p in net.named_parameters()})
    env.rec("params", dict(net.state_dict()))

    def predict_step(batch, num_steps, save_attention_weights=False):
        src, tgt, src_valid_len, _ = batch
        enc_all_outputs = net.encoder(src, src_valid_len)
        dec_state = net.decoder.init_state(enc_all_outputs, src_valid_len)
        outputs, attention_weights = [tgt[:, (0)].unsqueeze(1), ], []
        for _ in range(num_steps):
            Y, dec_state = net.decoder(outputs[-1], dec_state)
            outputs.append(Y.argmax(2))
            if save_attention_weights:
                attention_weights.append(net.decoder._attention_weights)
        return torch.cat(outputs[1:], 1), attention_weights

    net.eval()
    tgt = torch.full((2, num_steps), bos)
    with torch.no_grad():
        preds, _ = predict_step((X[:2], tgt, X_valid_len[:2], None), num_steps)
    env.rec("greedy", preds)


def autorec(torch, env):
    """d2l 21.4: AutoRec (item-based) with the loss only where ratings are observed
    (the mask multiplies the prediction), Adam with weight decay; RMSE on the test mask."""
    nn = torch.nn

    class AutoRec(nn.Module):
        def __init__(self, num_hidden, num_users, dropout=0.05):
            super(AutoRec, self).__init__()
            self.encoder = nn.Linear(num_users, num_hidden, bias=True)
            self.decoder = nn.Linear(num_hidden, num_users, bias=True)
            self.dropout = nn.Dropout(dropout)

        def forward(self, input):
            hidden = self.dropout(torch.sigmoid(self.encoder(input)))
            pred = self.decoder(hidden)
            if self.training:
                return pred * torch.sign(input)
            else:
                return pred

    torch.manual_seed(0)
    num_users, num_items = 12, 9
    ratings = (env.randint(1, 6, (num_items, num_users)).float() *
               (env.rand(num_items, num_users) < 0.4).float())
    test = (env.randint(1, 6, (num_items, num_users)).float() *
            (env.rand(num_items, num_users) < 0.2).float())
    net = AutoRec(10, num_users, dropout=0.0)
    env.rec("init", dict(net.state_dict()))
    loss = nn.MSELoss(reduction="sum")
    trainer = torch.optim.Adam(net.parameters(), lr=0.002, weight_decay=1e-5)

    def train_step(X):
        net.train()
        trainer.zero_grad()
        l = loss(net(X), X)
        l.backward()
        trainer.step()
        return l

    def evaluator(network, inter_matrix, test_data):
        scores = []
        for values in inter_matrix:
            feat = values
            scores.extend(network(feat.reshape(1, -1)))
        recons = torch.stack(scores)
        rmse = torch.sqrt(torch.sum(torch.square(test_data - torch.sign(test_data) * recons))
                          / torch.sum(torch.sign(test_data)))
        return float(rmse)

    train_step = env.step(train_step)
    for epoch in range(5):
        env.rec(f"epoch {epoch}", train_step(ratings))
    net.eval()
    with torch.no_grad():
        env.rec("rmse", evaluator(net, ratings, test))
    env.rec("params", dict(net.state_dict()))


def deepfm(torch, env):
    """d2l 21.10: DeepFM: the FM's first-order term (an Embedding to 1) and second-order
    term (0.5 * (square of sum - sum of squares)), an MLP over the flattened embeddings,
    sigmoid; BCELoss; an Adam step per batch of field ids offset into one table."""
    nn = torch.nn

    class DeepFM(nn.Module):
        def __init__(self, field_dims, num_factors, mlp_dims, drop_rate=0.1):
            super(DeepFM, self).__init__()
            num_inputs = int(sum(field_dims))
            self.embedding = nn.Embedding(num_inputs, num_factors)
            self.fc = nn.Embedding(num_inputs, 1)
            self.linear_layer = nn.Linear(1, 1)
            input_dim = self.embed_output_dim = len(field_dims) * num_factors
            layers = []
            for dim in mlp_dims:
                layers.append(nn.Linear(input_dim, dim))
                layers.append(nn.ReLU())
                layers.append(nn.Dropout(drop_rate))
                input_dim = dim
            layers.append(nn.Linear(input_dim, 1))
            self.mlp = nn.Sequential(*layers)

        def forward(self, x):
            embed_x = self.embedding(x)
            square_of_sum = torch.sum(embed_x, dim=1) ** 2
            sum_of_square = torch.sum(embed_x ** 2, dim=1)
            inputs = embed_x.reshape(-1, self.embed_output_dim)
            x = self.linear_layer(self.fc(x).sum(1)) \
                + 0.5 * (square_of_sum - sum_of_square).sum(1, keepdims=True) \
                + self.mlp(inputs)
            x = torch.sigmoid(x)
            return x

    torch.manual_seed(0)
    field_dims = [4, 5, 3]
    offsets = torch.tensor([0, 4, 9])
    net = DeepFM(field_dims, num_factors=6, mlp_dims=[16, 8], drop_rate=0.0)
    env.rec("init", dict(net.state_dict()))
    loss = nn.BCELoss()
    trainer = torch.optim.Adam(net.parameters(), lr=0.01)

    def train_step(X, y):
        trainer.zero_grad()
        pred = net(X)
        l = loss(pred, y)
        l.backward()
        trainer.step()
        return l, ((pred > 0.5).float() == y).float().mean()

    train_step = env.step(train_step)
    batches = [(torch.stack([env.randint(0, d, (8,)) for d in field_dims], 1) + offsets,
                env.randint(0, 2, (8, 1)).float()) for _ in range(3)]
    for epoch in range(2):
        for i, (X, y) in enumerate(batches):
            env.rec(f"epoch {epoch} batch {i}", train_step(X, y))
    env.rec("params", dict(net.state_dict()))
