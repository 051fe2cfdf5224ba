"""Six more training steps beside bench/untuned_models.py's, written as their reference code
and tutorials write them and run before llgrad was tuned on any of them (2026-12-05): a
BERT-style masked language model (token, position and segment embeddings, the tied decoder,
HF's 80/10/10 masking drawn each step, nn.TransformerEncoder under src_key_padding_mask,
the padded positions dropped by a boolean mask, cross_entropy(ignore_index=-100); AdamW
with a linear warm-up by LambdaLR), a Conformer keyword classifier (Conv2dSubsampling, the
macaron half-step FFNs with SiLU, nn.MultiheadAttention under key_padding_mask, the
convolution module's pointwise conv + GLU + depthwise conv + BatchNorm1d; a masked mean
pool), a CLIP-mini (a conv image tower and a causal text tower read at the EOT token,
projections, normalised embeddings, logit_scale.exp(), the symmetric cross-entropy, the
scale clamped after the step as OpenCLIP does), and in untuned_models_eighth_b.py a
DeepSpeech2-style CTC model (a Conv2d front-end, a packed bidirectional GRU, log_softmax,
F.ctc_loss), torchdiffeq's ode_demo (a fixed-step RK4 loop in Python over an MLP; RMSprop)
and a YOLOv5-style detection head (grid decoding by sigmoid and exp, CIoU under clamp,
BCEWithLogits on objectness and classes; SGD with Nesterov momentum).

    python bench/untuned_models_eighth.py [name,...] [--torch-compile]

Per model: torch eager, torch.compile (with --torch-compile), llgrad eager and llgrad compiled
(LLGRAD_COMPILE=sync, warm), 1 thread each, seeded alike (llgrad draws PyTorch's numbers);
the losses of the first 6 steps and the gradients and parameters after them compared with
torch's (as untuned_models_seventh.py does), and |loss - torch| at the 6th step; then blocks
of 3 steps interleaved, medians of 7."""
import math
import os
import sys

import untuned_models_eighth_b
import untuned_models_seventh
from untuned_models_fifth import training_step

NAMES = ("bert", "conformer", "clip", "ctc", "node", "yolo")


def build(lib, name):
    return training_step(lib, getattr(untuned_models_eighth_b, "_" + name, None) or
                         globals()["_" + name])


def _bert(lib):
    # (a BERT for pre-training as the from-scratch tutorials write it: BertEmbeddings' sum of
    # three embeddings, LayerNorm and dropout; post-norm GELU encoder layers; the MLM head's
    # transform and the decoder tied to the word embeddings; HF's
    # DataCollatorForLanguageModeling masking, drawn each step)
    nn, F = lib.nn, lib.nn.functional
    vocab, d, max_len, batch = 1000, 64, 32, 16
    PAD, CLS, SEP, MASK = 0, 1, 2, 3

    class BertMLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(vocab, d, padding_idx=PAD)
            self.position_embeddings = nn.Embedding(max_len, d)
            self.token_type_embeddings = nn.Embedding(2, d)
            self.LayerNorm = nn.LayerNorm(d, eps=1e-12)
            self.dropout = nn.Dropout(0.1)
            layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.1, activation="gelu",
                                               batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.transform = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d, eps=1e-12))
            self.decoder = nn.Linear(d, vocab)
            self.decoder.weight = self.word_embeddings.weight

        def forward(self, input_ids, token_type_ids, attention_mask):
            seq_length = input_ids.size(1)
            position_ids = lib.arange(seq_length, dtype=lib.long).unsqueeze(0).expand_as(input_ids)
            embeddings = (self.word_embeddings(input_ids) + self.position_embeddings(position_ids) +
                          self.token_type_embeddings(token_type_ids))
            h = self.dropout(self.LayerNorm(embeddings))
            h = self.encoder(h, src_key_padding_mask=attention_mask == 0)
            return self.decoder(self.transform(h))

    m = BertMLM()
    for module in m.modules():      # (BertPreTrainedModel._init_weights, initializer_range 0.02)
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(mean=0.0, std=0.02)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=0.02)
            if module.padding_idx is not None:
                module.weight.data[module.padding_idx].zero_()
    opt = lib.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)
    warmup = 3
    sched = lib.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    lengths = lib.randint(max_len // 2, max_len + 1, (batch,))
    attention_mask = (lib.arange(max_len)[None, :] < lengths[:, None]).long()
    ids = lib.randint(4, vocab, (batch, max_len))
    ids[:, 0] = CLS
    ids[lib.arange(batch), lengths - 1] = SEP
    ids = ids.masked_fill(attention_mask == 0, PAD)
    half = lib.arange(max_len)[None, :] >= (lengths[:, None] // 2)
    token_type_ids = (half & (attention_mask == 1)).long()
    special = (ids == PAD) | (ids == CLS) | (ids == SEP)

    def mask_tokens():
        inputs, labels = ids.clone(), ids.clone()
        probability_matrix = lib.full(labels.shape, 0.15)
        probability_matrix.masked_fill_(special, value=0.0)
        masked_indices = lib.bernoulli(probability_matrix).bool()
        labels[~masked_indices] = -100
        indices_replaced = lib.bernoulli(lib.full(labels.shape, 0.8)).bool() & masked_indices
        inputs[indices_replaced] = MASK
        indices_random = (lib.bernoulli(lib.full(labels.shape, 0.5)).bool() & masked_indices &
                          ~indices_replaced)
        random_words = lib.randint(vocab, labels.shape, dtype=lib.long)
        inputs[indices_random] = random_words[indices_random]
        return inputs, labels

    def loss():
        inputs, labels = mask_tokens()
        logits = m(inputs, token_type_ids, attention_mask)
        keep = attention_mask.bool()
        return F.cross_entropy(logits[keep], labels[keep], ignore_index=-100)
    return m, opt, loss, {"scheduler": sched, "clip": 1.0}


def _conformer(lib):
    # (sooftware/conformer's blocks as written there: Conv2dSubsampling, FeedForwardModule,
    # MultiHeadedSelfAttentionModule (nn.MultiheadAttention here in place of its relative
    # positional attention), ConformerConvModule, ResidualConnectionModule with the 0.5 factor;
    # a keyword classifier over a masked mean of the frames)
    nn, F = lib.nn, lib.nn.functional
    batch, frames, n_mels, d, n_cls = 8, 96, 40, 64, 12

    class Conv2dSubsampling(nn.Module):
        def __init__(self, in_channels, out_channels):
            super().__init__()
            self.sequential = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=2), nn.ReLU(),
                nn.Conv2d(out_channels, out_channels, kernel_size=3, stride=2), nn.ReLU())

        def forward(self, inputs, input_lengths):
            outputs = self.sequential(inputs.unsqueeze(1))
            batch_size, channels, subsampled_lengths, sumsampled_dim = outputs.size()
            outputs = outputs.permute(0, 2, 1, 3)
            outputs = outputs.contiguous().view(batch_size, subsampled_lengths, channels * sumsampled_dim)
            output_lengths = (input_lengths >> 2) - 1
            return outputs, output_lengths

    class FeedForwardModule(nn.Module):
        def __init__(self, dim, expansion_factor=4, dropout_p=0.1):
            super().__init__()
            self.sequential = nn.Sequential(
                nn.LayerNorm(dim), nn.Linear(dim, dim * expansion_factor), nn.SiLU(),
                nn.Dropout(p=dropout_p), nn.Linear(dim * expansion_factor, dim), nn.Dropout(p=dropout_p))

        def forward(self, inputs):
            return self.sequential(inputs)

    class ConformerConvModule(nn.Module):
        def __init__(self, in_channels, kernel_size=15, expansion_factor=2, dropout_p=0.1):
            super().__init__()
            self.norm = nn.LayerNorm(in_channels)
            self.pointwise1 = nn.Conv1d(in_channels, in_channels * expansion_factor, 1)
            self.glu = nn.GLU(dim=1)
            self.depthwise = nn.Conv1d(in_channels, in_channels, kernel_size, groups=in_channels,
                                       padding=(kernel_size - 1) // 2, bias=False)
            self.bn = nn.BatchNorm1d(in_channels)
            self.swish = nn.SiLU()
            self.pointwise2 = nn.Conv1d(in_channels, in_channels, 1)
            self.dropout = nn.Dropout(p=dropout_p)

        def forward(self, inputs):
            x = self.norm(inputs).transpose(1, 2)
            x = self.glu(self.pointwise1(x))
            x = self.swish(self.bn(self.depthwise(x)))
            return self.dropout(self.pointwise2(x)).transpose(1, 2)

    class MultiHeadedSelfAttentionModule(nn.Module):
        def __init__(self, d_model, num_heads, dropout_p=0.1):
            super().__init__()
            self.layer_norm = nn.LayerNorm(d_model)
            self.attention = nn.MultiheadAttention(d_model, num_heads, dropout=dropout_p, batch_first=True)
            self.dropout = nn.Dropout(p=dropout_p)

        def forward(self, inputs, key_padding_mask):
            x = self.layer_norm(inputs)
            x, _ = self.attention(x, x, x, key_padding_mask=key_padding_mask, need_weights=False)
            return self.dropout(x)

    class ConformerBlock(nn.Module):
        def __init__(self, dim, heads=4):
            super().__init__()
            self.ff1, self.ff2 = FeedForwardModule(dim), FeedForwardModule(dim)
            self.mhsa = MultiHeadedSelfAttentionModule(dim, heads)
            self.conv = ConformerConvModule(dim)
            self.norm = nn.LayerNorm(dim)

        def forward(self, x, key_padding_mask):
            x = x + 0.5 * self.ff1(x)
            x = x + self.mhsa(x, key_padding_mask)
            x = x + self.conv(x)
            x = x + 0.5 * self.ff2(x)
            return self.norm(x)

    class ConformerClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv_subsample = Conv2dSubsampling(1, d)
            self.input_projection = nn.Sequential(nn.Linear(d * (((n_mels - 1) // 2 - 1) // 2), d),
                                                  nn.Dropout(p=0.1))
            self.layers = nn.ModuleList([ConformerBlock(d) for _ in range(2)])
            self.fc = nn.Linear(d, n_cls)

        def forward(self, inputs, input_lengths):
            outputs, output_lengths = self.conv_subsample(inputs, input_lengths)
            outputs = self.input_projection(outputs)
            pad = lib.arange(outputs.size(1))[None, :] >= output_lengths[:, None]
            for layer in self.layers:
                outputs = layer(outputs, pad)
            keep = (~pad).unsqueeze(-1).float()
            pooled = (outputs * keep).sum(1) / keep.sum(1)
            return self.fc(pooled)

    m = ConformerClassifier()
    opt = lib.optim.Adam(m.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    inputs = lib.randn(batch, frames, n_mels)
    input_lengths = lib.randint(frames // 2, frames + 1, (batch,))
    input_lengths[0] = frames
    inputs = inputs * (lib.arange(frames)[None, :, None] < input_lengths[:, None, None])
    targets = lib.randint(0, n_cls, (batch,))
    return m, opt, lambda: F.cross_entropy(m(inputs, input_lengths), targets, label_smoothing=0.1)


def _clip(lib):
    # (openai/CLIP's model.py shapes in miniature: encode_image, encode_text's causal
    # transformer read at text.argmax(dim=-1) (the EOT token has the largest id), the
    # projections, the normalisation, logit_scale initialised to log(1/0.07);
    # open_clip's ClipLoss and its clamp of logit_scale to [0, log 100] after the step)
    nn, F = lib.nn, lib.nn.functional
    batch, ctx, vocab, width, embed_dim = 32, 16, 500, 64, 32
    EOT = vocab - 1

    class ImageEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(
                nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
                nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                nn.Conv2d(64, width, 3, stride=2, padding=1), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                nn.AdaptiveAvgPool2d(1), nn.Flatten())

        def forward(self, x):
            return self.net(x)

    class CLIP(nn.Module):
        def __init__(self):
            super().__init__()
            self.visual = ImageEncoder()
            self.image_projection = nn.Parameter(lib.empty(width, embed_dim))
            self.token_embedding = nn.Embedding(vocab, width)
            self.positional_embedding = nn.Parameter(lib.empty(ctx, width))
            layer = nn.TransformerEncoderLayer(width, 4, 4 * width, dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=True)
            self.transformer = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.ln_final = nn.LayerNorm(width)
            self.text_projection = nn.Parameter(lib.empty(width, embed_dim))
            self.logit_scale = nn.Parameter(lib.ones([]) * math.log(1 / 0.07))
            nn.init.normal_(self.token_embedding.weight, std=0.02)
            nn.init.normal_(self.positional_embedding, std=0.01)
            nn.init.normal_(self.image_projection, std=width ** -0.5)
            nn.init.normal_(self.text_projection, std=width ** -0.5)
            self.register_buffer("attn_mask", lib.empty(ctx, ctx).fill_(float("-inf")).triu_(1),
                                 persistent=False)

        def encode_image(self, image):
            return self.visual(image) @ self.image_projection

        def encode_text(self, text):
            x = self.token_embedding(text) + self.positional_embedding
            x = self.transformer(x, mask=self.attn_mask)
            x = self.ln_final(x)
            return x[lib.arange(x.shape[0]), text.argmax(dim=-1)] @ self.text_projection

        def forward(self, image, text):
            image_features = self.encode_image(image)
            text_features = self.encode_text(text)
            image_features = image_features / image_features.norm(dim=1, keepdim=True)
            text_features = text_features / text_features.norm(dim=1, keepdim=True)
            logit_scale = self.logit_scale.exp()
            logits_per_image = logit_scale * image_features @ text_features.t()
            return logits_per_image, logits_per_image.t()

    m = CLIP()
    opt = lib.optim.AdamW(m.parameters(), lr=5e-4, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.2)
    images = lib.randn(batch, 3, 32, 32)
    lengths = lib.randint(4, ctx, (batch,))
    text = lib.randint(1, EOT, (batch, ctx))
    text[lib.arange(batch), lengths] = EOT
    text = text.masked_fill(lib.arange(ctx)[None, :] > lengths[:, None], 0)
    labels = lib.arange(batch, dtype=lib.long)

    def loss():
        logits_per_image, logits_per_text = m(images, text)
        return (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_text, labels)) / 2

    def clamp_scale():
        with lib.no_grad():
            m.logit_scale.clamp_(0, math.log(100))
    return m, opt, loss, {"after": clamp_scale}


def main(names, with_torch_compile):
    return untuned_models_seventh.main(names, with_torch_compile, build, steps=6)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    chosen = args[0].split(",") if args else list(NAMES)
    if "-h" in sys.argv or "--help" in sys.argv or set(chosen) - set(NAMES):
        sys.exit(__doc__ + f"\n\nmodels: {', '.join(NAMES)}")
    os.environ.setdefault("LLGRAD_COMPILE", "sync")     # (read when llgrad is imported)
    os.environ.setdefault("LLGRAD_NUM_THREADS", "1")
    main(chosen, "--torch-compile" in sys.argv)
