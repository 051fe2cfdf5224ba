"""More text and sequence tutorials: "Language translation with nn.Transformer" (an
encoder-decoder Transformer, token embeddings scaled by sqrt(d), a PositionalEncoding buffer,
bool key padding masks, greedy decoding), "Text classification with torchtext"
(nn.EmbeddingBag with offsets) and "Sequence models and LSTMs" (an LSTM tagger over packed
padded batches, log_softmax + NLLLoss with ignore_index). Synthetic tokens, small sizes.
Programs `f(torch, env)`, see tutorial_harness.py."""
import math
import warnings


def translation(torch, env):
    # (PyTorch warns of both, as llgrad does: the tutorial's encoder is not batch_first, and
    # its float tgt_mask goes with bool padding masks)
    warnings.filterwarnings("ignore", message="enable_nested_tensor is True")
    warnings.filterwarnings("ignore", message="Support for mismatched key_padding_mask")
    nn = torch.nn
    Tensor = torch.Tensor
    PAD_IDX, BOS_IDX, EOS_IDX = 1, 2, 3
    SRC_VOCAB, TGT_VOCAB, EMB, NHEAD, FFN = 12, 11, 16, 2, 32

    class PositionalEncoding(nn.Module):
        def __init__(self, emb_size: int, dropout: float, maxlen: int = 5000):
            super(PositionalEncoding, self).__init__()
            den = torch.exp(- torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
            pos = torch.arange(0, maxlen).reshape(maxlen, 1)
            pos_embedding = torch.zeros((maxlen, emb_size))
            pos_embedding[:, 0::2] = torch.sin(pos * den)
            pos_embedding[:, 1::2] = torch.cos(pos * den)
            pos_embedding = pos_embedding.unsqueeze(-2)
            self.dropout = nn.Dropout(dropout)
            self.register_buffer('pos_embedding', pos_embedding)

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
            self.transformer = nn.Transformer(d_model=emb_size, nhead=nhead,
                                              num_encoder_layers=num_encoder_layers,
                                              num_decoder_layers=num_decoder_layers,
                                              dim_feedforward=dim_feedforward, dropout=dropout)
            self.generator = nn.Linear(emb_size, tgt_vocab_size)
            self.src_tok_emb = TokenEmbedding(src_vocab_size, emb_size)
            self.tgt_tok_emb = TokenEmbedding(tgt_vocab_size, emb_size)
            self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout, maxlen=32)

        def forward(self, src, trg, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask,
                    memory_key_padding_mask):
            src_emb = self.positional_encoding(self.src_tok_emb(src))
            tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
            outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None,
                                    src_padding_mask, tgt_padding_mask, memory_key_padding_mask)
            return self.generator(outs)

        def encode(self, src: Tensor, src_mask: Tensor):
            return self.transformer.encoder(self.positional_encoding(self.src_tok_emb(src)),
                                            src_mask)

        def decode(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor):
            return self.transformer.decoder(self.positional_encoding(self.tgt_tok_emb(tgt)),
                                            memory, tgt_mask)

    def generate_square_subsequent_mask(sz):
        mask = (torch.triu(torch.ones((sz, sz))) == 1).transpose(0, 1)
        mask = mask.float().masked_fill(mask == 0, float('-inf')).masked_fill(mask == 1,
                                                                                float(0.0))
        return mask

    def create_mask(src, tgt):
        src_seq_len = src.shape[0]
        tgt_seq_len = tgt.shape[0]
        tgt_mask = generate_square_subsequent_mask(tgt_seq_len)
        src_mask = torch.zeros((src_seq_len, src_seq_len)).type(torch.bool)
        src_padding_mask = (src == PAD_IDX).transpose(0, 1)
        tgt_padding_mask = (tgt == PAD_IDX).transpose(0, 1)
        return src_mask, tgt_mask, src_padding_mask, tgt_padding_mask

    env.rec("mask", generate_square_subsequent_mask(4))
    transformer = Seq2SeqTransformer(1, 1, EMB, NHEAD, SRC_VOCAB, TGT_VOCAB, FFN, dropout=0.0)
    for p in transformer.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    transformer = env.init(transformer)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD_IDX)
    optimizer = torch.optim.Adam(transformer.parameters(), lr=0.001, betas=(0.9, 0.98), eps=1e-9)

    def batch(n_src, n_tgt, bsz=3):
        """(seq, batch) token batches padded like collate_fn: BOS ... EOS PAD PAD."""
        src = env.randint(4, SRC_VOCAB, (n_src, bsz))
        tgt = env.randint(4, TGT_VOCAB, (n_tgt, bsz))
        src[0], tgt[0] = BOS_IDX, BOS_IDX
        for b in range(bsz):
            ls, lt = n_src - b, n_tgt - b
            src[ls - 1, b], tgt[lt - 1, b] = EOS_IDX, EOS_IDX
            src[ls:, b], tgt[lt:, b] = PAD_IDX, PAD_IDX
        return src, tgt

    train_dataloader = [batch(6, 7), batch(6, 7), batch(6, 7)]

    def train_step(model, src, tgt):
        tgt_input = tgt[:-1, :]
        src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input)
        logits = model(src, tgt_input, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask,
                       src_padding_mask)
        optimizer.zero_grad()
        tgt_out = tgt[1:, :]
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)

    def train_epoch(model, optimizer):
        model.train()
        losses = 0
        for src, tgt in train_dataloader:
            losses += train_step(model, src, tgt)
        return losses / len(list(train_dataloader))

    def evaluate(model):
        model.eval()
        losses = 0
        with torch.no_grad():
            for src, tgt in train_dataloader[:1]:
                tgt_input = tgt[:-1, :]
                src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src,
                                                                                     tgt_input)
                logits = model(src, tgt_input, src_mask, tgt_mask, src_padding_mask,
                               tgt_padding_mask, src_padding_mask)
                tgt_out = tgt[1:, :]
                loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
                losses += loss.item()
        return losses

    for epoch in range(1, 4):
        env.rec(f"train {epoch}", train_epoch(transformer, optimizer))
        env.rec(f"val {epoch}", evaluate(transformer))

    def greedy_decode(model, src, src_mask, max_len, start_symbol):
        memory = model.encode(src, src_mask)
        ys = torch.ones(1, 1).fill_(start_symbol).type(torch.long)
        for i in range(max_len - 1):
            tgt_mask = (generate_square_subsequent_mask(ys.size(0)).type(torch.bool))
            out = model.decode(ys, memory, tgt_mask)
            out = out.transpose(0, 1)
            prob = model.generator(out[:, -1])
            _, next_word = torch.max(prob, dim=1)
            next_word = next_word.item()
            ys = torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word)], dim=0)
            if next_word == EOS_IDX:
                break
        return ys

    def translate(model, src):
        model.eval()
        num_tokens = src.shape[0]
        src_mask = (torch.zeros(num_tokens, num_tokens)).type(torch.bool)
        with torch.no_grad():
            tgt_tokens = greedy_decode(model, src, src_mask, max_len=num_tokens + 5,
                                       start_symbol=BOS_IDX).flatten()
        return tgt_tokens

    src = train_dataloader[0][0][:, :1]
    env.rec("translate", translate(transformer, src))
    # (not the attention's key biases: softmax takes no notice of them, so their gradients
    # are rounding noise, which Adam scales up to steps of lr)
    env.rec("state", {k: torch.cat([v[:EMB], v[2 * EMB:]]) if k.endswith("in_proj_bias") else v
                      for k, v in transformer.state_dict().items()})


def text_classification(torch, env):
    nn = torch.nn
    VOCAB, EMBED, NUM_CLASS = 30, 8, 4

    class TextClassificationModel(nn.Module):
        def __init__(self, vocab_size, embed_dim, num_class):
            super(TextClassificationModel, self).__init__()
            self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
            self.fc = nn.Linear(embed_dim, num_class)
            self.init_weights()

        def init_weights(self):
            initrange = 0.5
            self.embedding.weight.data.uniform_(-initrange, initrange)
            self.fc.weight.data.uniform_(-initrange, initrange)
            self.fc.bias.data.zero_()

        def forward(self, text, offsets):
            embedded = self.embedding(text, offsets)
            return self.fc(embedded)

    def text_pipeline(x):
        return [int(t) for t in x]

    def label_pipeline(x):
        return int(x) - 1

    def collate_batch(batch):
        label_list, text_list, offsets = [], [], [0]
        for _label, _text in batch:
            label_list.append(label_pipeline(_label))
            processed_text = torch.tensor(text_pipeline(_text), dtype=torch.int64)
            text_list.append(processed_text)
            offsets.append(processed_text.size(0))
        label_list = torch.tensor(label_list, dtype=torch.int64)
        offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
        text_list = torch.cat(text_list)
        return label_list, text_list, offsets

    data = []
    for i in range(16):
        n = 2 + env.choice(6)
        data.append((1 + env.choice(NUM_CLASS), env.randint(0, VOCAB, (n,)).tolist()))
    batches = [collate_batch(data[i:i + 4]) for i in range(0, len(data), 4)]
    env.rec("batch0", batches[0])

    model = env.init(TextClassificationModel(VOCAB, EMBED, NUM_CLASS))
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=5.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.1)

    def train_step(label, text, offsets):
        optimizer.zero_grad()
        predicted_label = model(text, offsets)
        loss = criterion(predicted_label, label)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        optimizer.step()
        return (predicted_label.argmax(1) == label).sum().item(), loss

    train_step = env.step(train_step)

    def evaluate(dataloader):
        model.eval()
        total_acc, total_count = 0, 0
        with torch.no_grad():
            for idx, (label, text, offsets) in enumerate(dataloader):
                predicted_label = model(text, offsets)
                total_acc += (predicted_label.argmax(1) == label).sum().item()
                total_count += label.size(0)
        return total_acc / total_count

    for epoch in range(2):
        model.train()
        for idx, (label, text, offsets) in enumerate(batches):
            acc, loss = train_step(label, text, offsets)
            env.rec(f"step {epoch} {idx}", (acc, loss))
        env.rec(f"eval {epoch}", evaluate(batches))
        scheduler.step()
        env.rec(f"lr {epoch}", optimizer.param_groups[0]["lr"])
    env.rec("state", model.state_dict())
    with torch.no_grad():
        text = torch.tensor(text_pipeline([3, 5, 7, 9]))
        env.rec("predict", model(text, torch.tensor([0])).argmax(1).item() + 1)


def lstm_tagger(torch, env):
    nn, F = torch.nn, torch.nn.functional
    rnn_utils = torch.nn.utils.rnn
    VOCAB, TAGS, EMB, HID, PAD = 15, 5, 6, 7, 0

    class LSTMTagger(nn.Module):
        def __init__(self, embedding_dim, hidden_dim, vocab_size, tagset_size):
            super(LSTMTagger, self).__init__()
            self.hidden_dim = hidden_dim
            self.word_embeddings = nn.Embedding(vocab_size, embedding_dim, padding_idx=PAD)
            self.lstm = nn.LSTM(embedding_dim, hidden_dim, batch_first=True)
            self.hidden2tag = nn.Linear(hidden_dim, tagset_size)

        def forward(self, sentences, lengths):
            embeds = self.word_embeddings(sentences)
            packed = rnn_utils.pack_padded_sequence(embeds, lengths, batch_first=True,
                                                      enforce_sorted=False)
            packed_out, (h_n, c_n) = self.lstm(packed)
            lstm_out, out_lengths = rnn_utils.pad_packed_sequence(packed_out,
                                                                    batch_first=True)
            tag_space = self.hidden2tag(lstm_out)
            tag_scores = F.log_softmax(tag_space, dim=2)
            return tag_scores, h_n

    lengths = [4, 6, 3]
    sentences = env.randint(1, VOCAB, (3, 6))
    tags = env.randint(0, TAGS, (3, 6))
    for b, n in enumerate(lengths):
        sentences[b, n:] = PAD
        tags[b, n:] = -100
    lengths = torch.tensor(lengths)

    model = env.init(LSTMTagger(EMB, HID, VOCAB, TAGS))
    loss_function = nn.NLLLoss(ignore_index=-100)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    with torch.no_grad():
        tag_scores, h_n = model(sentences, lengths)
        env.rec("before", (tag_scores, h_n))

    def train_step(sentences, lengths, tags):
        model.zero_grad()
        tag_scores, _ = model(sentences, lengths)
        loss = loss_function(tag_scores.view(-1, TAGS), tags[:, :tag_scores.size(1)].reshape(-1))
        loss.backward()
        optimizer.step()
        return loss

    train_step = env.step(train_step)
    for epoch in range(3):
        env.rec(f"loss {epoch}", train_step(sentences, lengths, tags))
    env.rec("grads", {n: p.grad for n, p in model.named_parameters()})
    env.rec("state", model.state_dict())
    with torch.no_grad():
        tag_scores, _ = model(sentences, lengths)
        env.rec("after", tag_scores.argmax(dim=2))
