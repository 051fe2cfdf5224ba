"""untuned_models_seventh.py's tiny NeRF, BiLSTM-CRF and nn.Transformer translation model
(that file holds the other three, build() and the runner): each _name(lib) -> (model,
optimizer, loss closure[, {"clip"/"clip_value"/"scheduler"/"after"}]), seeded by build."""
import math


def _nerf(lib):
    # (bmild/nerf's tiny_nerf notebook as its PyTorch ports write it: get_rays by meshgrid,
    # stratified samples along each ray, the positional encoding, an MLP with a skip
    # concatenation, volume rendering by an exclusive cumprod; a 16x16 view, 24 samples a ray)
    nn, F = lib.nn, lib.nn.functional
    H = W = 16
    focal, near, far, N_samples, L_embed = 20.0, 2.0, 6.0, 24, 6

    def posenc(x):
        rets = [x]
        for i in range(L_embed):
            for fn in [lib.sin, lib.cos]:
                rets.append(fn(2. ** i * x))
        return lib.cat(rets, -1)

    class NeRF(nn.Module):
        def __init__(self, D=6, W=128, input_ch=3 + 3 * 2 * L_embed, skips=(3,)):
            super().__init__()
            self.skips = skips
            self.pts_linears = nn.ModuleList(
                [nn.Linear(input_ch, W)] +
                [nn.Linear(W, W) if i not in skips else nn.Linear(W + input_ch, W) for i in range(1, D)])
            self.output_linear = nn.Linear(W, 4)

        def forward(self, x):
            h = x
            for i, l in enumerate(self.pts_linears):
                if i in self.skips:
                    h = lib.cat([x, h], -1)
                h = F.relu(l(h))
            return self.output_linear(h)

    def get_rays(c2w):
        i, j = lib.meshgrid(lib.arange(W, dtype=lib.float32), lib.arange(H, dtype=lib.float32), indexing="xy")
        dirs = lib.stack([(i - W * .5) / focal, -(j - H * .5) / focal, -lib.ones_like(i)], -1)
        rays_d = lib.sum(dirs[..., None, :] * c2w[:3, :3], -1)
        rays_o = c2w[:3, -1].expand(rays_d.shape)
        return rays_o, rays_d

    def render_rays(network_fn, rays_o, rays_d):
        z_vals = lib.linspace(near, far, N_samples)
        z_vals = z_vals + lib.rand(list(rays_o.shape[:-1]) + [N_samples]) * (far - near) / N_samples
        pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
        raw = network_fn(posenc(pts.reshape(-1, 3)))
        raw = raw.reshape(list(pts.shape[:-1]) + [4])
        sigma_a = F.relu(raw[..., 3])
        rgb = lib.sigmoid(raw[..., :3])
        dists = lib.cat([z_vals[..., 1:] - z_vals[..., :-1], lib.full(z_vals[..., :1].shape, 1e10)], -1)
        alpha = 1. - lib.exp(-sigma_a * dists)
        # (TF's cumprod(exclusive=True))
        trans = lib.cumprod(lib.cat([lib.ones_like(alpha[..., :1]), 1. - alpha + 1e-10], -1), -1)[..., :-1]
        weights = alpha * trans
        rgb_map = lib.sum(weights[..., None] * rgb, -2)
        return rgb_map

    m = NeRF()
    opt = lib.optim.Adam(m.parameters(), lr=5e-4)
    th = 0.4
    c2w = lib.tensor([[math.cos(th), 0., math.sin(th), 4 * math.sin(th)], [0., 1., 0., 0.],
                      [-math.sin(th), 0., math.cos(th), 4 * math.cos(th)], [0., 0., 0., 1.]])
    rays_o, rays_d = get_rays(c2w)
    target = lib.rand(H, W, 3)

    def loss():
        rgb = render_rays(m, rays_o, rays_d)
        return lib.mean(lib.square(rgb - target))
    return m, opt, loss


def _crf(lib):
    # (a BiLSTM-CRF tagger as the NER repos write it: Embedding, a bidirectional nn.LSTM over
    # pack_padded_sequence(enforce_sorted=False), emissions by a Linear, and kmkurn/pytorch-crf's
    # CRF: its mask check, the gold-path score by fancy indexing, the partition function by a
    # logsumexp recursion under torch.where; the mean negative log-likelihood, SGD + clipping)
    nn = lib.nn
    pack, unpack = nn.utils.rnn.pack_padded_sequence, nn.utils.rnn.pad_packed_sequence

    class CRF(nn.Module):
        def __init__(self, num_tags, batch_first=False):
            super().__init__()
            self.num_tags = num_tags
            self.batch_first = batch_first
            self.start_transitions = nn.Parameter(lib.empty(num_tags))
            self.end_transitions = nn.Parameter(lib.empty(num_tags))
            self.transitions = nn.Parameter(lib.empty(num_tags, num_tags))
            nn.init.uniform_(self.start_transitions, -0.1, 0.1)
            nn.init.uniform_(self.end_transitions, -0.1, 0.1)
            nn.init.uniform_(self.transitions, -0.1, 0.1)

        def forward(self, emissions, tags, mask=None, reduction="mean"):
            self._validate(emissions, tags=tags, mask=mask)
            if mask is None:
                mask = lib.ones_like(tags, dtype=lib.uint8)
            if self.batch_first:
                emissions = emissions.transpose(0, 1)
                tags = tags.transpose(0, 1)
                mask = mask.transpose(0, 1)
            numerator = self._compute_score(emissions, tags, mask)
            denominator = self._compute_normalizer(emissions, mask)
            llh = numerator - denominator
            if reduction == "sum":
                return llh.sum()
            if reduction == "mean":
                return llh.mean()
            return llh.sum() / mask.float().sum()

        def _validate(self, emissions, tags=None, mask=None):
            if emissions.dim() != 3:
                raise ValueError(f"emissions must have dimension of 3, got {emissions.dim()}")
            if emissions.size(2) != self.num_tags:
                raise ValueError(f"expected last dimension of emissions is {self.num_tags}, "
                                 f"got {emissions.size(2)}")
            if mask is not None:
                no_empty_seq = not self.batch_first and mask[0].all()
                no_empty_seq_bf = self.batch_first and mask[:, 0].all()
                if not no_empty_seq and not no_empty_seq_bf:
                    raise ValueError("mask of the first timestep must all be on")

        def _compute_score(self, emissions, tags, mask):
            seq_length, batch_size = tags.shape
            mask = mask.float()
            score = self.start_transitions[tags[0]]
            score += emissions[0, lib.arange(batch_size), tags[0]]
            for i in range(1, seq_length):
                score += self.transitions[tags[i - 1], tags[i]] * mask[i]
                score += emissions[i, lib.arange(batch_size), tags[i]] * mask[i]
            seq_ends = mask.long().sum(dim=0) - 1
            last_tags = tags[seq_ends, lib.arange(batch_size)]
            score += self.end_transitions[last_tags]
            return score

        def _compute_normalizer(self, emissions, mask):
            seq_length = emissions.size(0)
            score = self.start_transitions + emissions[0]
            for i in range(1, seq_length):
                broadcast_score = score.unsqueeze(2)
                broadcast_emissions = emissions[i].unsqueeze(1)
                next_score = broadcast_score + self.transitions + broadcast_emissions
                next_score = lib.logsumexp(next_score, dim=1)
                score = lib.where(mask[i].unsqueeze(1), next_score, score)
            score += self.end_transitions
            return lib.logsumexp(score, dim=1)

    class BiLSTM_CRF(nn.Module):
        def __init__(self, vocab_size, tagset_size, embedding_dim, hidden_dim):
            super().__init__()
            self.word_embeds = nn.Embedding(vocab_size, embedding_dim, padding_idx=0)
            self.lstm = nn.LSTM(embedding_dim, hidden_dim // 2, num_layers=1, bidirectional=True, batch_first=True)
            self.dropout = nn.Dropout(0.5)
            self.hidden2tag = nn.Linear(hidden_dim, tagset_size)
            self.crf = CRF(tagset_size, batch_first=True)

        def _get_lstm_features(self, sentence, lengths):
            embeds = self.dropout(self.word_embeds(sentence))
            packed = pack(embeds, lengths, batch_first=True, enforce_sorted=False)
            lstm_out, _ = self.lstm(packed)
            lstm_out, _ = unpack(lstm_out, batch_first=True, total_length=sentence.shape[1])
            return self.hidden2tag(self.dropout(lstm_out))

        def neg_log_likelihood(self, sentence, lengths, tags, mask):
            return -self.crf(self._get_lstm_features(sentence, lengths), tags, mask=mask)

    batch, max_len = 16, 24
    m = BiLSTM_CRF(2000, 9, 64, 128)
    opt = lib.optim.SGD(m.parameters(), lr=0.01, weight_decay=1e-4)
    lengths = lib.randint(6, max_len + 1, (batch,))
    lengths[0] = max_len
    mask = lib.arange(max_len)[None, :] < lengths[:, None]
    sentence = lib.randint(1, 2000, (batch, max_len)) * mask
    tags = lib.randint(0, 9, (batch, max_len)) * mask
    return m, opt, lambda: m.neg_log_likelihood(sentence, lengths, tags, mask), {"clip": 5.0}


def _translate(lib):
    # (PyTorch's "Language Translation with nn.Transformer" tutorial: sequence-first
    # nn.Transformer, token embeddings scaled by sqrt(d), the sin/cos positional buffer,
    # a float causal mask beside bool padding masks, xavier init, CrossEntropyLoss with
    # ignore_index=PAD, Adam(betas=(0.9, 0.98), eps=1e-9); at 2+2 layers, d=64, batch 16)
    nn = lib.nn
    PAD_IDX, BOS_IDX, EOS_IDX = 1, 2, 3
    SRC_VOCAB, TGT_VOCAB = 600, 500

    class PositionalEncoding(nn.Module):
        def __init__(self, emb_size, dropout, maxlen=5000):
            super(PositionalEncoding, self).__init__()
            den = lib.exp(- lib.arange(0, emb_size, 2) * math.log(10000) / emb_size)
            pos = lib.arange(0, maxlen).reshape(maxlen, 1)
            pos_embedding = lib.zeros((maxlen, emb_size))
            pos_embedding[:, 0::2] = lib.sin(pos * den)
            pos_embedding[:, 1::2] = lib.cos(pos * den)
            pos_embedding = pos_embedding.unsqueeze(-2)
            self.dropout = nn.Dropout(dropout)
            self.register_buffer("pos_embedding", pos_embedding)

        def forward(self, token_embedding):
            return self.dropout(token_embedding + self.pos_embedding[:token_embedding.size(0), :])

    class TokenEmbedding(nn.Module):
        def __init__(self, vocab_size, emb_size):
            super(TokenEmbedding, self).__init__()
            self.embedding = nn.Embedding(vocab_size, emb_size)
            self.emb_size = emb_size

        def forward(self, tokens):
            return self.embedding(tokens.long()) * math.sqrt(self.emb_size)

    class Seq2SeqTransformer(nn.Module):
        def __init__(self, num_encoder_layers, num_decoder_layers, emb_size, nhead, src_vocab_size,
                     tgt_vocab_size, dim_feedforward=512, dropout=0.1):
            super(Seq2SeqTransformer, self).__init__()
            self.transformer = nn.Transformer(d_model=emb_size, nhead=nhead, num_encoder_layers=num_encoder_layers,
                                              num_decoder_layers=num_decoder_layers,
                                              dim_feedforward=dim_feedforward, dropout=dropout)
            self.generator = nn.Linear(emb_size, tgt_vocab_size)
            self.src_tok_emb = TokenEmbedding(src_vocab_size, emb_size)
            self.tgt_tok_emb = TokenEmbedding(tgt_vocab_size, emb_size)
            self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout)

        def forward(self, src, trg, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, memory_key_padding_mask):
            src_emb = self.positional_encoding(self.src_tok_emb(src))
            tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
            outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None,
                                    src_padding_mask, tgt_padding_mask, memory_key_padding_mask)
            return self.generator(outs)

    def generate_square_subsequent_mask(sz):
        mask = (lib.triu(lib.ones((sz, sz))) == 1).transpose(0, 1)
        mask = mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, float(0.0))
        return mask

    def create_mask(src, tgt):
        src_seq_len = src.shape[0]
        tgt_seq_len = tgt.shape[0]
        tgt_mask = generate_square_subsequent_mask(tgt_seq_len)
        src_mask = lib.zeros((src_seq_len, src_seq_len)).type(lib.bool)
        src_padding_mask = (src == PAD_IDX).transpose(0, 1)
        tgt_padding_mask = (tgt == PAD_IDX).transpose(0, 1)
        return src_mask, tgt_mask, src_padding_mask, tgt_padding_mask

    def batch_of(vocab, n, lo, hi):
        # (collate_fn: BOS + tokens + EOS, padded with PAD to the longest, sequence-first)
        lens = lib.randint(lo, hi + 1, (n,))
        lens[0] = hi
        toks = lib.randint(4, vocab, (hi + 2, n))
        pos = lib.arange(hi + 2)[:, None]
        toks = lib.where(pos == 0, BOS_IDX, lib.where(pos == lens[None, :] + 1, EOS_IDX, toks))
        return lib.where(pos > lens[None, :] + 1, PAD_IDX, toks)

    m = Seq2SeqTransformer(2, 2, 64, 4, SRC_VOCAB, TGT_VOCAB, 128)
    for p in m.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD_IDX)
    opt = lib.optim.Adam(m.parameters(), lr=0.0001, betas=(0.9, 0.98), eps=1e-9)
    src, tgt = batch_of(SRC_VOCAB, 16, 8, 18), batch_of(TGT_VOCAB, 16, 8, 20)

    def loss():
        tgt_input = tgt[:-1, :]
        src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input)
        logits = m(src, tgt_input, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, src_padding_mask)
        tgt_out = tgt[1:, :]
        return loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
    return m, opt, loss
