"""Sweep 15 (D), part 7: "Deep learning for NLP" tutorials with the library's own
generator: the bag-of-words classifier (log_softmax + NLLLoss, SGD, the word weights
before and after), the word-embeddings tutorial's CBOW exercise, and "Advanced: making
dynamic decisions and the Bi-LSTM CRF" (the forward algorithm's log-sum-exp recursion,
the gold path score, Viterbi decoding, SGD with weight decay). See tutorial_harness.py."""
import pytest

pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

DATA = [("me gusta comer en la cafeteria".split(), "SPANISH"),
        ("Give it to me".split(), "ENGLISH"),
        ("No creo que sea una buena idea".split(), "SPANISH"),
        ("No it is not a good idea to get lost at sea".split(), "ENGLISH")]
TEST = [("Yo creo que si".split(), "SPANISH"), ("it is lost on me".split(), "ENGLISH")]


def bag_of_words(torch, env):
    """beginner/nlp/deep_learning_tutorial: BoWClassifier."""
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    torch.manual_seed(1)
    word_to_ix = {}
    for sent, _ in DATA + TEST:
        for word in sent:
            if word not in word_to_ix:
                word_to_ix[word] = len(word_to_ix)
    label_to_ix = {"SPANISH": 0, "ENGLISH": 1}

    class BoWClassifier(nn.Module):
        def __init__(self, num_labels, vocab_size):
            super().__init__()
            self.linear = nn.Linear(vocab_size, num_labels)

        def forward(self, bow_vec):
            return F.log_softmax(self.linear(bow_vec), dim=1)

    def make_bow_vector(sentence, word_to_ix):
        vec = torch.zeros(len(word_to_ix))
        for word in sentence:
            vec[word_to_ix[word]] += 1
        return vec.view(1, -1)

    def make_target(label, label_to_ix):
        return torch.LongTensor([label_to_ix[label]])

    model = BoWClassifier(2, len(word_to_ix))
    env.rec("params", [p for p in model.parameters()])
    with torch.no_grad():
        sample = DATA[0]
        env.rec("first", model(make_bow_vector(sample[0], word_to_ix)))
        env.rec("before", [model(make_bow_vector(i, word_to_ix)) for i, _ in TEST])
    env.rec("creo before", next(model.parameters())[:, word_to_ix["creo"]])
    loss_function = nn.NLLLoss()
    optimizer = optim.SGD(model.parameters(), lr=0.1)

    def step(bow_vec, target):
        model.zero_grad()
        log_probs = model(bow_vec)
        loss = loss_function(log_probs, target)
        loss.backward()
        optimizer.step()
        return loss

    step = env.step(step)
    for epoch in range(20):
        for instance, label in DATA:
            loss = step(make_bow_vector(instance, word_to_ix), make_target(label, label_to_ix))
        env.rec(f"loss {epoch}", loss)
    with torch.no_grad():
        env.rec("after", [model(make_bow_vector(i, word_to_ix)) for i, _ in TEST])
    env.rec("creo after", next(model.parameters())[:, word_to_ix["creo"]])


def test_bag_of_words():
    run_tutorial(bag_of_words, rtol=1e-5, atol=1e-6)


RAW_TEXT = """We are about to study the idea of a computational process.
Computational processes are abstract beings that inhabit computers.
As they evolve, processes manipulate other abstract things called data.
The evolution of a process is directed by a pattern of rules
called a program.""".split()


def cbow(torch, env):
    """beginner/nlp/word_embeddings_tutorial's CBOW exercise: a context of two words each
    side, summed embeddings, a linear layer to the vocabulary."""
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    torch.manual_seed(1)
    CONTEXT_SIZE = 2
    vocab = sorted(set(RAW_TEXT))
    vocab_size = len(vocab)
    word_to_ix = {word: i for i, word in enumerate(vocab)}
    data = []
    for i in range(CONTEXT_SIZE, len(RAW_TEXT) - CONTEXT_SIZE):
        context = [RAW_TEXT[i - j - 1] for j in range(CONTEXT_SIZE)] + \
                  [RAW_TEXT[i + j + 1] for j in range(CONTEXT_SIZE)]
        data.append((context, RAW_TEXT[i]))

    class CBOW(nn.Module):
        def __init__(self, vocab_size, embedding_dim):
            super().__init__()
            self.embeddings = nn.Embedding(vocab_size, embedding_dim)
            self.linear = nn.Linear(embedding_dim, vocab_size)

        def forward(self, inputs):
            embeds = self.embeddings(inputs).sum(dim=0, keepdim=True)
            return F.log_softmax(self.linear(embeds), dim=1)

    def make_context_vector(context, word_to_ix):
        return torch.tensor([word_to_ix[w] for w in context], dtype=torch.long)

    model = CBOW(vocab_size, 10)
    loss_function = nn.NLLLoss()
    optimizer = optim.SGD(model.parameters(), lr=0.05)

    def step(context_idxs, target):
        model.zero_grad()
        log_probs = model(context_idxs)
        loss = loss_function(log_probs, target)
        loss.backward()
        optimizer.step()
        return loss

    step = env.step(step)
    for epoch in range(3):
        total_loss = 0
        for context, target in data:
            loss = step(make_context_vector(context, word_to_ix),
                        torch.tensor([word_to_ix[target]], dtype=torch.long))
            total_loss += loss.item()
        env.rec(f"total {epoch}", total_loss)
    env.rec("embedding", model.embeddings.weight[word_to_ix["processes"]])
    with torch.no_grad():
        env.rec("guess", model(make_context_vector(data[0][0], word_to_ix)).argmax().item())


@pytest.mark.slow       # (~2-5 s: builds of its compiled steps)
def test_cbow():
    run_tutorial(cbow, rtol=1e-4, atol=1e-5)


def bilstm_crf(torch, env):
    """beginner/nlp/advanced_tutorial: BiLSTM_CRF on the tutorial's two sentences."""
    nn, optim = torch.nn, torch.optim
    torch.manual_seed(1)
    START_TAG, STOP_TAG = "<START>", "<STOP>"

    def argmax(vec):
        _, idx = torch.max(vec, 1)
        return idx.item()

    def prepare_sequence(seq, to_ix):
        return torch.tensor([to_ix[w] for w in seq], dtype=torch.long)

    def log_sum_exp(vec):
        max_score = vec[0, argmax(vec)]
        max_score_broadcast = max_score.view(1, -1).expand(1, vec.size()[1])
        return max_score + torch.log(torch.sum(torch.exp(vec - max_score_broadcast)))

    class BiLSTM_CRF(nn.Module):
        def __init__(self, vocab_size, tag_to_ix, embedding_dim, hidden_dim):
            super().__init__()
            self.embedding_dim, self.hidden_dim = embedding_dim, hidden_dim
            self.vocab_size, self.tag_to_ix = vocab_size, tag_to_ix
            self.tagset_size = len(tag_to_ix)
            self.word_embeds = nn.Embedding(vocab_size, embedding_dim)
            self.lstm = nn.LSTM(embedding_dim, hidden_dim // 2, num_layers=1,
                                bidirectional=True)
            self.hidden2tag = nn.Linear(hidden_dim, self.tagset_size)
            self.transitions = nn.Parameter(torch.randn(self.tagset_size, self.tagset_size))
            self.transitions.data[tag_to_ix[START_TAG], :] = -10000
            self.transitions.data[:, tag_to_ix[STOP_TAG]] = -10000
            self.hidden = self.init_hidden()

        def init_hidden(self):
            return (torch.randn(2, 1, self.hidden_dim // 2),
                    torch.randn(2, 1, self.hidden_dim // 2))

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
                bptrs_t, viterbivars_t = [], []
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
            return self._viterbi_decode(lstm_feats)

    training_data = [("the wall street journal reported today that apple corporation made "
                      "money".split(), "B I I I O O O B I O O".split()),
                     ("georgia tech is a university in georgia".split(),
                      "B I O O O O B".split())]
    word_to_ix = {}
    for sentence, tags in training_data:
        for word in sentence:
            if word not in word_to_ix:
                word_to_ix[word] = len(word_to_ix)
    tag_to_ix = {"B": 0, "I": 1, "O": 2, START_TAG: 3, STOP_TAG: 4}
    model = BiLSTM_CRF(len(word_to_ix), tag_to_ix, 5, 4)
    optimizer = optim.SGD(model.parameters(), lr=0.01, weight_decay=1e-4)
    with torch.no_grad():
        precheck_sent = prepare_sequence(training_data[0][0], word_to_ix)
        env.rec("before", model(precheck_sent))

    def step(sentence_in, targets):
        model.zero_grad()
        loss = model.neg_log_likelihood(sentence_in, targets)
        loss.backward()
        optimizer.step()
        return loss

    step = env.step(step)
    for epoch in range(2):
        for sentence, tags in training_data:
            loss = step(prepare_sequence(sentence, word_to_ix),
                        torch.tensor([tag_to_ix[t] for t in tags], dtype=torch.long))
            env.rec(f"loss {epoch} {len(sentence)}", loss)
    env.rec("params", [p for p in model.parameters()])
    with torch.no_grad():
        env.rec("after", model(prepare_sequence(training_data[0][0], word_to_ix)))


@pytest.mark.slow       # (~15 s: the forward algorithm's unrolled loops make a large graph)
def test_bilstm_crf():
    run_tutorial(bilstm_crf, rtol=1e-4, atol=1e-5)


def seq2seq_dropout(torch, env):
    """intermediate/seq2seq_translation_tutorial's GRU encoder and Bahdanau-attention
    decoder with their dropout on (masks from the library's generator, compared with
    torch's), teacher forcing, Adam, NLLLoss over the flattened outputs."""
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    SOS_token, MAX_LENGTH, V_IN, V_OUT, H = 0, 5, 11, 9, 16

    class EncoderRNN(nn.Module):
        def __init__(self, input_size, hidden_size, dropout_p=0.1):
            super().__init__()
            self.embedding = nn.Embedding(input_size, hidden_size)
            self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
            self.dropout = nn.Dropout(dropout_p)

        def forward(self, input):
            embedded = self.dropout(self.embedding(input))
            return self.gru(embedded)

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
            return torch.bmm(weights, keys), weights

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
            decoder_outputs, attentions = [], []
            for i in range(MAX_LENGTH):
                decoder_output, decoder_hidden, attn_weights = self.forward_step(
                    decoder_input, decoder_hidden, encoder_outputs)
                decoder_outputs.append(decoder_output)
                attentions.append(attn_weights)
                if target_tensor is not None:
                    decoder_input = target_tensor[:, i].unsqueeze(1)
                else:
                    _, topi = decoder_output.topk(1)
                    decoder_input = topi.squeeze(-1).detach()
            decoder_outputs = F.log_softmax(torch.cat(decoder_outputs, dim=1), dim=-1)
            return decoder_outputs, decoder_hidden, torch.cat(attentions, dim=1)

        def forward_step(self, input, hidden, encoder_outputs):
            embedded = self.dropout(self.embedding(input))
            query = hidden.permute(1, 0, 2)
            context, attn_weights = self.attention(query, encoder_outputs)
            output, hidden = self.gru(torch.cat((embedded, context), dim=2), hidden)
            return self.out(output), hidden, attn_weights

    torch.manual_seed(0)
    encoder, decoder = EncoderRNN(V_IN, H), AttnDecoderRNN(H, V_OUT)
    encoder_optimizer = optim.Adam(encoder.parameters(), lr=0.01)
    decoder_optimizer = optim.Adam(decoder.parameters(), lr=0.01)
    criterion = nn.NLLLoss()
    input_tensor = torch.randint(1, V_IN, (3, MAX_LENGTH))
    target_tensor = torch.randint(1, V_OUT, (3, MAX_LENGTH))

    def train_epoch(input_tensor, target_tensor):
        encoder_optimizer.zero_grad()
        decoder_optimizer.zero_grad()
        encoder_outputs, encoder_hidden = encoder(input_tensor)
        decoder_outputs, _, _ = decoder(encoder_outputs, encoder_hidden, target_tensor)
        loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)),
                         target_tensor.view(-1))
        loss.backward()
        encoder_optimizer.step()
        decoder_optimizer.step()
        return loss

    train_epoch = env.step(train_epoch)
    for epoch in range(3):
        env.rec(f"loss {epoch}", train_epoch(input_tensor, target_tensor))
    # (attention.Va.bias shifts every score alike: softmax ignores it, its gradient is
    # rounding noise, which Adam's normalisation makes into steps of lr's size)
    env.rec("params", [p for p in encoder.parameters()] +
            [p for n, p in decoder.named_parameters() if n != "attention.Va.bias"])
    encoder.eval()
    decoder.eval()
    with torch.no_grad():
        encoder_outputs, encoder_hidden = encoder(input_tensor)
        decoder_outputs, _, attn = decoder(encoder_outputs, encoder_hidden)
        env.rec("greedy", (decoder_outputs.argmax(-1), attn))


@pytest.mark.slow       # (~3 s: the builds of an unrolled decoder's step)
def test_seq2seq_dropout():
    run_tutorial(seq2seq_dropout, rtol=1e-4, atol=1e-5)
