"""Sweep 16 (D), part 3: pytorch/examples' word_language_model at small sizes: batchify /
get_batch over a random corpus, RNNModel (GRU and RNN_TANH with tied weights,
repackage_hidden, clip_grad_norm_, the hand-written p.data.add_ update) and
TransformerModel (PositionalEncoding buffer, the log(tril) causal mask,
TransformerEncoder), then generate.py's sampling loop. See tutorial_harness.py."""
import math

import pytest

pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def _models(torch):
    nn, F = torch.nn, torch.nn.functional

    class RNNModel(nn.Module):
        def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
            super().__init__()
            self.ntoken = ntoken
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            if rnn_type in ['LSTM', 'GRU']:
                self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
            else:
                nonlinearity = {'RNN_TANH': 'tanh', 'RNN_RELU': 'relu'}[rnn_type]
                self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            if tie_weights:
                self.decoder.weight = self.encoder.weight
            self.init_weights()
            self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output)
            decoded = decoded.view(-1, self.ntoken)
            return F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            if self.rnn_type == 'LSTM':
                return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                        weight.new_zeros(self.nlayers, bsz, self.nhid))
            return weight.new_zeros(self.nlayers, bsz, self.nhid)

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.1, max_len=5000):
            super().__init__()
            self.dropout = nn.Dropout(p=dropout)
            pe = torch.zeros(max_len, d_model)
            position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            pe = pe.unsqueeze(0).transpose(0, 1)
            self.register_buffer('pe', pe)

        def forward(self, x):
            x = x + self.pe[:x.size(0), :]
            return self.dropout(x)

    class TransformerModel(nn.Transformer):
        def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
            super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid,
                             num_encoder_layers=nlayers)
            self.model_type = 'Transformer'
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, dropout)
            self.input_emb = nn.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = nn.Linear(ninp, ntoken)
            self.init_weights()

        def _generate_square_subsequent_mask(self, sz):
            return torch.log(torch.tril(torch.ones(sz, sz)))

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.input_emb.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, src, has_mask=True):
            if has_mask:
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    mask = self._generate_square_subsequent_mask(len(src))
                    self.src_mask = mask
            else:
                self.src_mask = None
            src = self.input_emb(src) * math.sqrt(self.ninp)
            src = self.pos_encoder(src)
            output = self.encoder(src, mask=self.src_mask)
            output = self.decoder(output)
            return F.log_softmax(output, dim=-1)

    return RNNModel, TransformerModel


def _corpus(torch, env, ntokens):
    def batchify(data, bsz):
        nbatch = data.size(0) // bsz
        data = data.narrow(0, 0, nbatch * bsz)
        return data.view(bsz, -1).t().contiguous()
    return batchify(env.randint(0, ntokens, (83,)), 4)


def get_batch(source, i, bptt=6):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def word_lm_rnn(torch, env, rnn_type="GRU"):
    """main.py's train() for an RNNModel with tied weights; dropout 0 (the libraries'
    dropout draws differ)."""
    nn = torch.nn
    RNNModel, _ = _models(torch)
    ntokens, lr, clip = 13, 5.0, 0.25
    model = env.init(RNNModel(rnn_type, ntokens, 8, 8, 2, dropout=0.0, tie_weights=True))
    criterion = nn.NLLLoss()
    train_data = _corpus(torch, env, ntokens)
    env.rec("train data", train_data)

    def repackage_hidden(h):
        if isinstance(h, torch.Tensor):
            return h.detach()
        return tuple(repackage_hidden(v) for v in h)

    def step(data, targets, hidden):
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        return loss, hidden

    step = env.step(step)
    model.train()
    hidden = model.init_hidden(4)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, 6)):
        data, targets = get_batch(train_data, i)
        hidden = repackage_hidden(hidden)
        loss, hidden = step(data, targets, hidden)
        env.rec(f"loss {batch}", loss)
        env.rec(f"ppl {batch}", math.exp(loss.item()))
    env.rec("tied", model.decoder.weight is model.encoder.weight)
    env.rec("params", dict(model.named_parameters()))
    model.eval()
    with torch.no_grad():
        total_loss = 0.
        hidden = model.init_hidden(4)
        for i in range(0, train_data.size(0) - 1, 6):
            data, targets = get_batch(train_data, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
        env.rec("eval loss", total_loss / (len(train_data) - 1))


def test_word_language_model_gru():
    run_tutorial(word_lm_rnn, rtol=1e-5, atol=1e-6)


def test_word_language_model_rnn_tanh():
    run_tutorial(lambda torch, env: word_lm_rnn(torch, env, "RNN_TANH"), rtol=1e-5, atol=1e-6)


def test_word_language_model_lstm():
    run_tutorial(lambda torch, env: word_lm_rnn(torch, env, "LSTM"), rtol=1e-5, atol=1e-6)


def word_lm_transformer(torch, env):
    """main.py's train() for the TransformerModel, eval without dropout, then generate.py's
    loop (argmax here; multinomial draws are compared between llgrad's runs only)."""
    nn = torch.nn
    _, TransformerModel = _models(torch)
    ntokens, lr, clip = 11, 0.5, 0.25
    model = env.init(TransformerModel(ntokens, 8, 2, 16, 2, dropout=0.0))
    criterion = nn.NLLLoss()
    train_data = _corpus(torch, env, ntokens)

    def step(data, targets):
        model.zero_grad()
        output = model(data)
        output = output.view(-1, ntokens)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        return loss

    step = env.step(step)
    model.train()
    for batch, i in enumerate(range(0, 18, 6)):
        data, targets = get_batch(train_data, i)
        env.rec(f"loss {batch}", step(data, targets))
    env.rec("mask", model.src_mask)
    env.rec("params", dict(model.named_parameters()))
    model.eval()
    input = torch.tensor([[3]], dtype=torch.long)
    words = []
    with torch.no_grad():
        for i in range(5):
            output = model(input, False)
            word_weights = output[-1].squeeze().div(1.0).exp().cpu()
            word_idx = int(word_weights.argmax())
            word_tensor = torch.Tensor([[word_idx]]).long()
            input = torch.cat([input, word_tensor], 0)
            words.append(word_idx)
        env.rec("generated", words)
        env.rec("last weights", word_weights)
        sampled = torch.multinomial(word_weights, 1)[0]
        env.rec("sampled", sampled, cross=False)


def test_word_language_model_transformer():
    run_tutorial(word_lm_transformer, rtol=1e-4, atol=1e-5)
