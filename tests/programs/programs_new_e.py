"""Programs of common kinds: the BiLSTM-CRF tagger of PyTorch's "Advanced: Making Dynamic
Decisions" tutorial (forward algorithm, Viterbi decoding); an image-captioning model (a
CNN encoder, an LSTM decoder over packed captions, greedy sampling). Programs
`f(torch, env)`, see tutorial_harness.py."""


def bilstm_crf(torch, env):
    nn, optim = torch.nn, torch.optim
    START_TAG, STOP_TAG = "<START>", "<STOP>"
    EMBEDDING_DIM, HIDDEN_DIM = 5, 4

    def argmax(vec):
        _, idx = torch.max(vec, 1)
        return idx.item()

    def prepare_sequence(seq, to_ix):
        idxs = [to_ix[w] for w in seq]
        return torch.tensor(idxs, dtype=torch.long)

    def log_sum_exp(vec):
        max_score = vec[0, argmax(vec)]
        max_score_broadcast = max_score.view(1, -1).expand(1, vec.size()[1])
        return max_score + torch.log(torch.sum(torch.exp(vec - max_score_broadcast)))

    class BiLSTM_CRF(nn.Module):
        def __init__(self, vocab_size, tag_to_ix, embedding_dim, hidden_dim):
            super(BiLSTM_CRF, self).__init__()
            self.embedding_dim = embedding_dim
            self.hidden_dim = hidden_dim
            self.vocab_size = vocab_size
            self.tag_to_ix = tag_to_ix
            self.tagset_size = len(tag_to_ix)
            self.word_embeds = nn.Embedding(vocab_size, embedding_dim)
            self.lstm = nn.LSTM(embedding_dim, hidden_dim // 2, num_layers=1, bidirectional=True)
            self.hidden2tag = nn.Linear(hidden_dim, self.tagset_size)
            self.transitions = nn.Parameter(torch.randn(self.tagset_size, self.tagset_size))
            self.transitions.data[tag_to_ix[START_TAG], :] = -10000
            self.transitions.data[:, tag_to_ix[STOP_TAG]] = -10000
            self.hidden = self.init_hidden()

        def init_hidden(self):
            return (torch.zeros(2, 1, self.hidden_dim // 2),
                    torch.zeros(2, 1, self.hidden_dim // 2))

        def _forward_alg(self, feats):
            init_alphas = torch.full((1, self.tagset_size), -10000.)
            init_alphas[0][self.tag_to_ix[START_TAG]] = 0.
            forward_var = init_alphas
            for feat in feats:
                alphas_t = []
                for next_tag in range(self.tagset_size):
                    emit_score = feat[next_tag].view(1, -1).expand(1, self.tagset_size)
                    trans_score = self.transitions[next_tag].view(1, -1)
                    next_tag_var = forward_var + trans_score + emit_score
                    alphas_t.append(log_sum_exp(next_tag_var).view(1))
                forward_var = torch.cat(alphas_t).view(1, -1)
            terminal_var = forward_var + self.transitions[self.tag_to_ix[STOP_TAG]]
            return log_sum_exp(terminal_var)

        def _get_lstm_features(self, sentence):
            self.hidden = self.init_hidden()
            embeds = self.word_embeds(sentence).view(len(sentence), 1, -1)
            lstm_out, self.hidden = self.lstm(embeds, self.hidden)
            lstm_out = lstm_out.view(len(sentence), self.hidden_dim)
            return self.hidden2tag(lstm_out)

        def _score_sentence(self, feats, tags):
            score = torch.zeros(1)
            tags = torch.cat([torch.tensor([self.tag_to_ix[START_TAG]], dtype=torch.long), tags])
            for i, feat in enumerate(feats):
                score = score + self.transitions[tags[i + 1], tags[i]] + feat[tags[i + 1]]
            return score + self.transitions[self.tag_to_ix[STOP_TAG], tags[-1]]

        def _viterbi_decode(self, feats):
            backpointers = []
            init_vvars = torch.full((1, self.tagset_size), -10000.)
            init_vvars[0][self.tag_to_ix[START_TAG]] = 0
            forward_var = init_vvars
            for feat in feats:
                bptrs_t = []
                viterbivars_t = []
                for next_tag in range(self.tagset_size):
                    next_tag_var = forward_var + self.transitions[next_tag]
                    best_tag_id = argmax(next_tag_var)
                    bptrs_t.append(best_tag_id)
                    viterbivars_t.append(next_tag_var[0][best_tag_id].view(1))
                forward_var = (torch.cat(viterbivars_t) + feat).view(1, -1)
                backpointers.append(bptrs_t)
            terminal_var = forward_var + self.transitions[self.tag_to_ix[STOP_TAG]]
            best_tag_id = argmax(terminal_var)
            path_score = terminal_var[0][best_tag_id]
            best_path = [best_tag_id]
            for bptrs_t in reversed(backpointers):
                best_tag_id = bptrs_t[best_tag_id]
                best_path.append(best_tag_id)
            start = best_path.pop()
            assert start == self.tag_to_ix[START_TAG]
            best_path.reverse()
            return path_score, best_path

        def neg_log_likelihood(self, sentence, tags):
            feats = self._get_lstm_features(sentence)
            forward_score = self._forward_alg(feats)
            gold_score = self._score_sentence(feats, tags)
            return forward_score - gold_score

        def forward(self, sentence):
            lstm_feats = self._get_lstm_features(sentence)
            score, tag_seq = self._viterbi_decode(lstm_feats)
            return score, tag_seq

    training_data = [("the wall street journal reported today that apple corporation made money"
                      .split(), "B I I I O O O B I O O".split()),
                     ("georgia tech is a university in georgia".split(),
                      "B I O O O O B".split())]
    word_to_ix = {}
    for sentence, tags in training_data:
        for word in sentence:
            if word not in word_to_ix:
                word_to_ix[word] = len(word_to_ix)
    tag_to_ix = {"B": 0, "I": 1, "O": 2, START_TAG: 3, STOP_TAG: 4}
    model = env.init(BiLSTM_CRF(len(word_to_ix), tag_to_ix, EMBEDDING_DIM, HIDDEN_DIM))
    optimizer = optim.SGD(model.parameters(), lr=0.01, weight_decay=1e-4)

    with torch.no_grad():
        precheck_sent = prepare_sequence(training_data[0][0], word_to_ix)
        env.rec("before", model(precheck_sent))

    def train_step(sentence_in, targets):
        model.zero_grad()
        loss = model.neg_log_likelihood(sentence_in, targets)
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for epoch in range(3):
        for i, (sentence, tags) in enumerate(training_data):
            sentence_in = prepare_sequence(sentence, word_to_ix)
            targets = torch.tensor([tag_to_ix[t] for t in tags], dtype=torch.long)
            env.rec(f"loss {epoch} {i}", train_step(sentence_in, targets))
    with torch.no_grad():
        env.rec("after", model(precheck_sent))
    env.rec("state", model.state_dict())


def image_captioning(torch, env):
    nn, optim = torch.nn, torch.optim
    pack_padded_sequence = nn.utils.rnn.pack_padded_sequence
    VOCAB, EMBED, HIDDEN, START, END = 12, 8, 12, 1, 2

    class EncoderCNN(nn.Module):
        def __init__(self, embed_size):
            super(EncoderCNN, self).__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                          nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, padding=1),
                                          nn.ReLU(), nn.AdaptiveAvgPool2d((1, 1)))
            for p in self.features.parameters():    # (a pretrained backbone: frozen)
                p.requires_grad_(False)
            self.linear = nn.Linear(8, embed_size)
            self.bn = nn.BatchNorm1d(embed_size, momentum=0.01)

        def forward(self, images):
            with torch.no_grad():
                features = self.features(images)
            features = features.reshape(features.size(0), -1)
            return self.bn(self.linear(features))

    class DecoderRNN(nn.Module):
        def __init__(self, embed_size, hidden_size, vocab_size, num_layers, max_seq_length=6):
            super(DecoderRNN, self).__init__()
            self.embed = nn.Embedding(vocab_size, embed_size)
            self.lstm = nn.LSTM(embed_size, hidden_size, num_layers, batch_first=True)
            self.linear = nn.Linear(hidden_size, vocab_size)
            self.max_seg_length = max_seq_length

        def forward(self, features, captions, lengths):
            embeddings = self.embed(captions)
            embeddings = torch.cat((features.unsqueeze(1), embeddings), 1)
            packed = pack_padded_sequence(embeddings, lengths, batch_first=True)
            hiddens, _ = self.lstm(packed)
            return self.linear(hiddens[0])

        def sample(self, features, states=None):
            sampled_ids = []
            inputs = features.unsqueeze(1)
            for i in range(self.max_seg_length):
                hiddens, states = self.lstm(inputs, states)
                outputs = self.linear(hiddens.squeeze(1))
                _, predicted = outputs.max(1)
                sampled_ids.append(predicted)
                inputs = self.embed(predicted).unsqueeze(1)
            return torch.stack(sampled_ids, 1)

    encoder, decoder = env.init(EncoderCNN(EMBED)), env.init(DecoderRNN(EMBED, HIDDEN, VOCAB, 1))
    criterion = nn.CrossEntropyLoss()
    params = list(decoder.parameters()) + list(encoder.linear.parameters()) + \
        list(encoder.bn.parameters())
    optimizer = optim.Adam(params, lr=5e-3)

    def collate_fn(data):
        data.sort(key=lambda x: len(x[1]), reverse=True)
        images, captions = zip(*data)
        images = torch.stack(images, 0)
        lengths = [len(cap) for cap in captions]
        targets = torch.zeros(len(captions), max(lengths)).long()
        for i, cap in enumerate(captions):
            end = lengths[i]
            targets[i, :end] = cap[:end]
        return images, targets, lengths

    def caption(n):
        return torch.cat([torch.tensor([START]), env.randint(3, VOCAB, (n,)), torch.tensor([END])])

    data = [(env.randn(3, 8, 8), caption(n)) for n in (3, 5, 2, 4, 4, 1, 3, 5)]
    loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=False,
                                         collate_fn=collate_fn)

    def train_step(images, captions, lengths):
        features = encoder(images)
        outputs = decoder(features, captions, lengths)
        targets = pack_padded_sequence(captions, lengths, batch_first=True)[0]
        loss = criterion(outputs, targets)
        decoder.zero_grad()
        encoder.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item(), torch.exp(loss).item()

    train_step = env.step(train_step)
    encoder.train()
    decoder.train()
    for epoch in range(3):
        for i, (images, captions, lengths) in enumerate(loader):
            env.rec(f"step {epoch} {i}", train_step(images, captions, lengths))

    encoder.eval()
    with torch.no_grad():
        feature = encoder(torch.stack([d[0] for d in data[:3]]))
        sampled_ids = decoder.sample(feature)
    env.rec("sampled", sampled_ids)
    # (the encoder's linear bias feeds BatchNorm, which removes it: its gradient is rounding
    # noise that Adam scales up, and the running mean follows it; both are left out)
    state = {k: v for k, v in encoder.state_dict().items()
             if k not in ("linear.bias", "bn.running_mean")}
    env.rec("state", (state, decoder.state_dict()))

