"""Sequence models: "Language modeling with nn.Transformer" (TransformerEncoder, a
PositionalEncoding buffer, square subsequent masks, clip_grad_norm_, StepLR) and "NLP from
scratch: translation with a sequence to sequence network and attention" (Embedding, GRU,
Bahdanau attention with bmm, teacher forcing, NLLLoss, Adam). Synthetic token streams, small
sizes. Programs `f(torch, env)`, see tutorial_harness.py."""
import math


def transformer_lm(torch, env, dropout=0.0, epochs=1):
    """dropout > 0: the training draws from the library's generator (records cross=False).
    Each epoch's learning rate (StepLR) is a new guard value: a trace and a build each."""
    nn = torch.nn
    TransformerEncoder, TransformerEncoderLayer = nn.TransformerEncoder, nn.TransformerEncoderLayer
    cross = dropout == 0.0

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.1, max_len=5000):
            super().__init__()
            self.dropout = nn.Dropout(p=dropout)
            position = torch.arange(max_len).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
            pe = torch.zeros(max_len, 1, d_model)
            pe[:, 0, 0::2] = torch.sin(position * div_term)
            pe[:, 0, 1::2] = torch.cos(position * div_term)
            self.register_buffer("pe", pe)

        def forward(self, x):
            x = x + self.pe[:x.size(0)]
            return self.dropout(x)

    class TransformerModel(nn.Module):
        def __init__(self, ntoken, d_model, nhead, d_hid, nlayers, dropout=0.5):
            super().__init__()
            self.model_type = "Transformer"
            self.pos_encoder = PositionalEncoding(d_model, dropout, max_len=64)
            encoder_layers = TransformerEncoderLayer(d_model, nhead, d_hid, dropout)
            self.transformer_encoder = TransformerEncoder(encoder_layers, nlayers,
                                                          enable_nested_tensor=False)
            self.embedding = nn.Embedding(ntoken, d_model)
            self.d_model = d_model
            self.linear = nn.Linear(d_model, ntoken)
            self.init_weights()

        def init_weights(self):
            initrange = 0.1
            self.embedding.weight.data.uniform_(-initrange, initrange)
            self.linear.bias.data.zero_()
            self.linear.weight.data.uniform_(-initrange, initrange)

        def forward(self, src, src_mask=None):
            src = self.embedding(src) * math.sqrt(self.d_model)
            src = self.pos_encoder(src)
            if src_mask is None:
                src_mask = nn.Transformer.generate_square_subsequent_mask(len(src))
            output = self.transformer_encoder(src, src_mask)
            output = self.linear(output)
            return output

    def generate_square_subsequent_mask(sz):
        return torch.triu(torch.ones(sz, sz) * float("-inf"), diagonal=1)

    env.rec("mask", (generate_square_subsequent_mask(4),
                     nn.Transformer.generate_square_subsequent_mask(4)))
    env.rec("pe", PositionalEncoding(8, max_len=6).pe)

    def batchify(data, bsz):
        seq_len = data.size(0) // bsz
        data = data[:seq_len * bsz]
        data = data.view(bsz, seq_len).t().contiguous()
        return data

    ntokens, bptt = 20, 6
    train_data = batchify(env.randint(0, ntokens, (100,)), 4)
    val_data = batchify(env.randint(0, ntokens, (40,)), 2)
    env.rec("batches", (tuple(train_data.shape), tuple(val_data.shape)))

    def get_batch(source, i):
        seq_len = min(bptt, len(source) - 1 - i)
        data = source[i:i + seq_len]
        target = source[i + 1:i + 1 + seq_len].reshape(-1)
        return data, target

    model = env.init(TransformerModel(ntokens, 16, 2, 32, 2, dropout))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.95)

    def train_step(model, data, targets):
        output = model(data)
        output_flat = output.view(-1, ntokens)
        loss = criterion(output_flat, targets)
        optimizer.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        return loss.item(), norm

    train_step = env.step(train_step)

    def evaluate(model, eval_data):
        model.eval()
        total_loss = 0.
        with torch.no_grad():
            for i in range(0, eval_data.size(0) - 1, bptt):
                data, targets = get_batch(eval_data, i)
                seq_len = data.size(0)
                output = model(data, generate_square_subsequent_mask(seq_len))
                output_flat = output.view(-1, ntokens)
                total_loss += seq_len * criterion(output_flat, targets).item()
        return total_loss / (len(eval_data) - 1)

    for epoch in range(epochs):
        model.train()
        for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
            data, targets = get_batch(train_data, i)
            loss, norm = train_step(model, data, targets)
            env.rec(f"loss {epoch} {batch}", (loss, norm), cross)
        env.rec(f"val {epoch}", evaluate(model, val_data), cross)
        scheduler.step()
        env.rec(f"lr {epoch}", scheduler.get_last_lr())
    env.rec("state", model.state_dict(), cross)


def transformer_lm_dropout(torch, env):
    transformer_lm(torch, env, dropout=0.2, epochs=2)


def seq2seq_attention(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    SOS_token, EOS_token, MAX_LENGTH = 0, 1, 3

    class EncoderRNN(nn.Module):
        def __init__(self, input_size, hidden_size, dropout_p=0.1):
            super().__init__()
            self.hidden_size = hidden_size
            self.embedding = nn.Embedding(input_size, hidden_size)
            self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
            self.dropout = nn.Dropout(dropout_p)

        def forward(self, input):
            embedded = self.dropout(self.embedding(input))
            output, hidden = self.gru(embedded)
            return output, hidden

    class BahdanauAttention(nn.Module):
        def __init__(self, hidden_size):
            super().__init__()
            self.Wa = nn.Linear(hidden_size, hidden_size)
            self.Ua = nn.Linear(hidden_size, hidden_size)
            self.Va = nn.Linear(hidden_size, 1)

        def forward(self, query, keys):
            scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
            scores = scores.squeeze(2).unsqueeze(1)
            weights = F.softmax(scores, dim=-1)
            context = torch.bmm(weights, keys)
            return context, weights

    class AttnDecoderRNN(nn.Module):
        def __init__(self, hidden_size, output_size, dropout_p=0.1):
            super().__init__()
            self.embedding = nn.Embedding(output_size, hidden_size)
            self.attention = BahdanauAttention(hidden_size)
            self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
            self.out = nn.Linear(hidden_size, output_size)
            self.dropout = nn.Dropout(dropout_p)

        def forward(self, encoder_outputs, encoder_hidden, target_tensor=None):
            batch_size = encoder_outputs.size(0)
            decoder_input = torch.empty(batch_size, 1, dtype=torch.long).fill_(SOS_token)
            decoder_hidden = encoder_hidden
            decoder_outputs = []
            attentions = []
            for i in range(MAX_LENGTH):
                decoder_output, decoder_hidden, attn_weights = self.forward_step(
                    decoder_input, decoder_hidden, encoder_outputs)
                decoder_outputs.append(decoder_output)
                attentions.append(attn_weights)
                if target_tensor is not None:
                    decoder_input = target_tensor[:, i].unsqueeze(1)    # teacher forcing
                else:
                    _, topi = decoder_output.topk(1)
                    decoder_input = topi.squeeze(-1).detach()
            decoder_outputs = torch.cat(decoder_outputs, dim=1)
            decoder_outputs = F.log_softmax(decoder_outputs, dim=-1)
            attentions = torch.cat(attentions, dim=1)
            return decoder_outputs, decoder_hidden, attentions

        def forward_step(self, input, hidden, encoder_outputs):
            embedded = self.dropout(self.embedding(input))
            query = hidden.permute(1, 0, 2)
            context, attn_weights = self.attention(query, encoder_outputs)
            input_gru = torch.cat((embedded, context), dim=2)
            output, hidden = self.gru(input_gru, hidden)
            output = self.out(output)
            return output, hidden, attn_weights

    n_words, hidden_size, batch_size = 10, 8, 4
    encoder = env.init(EncoderRNN(n_words, hidden_size, dropout_p=0.0))
    decoder = env.init(AttnDecoderRNN(hidden_size, n_words, dropout_p=0.0))
    encoder_optimizer = optim.Adam(encoder.parameters(), lr=0.01)
    decoder_optimizer = optim.Adam(decoder.parameters(), lr=0.01)
    criterion = nn.NLLLoss()
    pairs = [(env.randint(2, n_words, (batch_size, MAX_LENGTH)),
              env.randint(2, n_words, (batch_size, MAX_LENGTH))) for _ in range(3)]
    for _, target in pairs:
        target[:, -1] = EOS_token

    def train_batch(input_tensor, target_tensor, encoder, decoder):
        encoder_optimizer.zero_grad()
        decoder_optimizer.zero_grad()
        encoder_outputs, encoder_hidden = encoder(input_tensor)
        decoder_outputs, _, _ = decoder(encoder_outputs, encoder_hidden, target_tensor)
        loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)),
                         target_tensor.view(-1))
        loss.backward()
        encoder_optimizer.step()
        decoder_optimizer.step()
        return loss.item()

    train_batch = env.step(train_batch)
    for epoch in range(2):
        total_loss = 0
        for input_tensor, target_tensor in pairs:
            total_loss += train_batch(input_tensor, target_tensor, encoder, decoder)
        env.rec(f"epoch {epoch}", total_loss / len(pairs))
    env.rec("encoder", encoder.state_dict())
    # (not attention.Va.bias: softmax takes no notice of it, so its gradient is rounding
    # noise, which Adam scales up to steps of lr: no two libraries agree on it)
    env.rec("decoder", {k: v for k, v in decoder.state_dict().items()
                        if k != "attention.Va.bias"})

    def evaluate(encoder, decoder, input_tensor):
        with torch.no_grad():
            encoder_outputs, encoder_hidden = encoder(input_tensor)
            decoder_outputs, decoder_hidden, decoder_attn = decoder(encoder_outputs,
                                                                    encoder_hidden)
            _, topi = decoder_outputs.topk(1)
            decoded_ids = topi.squeeze()
        return decoded_ids, decoder_attn

    encoder.eval()
    decoder.eval()
    env.rec("evaluate", evaluate(encoder, decoder, pairs[0][0]))
