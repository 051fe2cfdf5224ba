"""Stop 78 (W), part 2: the official PyTorch tutorials "NLP From Scratch: translation with
a sequence to sequence network and attention" (EncoderRNN / AttnDecoderRNN with Bahdanau
attention over GRUs, teacher forcing from a seeded Python random) and "Language
translation with nn.Transformer" (Seq2SeqTransformer, generate_square_subsequent_mask,
create_mask with padding masks, CrossEntropyLoss(ignore_index=PAD_IDX)). Toy sizes,
synthetic token data. Programs `f(torch, env)`, see tutorial_harness.py."""
import math
import random


def seq2seq_attention(torch, env):
    nn = torch.nn
    F = torch.nn.functional
    optim = torch.optim
    SOS_token, EOS_token, MAX_LENGTH = 0, 1, 6

    class EncoderRNN(nn.Module):
        def __init__(self, input_size, hidden_size, dropout_p=0.0):
            super(EncoderRNN, self).__init__()
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
            super(BahdanauAttention, self).__init__()
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
        def __init__(self, hidden_size, output_size, dropout_p=0.0):
            super(AttnDecoderRNN, self).__init__()
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
                    # Teacher forcing: Feed the target as the next input
                    decoder_input = target_tensor[:, i].unsqueeze(1)  # Teacher forcing
                else:
                    _, topi = decoder_output.topk(1)
                    decoder_input = topi.squeeze(-1).detach()  # detach from history as input
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

    encoder = env.init(EncoderRNN(12, 16))
    decoder = env.init(AttnDecoderRNN(16, 10))
    encoder_optimizer = optim.Adam(encoder.parameters(), lr=0.01)
    decoder_optimizer = optim.Adam(decoder.parameters(), lr=0.01)
    criterion = nn.NLLLoss()
    rng = random.Random(0)

    def train_epoch(input_tensor, target_tensor, teacher):
        encoder_optimizer.zero_grad()
        decoder_optimizer.zero_grad()
        encoder_outputs, encoder_hidden = encoder(input_tensor)
        decoder_outputs, _, _ = decoder(encoder_outputs, encoder_hidden,
                                        target_tensor if teacher else None)
        loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)),
                         target_tensor.view(-1))
        loss.backward()
        encoder_optimizer.step()
        decoder_optimizer.step()
        return loss.item()
    train_epoch = env.step(train_epoch)

    inputs = env.randint(2, 12, (4, 5))
    targets = env.randint(2, 10, (4, MAX_LENGTH))
    targets[:, -1] = EOS_token
    total = 0
    for epoch in range(1, 7):
        teacher = rng.random() < 0.5
        loss = train_epoch(inputs, targets, teacher)
        total += loss
        env.rec("loss", (teacher, loss))
    env.rec("print", "%.4f" % (total / 6))
    with torch.no_grad():
        encoder_outputs, encoder_hidden = encoder(inputs[:1])
        decoder_outputs, decoder_hidden, decoder_attn = decoder(encoder_outputs,
                                                                encoder_hidden)
        _, topi = decoder_outputs.topk(1)
        decoded_ids = topi.squeeze()
        decoded_words = []
        for idx in decoded_ids:
            if idx.item() == EOS_token:
                decoded_words.append("<EOS>")
                break
            decoded_words.append("w%d" % idx.item())
    env.rec("decoded", decoded_words)
    env.rec("attn", decoder_attn)
    # (Va.bias shifts every score alike, which softmax undoes: its gradient is rounding
    # noise, which Adam scales to steps of lr, different in each library)
    env.rec("params", (dict(encoder.state_dict()), {
        k: v for k, v in decoder.state_dict().items() if k != "attention.Va.bias"}))


def transformer_translation(torch, env):
    nn = torch.nn
    Tensor = torch.Tensor
    Transformer = torch.nn.Transformer
    PAD_IDX, BOS_IDX, EOS_IDX = 1, 2, 3

    class PositionalEncoding(nn.Module):
        def __init__(self, emb_size, dropout, maxlen=50):
            super(PositionalEncoding, self).__init__()
            den = torch.exp(- torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
            pos = torch.arange(0, maxlen).reshape(maxlen, 1)
            pos_embedding = torch.zeros((maxlen, emb_size))
            pos_embedding[:, 0::2] = torch.sin(pos * den)
            pos_embedding[:, 1::2] = torch.cos(pos * den)
            pos_embedding = pos_embedding.unsqueeze(-2)
            self.dropout = nn.Dropout(dropout)
            self.register_buffer("pos_embedding", pos_embedding)

        def forward(self, token_embedding: Tensor):
            return self.dropout(token_embedding + self.pos_embedding[:token_embedding.size(0), :])

    class TokenEmbedding(nn.Module):
        def __init__(self, vocab_size: int, emb_size):
            super(TokenEmbedding, self).__init__()
            self.embedding = nn.Embedding(vocab_size, emb_size)
            self.emb_size = emb_size

        def forward(self, tokens: Tensor):
            return self.embedding(tokens.long()) * math.sqrt(self.emb_size)

    class Seq2SeqTransformer(nn.Module):
        def __init__(self, num_encoder_layers, num_decoder_layers, emb_size, nhead,
                     src_vocab_size, tgt_vocab_size, dim_feedforward=512, dropout=0.1):
            super(Seq2SeqTransformer, self).__init__()
            self.transformer = Transformer(d_model=emb_size, nhead=nhead,
                                           num_encoder_layers=num_encoder_layers,
                                           num_decoder_layers=num_decoder_layers,
                                           dim_feedforward=dim_feedforward, dropout=dropout)
            self.generator = nn.Linear(emb_size, tgt_vocab_size)
            self.src_tok_emb = TokenEmbedding(src_vocab_size, emb_size)
            self.tgt_tok_emb = TokenEmbedding(tgt_vocab_size, emb_size)
            self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout)

        def forward(self, src, trg, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask,
                    memory_key_padding_mask):
            src_emb = self.positional_encoding(self.src_tok_emb(src))
            tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
            outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None,
                                    src_padding_mask, tgt_padding_mask, memory_key_padding_mask)
            return self.generator(outs)

    def generate_square_subsequent_mask(sz):
        mask = (torch.triu(torch.ones((sz, sz))) == 1).transpose(0, 1)
        mask = mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, float(0.0))
        return mask

    def create_mask(src, tgt):
        src_seq_len = src.shape[0]
        tgt_seq_len = tgt.shape[0]
        tgt_mask = generate_square_subsequent_mask(tgt_seq_len)
        src_mask = torch.zeros((src_seq_len, src_seq_len)).type(torch.bool)
        src_padding_mask = (src == PAD_IDX).transpose(0, 1)
        tgt_padding_mask = (tgt == PAD_IDX).transpose(0, 1)
        return src_mask, tgt_mask, src_padding_mask, tgt_padding_mask

    transformer = Seq2SeqTransformer(1, 1, 16, 2, 14, 12, dim_feedforward=32, dropout=0.0)
    for p in transformer.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    transformer = env.init(transformer)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD_IDX)
    optimizer = torch.optim.Adam(transformer.parameters(), lr=0.0001, betas=(0.9, 0.98), eps=1e-9)

    def train_step(src, tgt):
        tgt_input = tgt[:-1, :]
        src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input)
        logits = transformer(src, tgt_input, src_mask, tgt_mask, src_padding_mask,
                             tgt_padding_mask, src_padding_mask)
        optimizer.zero_grad()
        tgt_out = tgt[1:, :]
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        loss.backward()
        optimizer.step()
        return loss.item()
    train_step = env.step(train_step)

    src = env.randint(4, 14, (6, 3))
    tgt = env.randint(4, 12, (5, 3))
    src[0, :], tgt[0, :] = BOS_IDX, BOS_IDX
    src[-1, :], tgt[-1, :] = EOS_IDX, EOS_IDX
    src[4:, 1], tgt[3:, 2] = PAD_IDX, PAD_IDX      # (shorter sentences, padded)
    transformer.train()
    losses = 0
    for epoch in range(4):
        loss = train_step(src, tgt)
        losses += loss
        env.rec("loss", loss)
    env.rec("print", f"Epoch: 4, Train loss: {losses / 4:.3f}")

    def greedy_decode(model, src, src_mask, max_len, start_symbol):
        memory = model.transformer.encoder(model.positional_encoding(model.src_tok_emb(src)),
                                           src_mask)
        ys = torch.ones(1, 1).fill_(start_symbol).type(torch.long)
        for i in range(max_len - 1):
            tgt_mask = (generate_square_subsequent_mask(ys.size(0)).type(torch.bool))
            out = model.transformer.decoder(model.positional_encoding(model.tgt_tok_emb(ys)),
                                            memory, tgt_mask)
            out = out.transpose(0, 1)
            prob = model.generator(out[:, -1])
            _, next_word = torch.max(prob, dim=1)
            next_word = next_word.item()
            ys = torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word)], dim=0)
            if next_word == EOS_IDX:
                break
        return ys

    transformer.eval()
    with torch.no_grad():
        s = src[:, :1]
        ys = greedy_decode(transformer, s, torch.zeros(6, 6).type(torch.bool), 5, BOS_IDX)
    env.rec("decode", ys.flatten().tolist())
    # (the key bias, in_proj_bias[E:2E], shifts each query's scores alike, which softmax
    # undoes: its gradient is rounding noise, which Adam scales to steps of lr)
    env.rec("params", {k: torch.cat([v[:16], v[32:]]) if k.endswith("in_proj_bias") else v
                       for k, v in transformer.state_dict().items()})
