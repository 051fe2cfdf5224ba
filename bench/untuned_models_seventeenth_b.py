"""untuned_models_seventeenth.py's ArcFace and T5 training steps: _arcface(lib, small) and
_t5(lib, small) -> (model, optimiser, loss closure[, extras]) as the fifth set's
training_step takes them."""
import math


def _arcface(lib, small):
    # (arcface-pytorch's models/resnet.py resnet_face18 (IRBlock, SEBlock, ResNetFace),
    # models/metrics.py ArcMarginProduct (s=30, m=0.5, easy_margin False), models/focal_loss.py
    # FocalLoss(gamma=2) and train.py's SGD over the two modules' param groups with StepLR; the
    # widths and the image a quarter of its 128 x 128 grey faces' so a step fits the machine)
    nn, F = lib.nn, lib.nn.functional
    width, size, layers, batch, classes = ((16, 16, [1, 1, 1, 1], 4, 6) if small
                                           else (16, 64, [2, 2, 2, 2], 32, 100))

    def conv3x3(in_planes, out_planes, stride=1):
        return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)

    class SEBlock(nn.Module):
        def __init__(self, channel, reduction=16):
            super(SEBlock, self).__init__()
            self.avg_pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Sequential(nn.Linear(channel, channel // reduction), nn.PReLU(),
                                    nn.Linear(channel // reduction, channel), nn.Sigmoid())

        def forward(self, x):
            b, c, _, _ = x.size()
            y = self.avg_pool(x).view(b, c)
            y = self.fc(y).view(b, c, 1, 1)
            return x * y

    class IRBlock(nn.Module):
        expansion = 1

        def __init__(self, inplanes, planes, stride=1, downsample=None, use_se=True):
            super(IRBlock, self).__init__()
            self.bn0 = nn.BatchNorm2d(inplanes)
            self.conv1 = conv3x3(inplanes, inplanes)
            self.bn1 = nn.BatchNorm2d(inplanes)
            self.prelu = nn.PReLU()
            self.conv2 = conv3x3(inplanes, planes, stride)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = downsample
            self.stride = stride
            self.use_se = use_se
            if self.use_se:
                self.se = SEBlock(planes)

        def forward(self, x):
            residual = x
            out = self.bn0(x)
            out = self.conv1(out)
            out = self.bn1(out)
            out = self.prelu(out)
            out = self.conv2(out)
            out = self.bn2(out)
            if self.use_se:
                out = self.se(out)
            if self.downsample is not None:
                residual = self.downsample(x)
            out += residual
            out = self.prelu(out)
            return out

    class ResNetFace(nn.Module):
        def __init__(self, block, layers, use_se=True):
            self.inplanes = width
            self.use_se = use_se
            super(ResNetFace, self).__init__()
            self.conv1 = nn.Conv2d(1, width, kernel_size=3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.prelu = nn.PReLU()
            self.maxpool = nn.MaxPool2d(kernel_size=2, stride=2)
            self.layer1 = self._make_layer(block, width, layers[0])
            self.layer2 = self._make_layer(block, 2 * width, layers[1], stride=2)
            self.layer3 = self._make_layer(block, 4 * width, layers[2], stride=2)
            self.layer4 = self._make_layer(block, 8 * width, layers[3], stride=2)
            self.bn4 = nn.BatchNorm2d(8 * width)
            self.dropout = nn.Dropout()
            self.fc5 = nn.Linear(8 * width * (size // 16) ** 2, 512)
            self.bn5 = nn.BatchNorm1d(512)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.xavier_normal_(m.weight)
                elif isinstance(m, nn.BatchNorm2d) or isinstance(m, nn.BatchNorm1d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.Linear):
                    nn.init.xavier_normal_(m.weight)
                    nn.init.constant_(m.bias, 0)

        def _make_layer(self, block, planes, blocks, stride=1):
            downsample = None
            if stride != 1 or self.inplanes != planes * block.expansion:
                downsample = nn.Sequential(
                    nn.Conv2d(self.inplanes, planes * block.expansion, kernel_size=1, stride=stride, bias=False),
                    nn.BatchNorm2d(planes * block.expansion))
            layers = [block(self.inplanes, planes, stride, downsample, use_se=self.use_se)]
            self.inplanes = planes
            for i in range(1, blocks):
                layers.append(block(self.inplanes, planes, use_se=self.use_se))
            return nn.Sequential(*layers)

        def forward(self, x):
            x = self.conv1(x)
            x = self.bn1(x)
            x = self.prelu(x)
            x = self.maxpool(x)
            x = self.layer1(x)
            x = self.layer2(x)
            x = self.layer3(x)
            x = self.layer4(x)
            x = self.bn4(x)
            x = self.dropout(x)
            x = x.view(x.size(0), -1)
            x = self.fc5(x)
            x = self.bn5(x)
            return x

    class ArcMarginProduct(nn.Module):
        def __init__(self, in_features, out_features, s=30.0, m=0.50, easy_margin=False):
            super(ArcMarginProduct, self).__init__()
            self.in_features = in_features
            self.out_features = out_features
            self.s = s
            self.m = m
            # (a FloatTensor there: the default dtype here, so that the tests run it in float64)
            self.weight = nn.Parameter(lib.empty(out_features, in_features))
            nn.init.xavier_uniform_(self.weight)
            self.easy_margin = easy_margin
            self.cos_m = math.cos(m)
            self.sin_m = math.sin(m)
            self.th = math.cos(math.pi - m)
            self.mm = math.sin(math.pi - m) * m

        def forward(self, input, label):
            cosine = F.linear(F.normalize(input), F.normalize(self.weight))
            sine = lib.sqrt((1.0 - lib.pow(cosine, 2)).clamp(0, 1))
            phi = cosine * self.cos_m - sine * self.sin_m
            if self.easy_margin:
                phi = lib.where(cosine > 0, phi, cosine)
            else:
                phi = lib.where(cosine > self.th, phi, cosine - self.mm)
            one_hot = lib.zeros(cosine.size())
            one_hot.scatter_(1, label.view(-1, 1).long(), 1)
            output = (one_hot * phi) + ((1.0 - one_hot) * cosine)
            output *= self.s
            return output

    class FocalLoss(nn.Module):
        def __init__(self, gamma=0, eps=1e-7):
            super(FocalLoss, self).__init__()
            self.gamma = gamma
            self.eps = eps
            self.ce = lib.nn.CrossEntropyLoss()

        def forward(self, input, target):
            logp = self.ce(input, target)
            p = lib.exp(-logp)
            loss = (1 - p) ** self.gamma * logp
            return loss.mean()

    model = ResNetFace(IRBlock, layers, use_se=True)
    metric_fc = ArcMarginProduct(512, classes, s=30, m=0.5, easy_margin=False)
    criterion = FocalLoss(gamma=2)
    optimizer = lib.optim.SGD([{'params': model.parameters()}, {'params': metric_fc.parameters()}],
                              lr=1e-1, weight_decay=5e-4)
    scheduler = lib.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.1)
    data_input = lib.randn(batch, 1, size, size)
    label = lib.randint(0, classes, (batch,))

    def loss():
        feature = model(data_input)
        output = metric_fc(feature, label)
        return criterion(output, label)
    both = nn.ModuleDict({"model": model, "metric_fc": metric_fc})
    return both, optimizer, loss, {"scheduler": scheduler}


def _t5(lib, small):
    # (transformers' modeling_t5.py: T5LayerNorm, T5DenseActDense, T5Attention with its
    # _relative_position_bucket and compute_bias, T5Block, T5Stack, and
    # T5ForConditionalGeneration's forward with labels, written out without the cache and head
    # masks; t5-small's shape scaled down; torch.optim.Adafactor at its default lr)
    nn, F = lib.nn, lib.nn.functional
    d_model, d_kv, n_heads, d_ff, n_layers, vocab, batch, src, tgt = (
        (16, 4, 2, 32, 1, 20, 2, 9, 6) if small else (256, 32, 8, 1024, 4, 1000, 16, 64, 32))
    num_buckets, max_distance, dropout_rate, pad, start = 32, 128, 0.1, 0, 0

    class T5LayerNorm(nn.Module):
        def __init__(self, hidden_size, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(lib.ones(hidden_size))
            self.variance_epsilon = eps

        def forward(self, hidden_states):
            variance = hidden_states.to(lib.float32).pow(2).mean(-1, keepdim=True)
            hidden_states = hidden_states * lib.rsqrt(variance + self.variance_epsilon)
            return self.weight * hidden_states

    class T5LayerFF(nn.Module):
        def __init__(self):
            super().__init__()
            self.wi = nn.Linear(d_model, d_ff, bias=False)
            self.wo = nn.Linear(d_ff, d_model, bias=False)
            self.layer_norm = T5LayerNorm(d_model)
            self.dropout = nn.Dropout(dropout_rate)

        def forward(self, hidden_states):
            forwarded = self.layer_norm(hidden_states)
            forwarded = self.wo(self.dropout(F.relu(self.wi(forwarded))))
            return hidden_states + self.dropout(forwarded)

    class T5Attention(nn.Module):
        def __init__(self, is_decoder, has_relative_attention_bias=False):
            super().__init__()
            self.is_decoder = is_decoder
            self.has_relative_attention_bias = has_relative_attention_bias
            self.inner_dim = n_heads * d_kv
            self.q = nn.Linear(d_model, self.inner_dim, bias=False)
            self.k = nn.Linear(d_model, self.inner_dim, bias=False)
            self.v = nn.Linear(d_model, self.inner_dim, bias=False)
            self.o = nn.Linear(self.inner_dim, d_model, bias=False)
            if self.has_relative_attention_bias:
                self.relative_attention_bias = nn.Embedding(num_buckets, n_heads)

        @staticmethod
        def _relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
            relative_buckets = 0
            if bidirectional:
                num_buckets //= 2
                relative_buckets += (relative_position > 0).to(lib.long) * num_buckets
                relative_position = lib.abs(relative_position)
            else:
                relative_position = -lib.min(relative_position, lib.zeros_like(relative_position))
            max_exact = num_buckets // 2
            is_small = relative_position < max_exact
            relative_position_if_large = max_exact + (
                lib.log(relative_position.float() / max_exact)
                / math.log(max_distance / max_exact)
                * (num_buckets - max_exact)
            ).to(lib.long)
            relative_position_if_large = lib.min(
                relative_position_if_large, lib.full_like(relative_position_if_large, num_buckets - 1))
            relative_buckets += lib.where(is_small, relative_position, relative_position_if_large)
            return relative_buckets

        def compute_bias(self, query_length, key_length):
            context_position = lib.arange(query_length, dtype=lib.long)[:, None]
            memory_position = lib.arange(key_length, dtype=lib.long)[None, :]
            relative_position = memory_position - context_position
            relative_position_bucket = self._relative_position_bucket(
                relative_position, bidirectional=(not self.is_decoder), num_buckets=num_buckets,
                max_distance=max_distance)
            values = self.relative_attention_bias(relative_position_bucket)
            return values.permute([2, 0, 1]).unsqueeze(0)

        def forward(self, hidden_states, mask=None, key_value_states=None, position_bias=None):
            batch_size, seq_length = hidden_states.shape[:2]
            is_cross = key_value_states is not None
            query_states = self.q(hidden_states).view(batch_size, -1, n_heads, d_kv).transpose(1, 2)
            current_states = key_value_states if is_cross else hidden_states
            key_states = self.k(current_states).view(batch_size, -1, n_heads, d_kv).transpose(1, 2)
            value_states = self.v(current_states).view(batch_size, -1, n_heads, d_kv).transpose(1, 2)
            scores = lib.matmul(query_states, key_states.transpose(3, 2))
            if position_bias is None:
                key_length = key_states.shape[-2]
                if not self.has_relative_attention_bias:
                    position_bias = lib.zeros((1, n_heads, seq_length, key_length), dtype=scores.dtype)
                else:
                    position_bias = self.compute_bias(seq_length, key_length)
                if mask is not None:
                    position_bias = position_bias + mask
            scores += position_bias
            attn_weights = F.softmax(scores.float(), dim=-1).type_as(scores)
            attn_weights = F.dropout(attn_weights, p=dropout_rate, training=self.training)
            attn_output = lib.matmul(attn_weights, value_states)
            attn_output = attn_output.transpose(1, 2).contiguous().view(batch_size, -1, self.inner_dim)
            return self.o(attn_output), position_bias

    class T5LayerAttention(nn.Module):      # (T5LayerSelfAttention and T5LayerCrossAttention)
        def __init__(self, is_decoder, has_relative_attention_bias=False):
            super().__init__()
            self.attention = T5Attention(is_decoder, has_relative_attention_bias)
            self.layer_norm = T5LayerNorm(d_model)
            self.dropout = nn.Dropout(dropout_rate)

        def forward(self, hidden_states, mask=None, key_value_states=None, position_bias=None):
            normed_hidden_states = self.layer_norm(hidden_states)
            attention_output, position_bias = self.attention(
                normed_hidden_states, mask=mask, key_value_states=key_value_states, position_bias=position_bias)
            return hidden_states + self.dropout(attention_output), position_bias

    class T5Block(nn.Module):
        def __init__(self, is_decoder, has_relative_attention_bias=False):
            super().__init__()
            self.is_decoder = is_decoder
            self.layer = nn.ModuleList([T5LayerAttention(is_decoder, has_relative_attention_bias)])
            if is_decoder:
                self.layer.append(T5LayerAttention(is_decoder, False))
            self.layer.append(T5LayerFF())

        def forward(self, hidden_states, attention_mask, position_bias, encoder_hidden_states=None,
                    encoder_attention_mask=None, encoder_decoder_position_bias=None):
            hidden_states, position_bias = self.layer[0](hidden_states, mask=attention_mask,
                                                         position_bias=position_bias)
            if self.is_decoder:
                hidden_states, encoder_decoder_position_bias = self.layer[1](
                    hidden_states, mask=encoder_attention_mask, key_value_states=encoder_hidden_states,
                    position_bias=encoder_decoder_position_bias)
            hidden_states = self.layer[-1](hidden_states)
            return hidden_states, position_bias, encoder_decoder_position_bias

    class T5Stack(nn.Module):
        def __init__(self, embed_tokens, is_decoder):
            super().__init__()
            self.embed_tokens = embed_tokens
            self.is_decoder = is_decoder
            self.block = nn.ModuleList([T5Block(is_decoder, has_relative_attention_bias=bool(i == 0))
                                        for i in range(n_layers)])
            self.final_layer_norm = T5LayerNorm(d_model)
            self.dropout = nn.Dropout(dropout_rate)

        def forward(self, input_ids, attention_mask, encoder_hidden_states=None, encoder_attention_mask=None):
            inputs_embeds = self.embed_tokens(input_ids)
            batch_size, seq_length = input_ids.shape
            dtype = inputs_embeds.dtype
            if self.is_decoder:     # (get_extended_attention_mask's causal mask)
                seq_ids = lib.arange(seq_length)
                causal_mask = seq_ids[None, None, :].repeat(batch_size, seq_length, 1) <= seq_ids[None, :, None]
                causal_mask = causal_mask.to(attention_mask.dtype)
                extended = causal_mask[:, None, :, :] * attention_mask[:, None, None, :]
            else:
                extended = attention_mask[:, None, None, :]
            extended = (1.0 - extended.to(dtype)) * lib.finfo(dtype).min
            encoder_extended = None
            if encoder_attention_mask is not None:
                encoder_extended = (1.0 - encoder_attention_mask[:, None, None, :].to(dtype)) * lib.finfo(dtype).min
            hidden_states = self.dropout(inputs_embeds)
            position_bias = encoder_decoder_position_bias = None
            for layer_module in self.block:
                hidden_states, position_bias, encoder_decoder_position_bias = layer_module(
                    hidden_states, extended, position_bias, encoder_hidden_states, encoder_extended,
                    encoder_decoder_position_bias)
            hidden_states = self.final_layer_norm(hidden_states)
            return self.dropout(hidden_states)

    class T5ForConditionalGeneration(nn.Module):
        def __init__(self):
            super().__init__()
            self.shared = nn.Embedding(vocab, d_model)
            self.encoder = T5Stack(self.shared, is_decoder=False)
            self.decoder = T5Stack(self.shared, is_decoder=True)
            self.lm_head = nn.Linear(d_model, vocab, bias=False)
            self.lm_head.weight = self.shared.weight        # (tie_word_embeddings)
            factor = 1.0        # (_init_weights' T5 initialisation)
            self.shared.weight.data.normal_(mean=0.0, std=factor * 1.0)
            for m in self.modules():
                if isinstance(m, T5Attention):
                    m.q.weight.data.normal_(mean=0.0, std=factor * ((d_model * d_kv) ** -0.5))
                    m.k.weight.data.normal_(mean=0.0, std=factor * (d_model ** -0.5))
                    m.v.weight.data.normal_(mean=0.0, std=factor * (d_model ** -0.5))
                    m.o.weight.data.normal_(mean=0.0, std=factor * ((n_heads * d_kv) ** -0.5))
                    if m.has_relative_attention_bias:
                        m.relative_attention_bias.weight.data.normal_(mean=0.0, std=factor * (d_model ** -0.5))
                elif isinstance(m, T5LayerFF):
                    m.wi.weight.data.normal_(mean=0.0, std=factor * (d_model ** -0.5))
                    m.wo.weight.data.normal_(mean=0.0, std=factor * (d_ff ** -0.5))

        def _shift_right(self, input_ids):
            shifted_input_ids = input_ids.new_zeros(input_ids.shape)
            shifted_input_ids[..., 1:] = input_ids[..., :-1].clone()
            shifted_input_ids[..., 0] = start
            shifted_input_ids.masked_fill_(shifted_input_ids == -100, pad)
            return shifted_input_ids

        def forward(self, input_ids, attention_mask, labels):
            hidden_states = self.encoder(input_ids, attention_mask)
            decoder_input_ids = self._shift_right(labels)
            decoder_attention_mask = (decoder_input_ids != pad).long()
            decoder_attention_mask[:, 0] = 1
            sequence_output = self.decoder(decoder_input_ids, decoder_attention_mask,
                                           encoder_hidden_states=hidden_states,
                                           encoder_attention_mask=attention_mask)
            sequence_output = sequence_output * (d_model ** -0.5)
            lm_logits = self.lm_head(sequence_output)
            loss_fct = nn.CrossEntropyLoss(ignore_index=-100)
            return loss_fct(lm_logits.view(-1, lm_logits.size(-1)), labels.view(-1))

    model = T5ForConditionalGeneration()
    optimizer = lib.optim.Adafactor(model.parameters())
    src_len = lib.randint(src // 2, src + 1, (batch,))
    tgt_len = lib.randint(tgt // 2, tgt + 1, (batch,))
    input_ids = lib.randint(1, vocab, (batch, src))
    attention_mask = (lib.arange(src)[None, :] < src_len[:, None]).long()
    input_ids = input_ids * attention_mask      # (padded with pad = 0)
    labels = lib.randint(1, vocab, (batch, tgt))
    labels = labels.masked_fill(lib.arange(tgt)[None, :] >= tgt_len[:, None], -100)
    return model, optimizer, lambda: model(input_ids, attention_mask, labels)
