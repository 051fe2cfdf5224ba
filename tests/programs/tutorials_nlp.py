""""NLP from scratch" (a char-level RNN classifier and a name generator written by hand, a
seq2seq GRU with Bahdanau attention) and "Word embeddings" (an N-gram language model).
Synthetic words instead of the downloads. Programs `f(torch, env)`, see
tutorial_harness.py."""
import string

all_letters = string.ascii_letters + " .,;'"
n_letters = len(all_letters)
CATEGORY_LINES = {"Alpha": ["Abel", "Ada", "Ako"], "Beta": ["Bo", "Bax", "Bell"],
                  "Gamma": ["Gil", "Gant", "Gao"]}     # (three lengths: three traces)


def char_rnn_classify(torch, env):
    nn = torch.nn
    all_categories = list(CATEGORY_LINES)

    def letterToIndex(letter):
        return all_letters.find(letter)

    def letterToTensor(letter):
        tensor = torch.zeros(1, n_letters)
        tensor[0][letterToIndex(letter)] = 1
        return tensor

    def lineToTensor(line):
        tensor = torch.zeros(len(line), 1, n_letters)
        for li, letter in enumerate(line):
            tensor[li][0][letterToIndex(letter)] = 1
        return tensor

    env.rec("letter", letterToTensor("J"))
    env.rec("line", lineToTensor("Jones").size())

    class RNN(nn.Module):
        def __init__(self, input_size, hidden_size, output_size):
            super().__init__()
            self.hidden_size = hidden_size
            self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
            self.h2o = nn.Linear(input_size + hidden_size, output_size)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, input, hidden):
            combined = torch.cat((input, hidden), 1)
            hidden = self.i2h(combined)
            output = self.h2o(combined)
            output = self.softmax(output)
            return output, hidden

        def initHidden(self):
            return torch.zeros(1, self.hidden_size)

    rnn = env.init(RNN(n_letters, 16, len(all_categories)))

    def categoryFromOutput(output):
        top_n, top_i = output.topk(1)
        category_i = top_i[0].item()
        return all_categories[category_i], category_i

    output, next_hidden = rnn(lineToTensor("Albert")[0], torch.zeros(1, 16))
    env.rec("first output", output)
    env.rec("category", categoryFromOutput(output))
    criterion = nn.NLLLoss()
    learning_rate = 0.05

    def train(category_tensor, line_tensor):
        hidden = rnn.initHidden()
        rnn.zero_grad()
        for i in range(line_tensor.size()[0]):
            output, hidden = rnn(line_tensor[i], hidden)
        loss = criterion(output, category_tensor)
        loss.backward()
        for p in rnn.parameters():
            p.data.add_(p.grad.data, alpha=-learning_rate)
        return output, loss.item()

    train = env.step(train)
    for it in range(12):
        category = all_categories[env.choice(len(all_categories))]
        line = CATEGORY_LINES[category][env.choice(3)]
        category_tensor = torch.tensor([all_categories.index(category)], dtype=torch.long)
        output, loss = train(category_tensor, lineToTensor(line))
        env.rec(f"loss {it} {line}", loss)
        env.rec(f"guess {it}", categoryFromOutput(output))
    env.rec("params", dict(rnn.named_parameters()))

    def evaluate(line_tensor):
        hidden = rnn.initHidden()
        for i in range(line_tensor.size()[0]):
            output, hidden = rnn(line_tensor[i], hidden)
        return output

    with torch.no_grad():
        output = evaluate(lineToTensor("Bell"))
        topv, topi = output.topk(3, 1, True)
        env.rec("predict", [(topv[0][i].item(), all_categories[topi[0][i].item()])
                            for i in range(3)])


def names_generation(torch, env, dropout=0.0):
    """dropout > 0: the training draws from the library's generator (records cross=False)."""
    nn = torch.nn
    all_categories = list(CATEGORY_LINES)
    n_categories, n_out = len(all_categories), n_letters + 1     # (+1: EOS)
    cross = dropout == 0.0

    class RNN(nn.Module):
        def __init__(self, input_size, hidden_size, output_size):
            super().__init__()
            self.hidden_size = hidden_size
            self.i2h = nn.Linear(n_categories + input_size + hidden_size, hidden_size)
            self.i2o = nn.Linear(n_categories + input_size + hidden_size, output_size)
            self.o2o = nn.Linear(hidden_size + output_size, output_size)
            self.dropout = nn.Dropout(dropout)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, category, input, hidden):
            input_combined = torch.cat((category, input, hidden), 1)
            hidden = self.i2h(input_combined)
            output = self.i2o(input_combined)
            output_combined = torch.cat((hidden, output), 1)
            output = self.o2o(output_combined)
            output = self.dropout(output)
            output = self.softmax(output)
            return output, hidden

        def initHidden(self):
            return torch.zeros(1, self.hidden_size)

    def categoryTensor(category):
        tensor = torch.zeros(1, n_categories)
        tensor[0][all_categories.index(category)] = 1
        return tensor

    def inputTensor(line):
        tensor = torch.zeros(len(line), 1, n_letters)
        for li in range(len(line)):
            tensor[li][0][all_letters.find(line[li])] = 1
        return tensor

    def targetTensor(line):
        letter_indexes = [all_letters.find(line[li]) for li in range(1, len(line))]
        letter_indexes.append(n_letters - 1 + 1)        # EOS
        return torch.LongTensor(letter_indexes)

    rnn = env.init(RNN(n_letters, 24, n_out))
    criterion = nn.NLLLoss()
    learning_rate = 0.05
    compiled = env.compiled

    def train(category_tensor, input_line_tensor, target_line_tensor):
        if not compiled:        # (compiled: done by the caller, see below)
            target_line_tensor.unsqueeze_(-1)
        hidden = rnn.initHidden()
        rnn.zero_grad()
        loss = torch.Tensor([0])
        for i in range(input_line_tensor.size(0)):
            output, hidden = rnn(category_tensor, input_line_tensor[i], hidden)
            l = criterion(output, target_line_tensor[i])
            loss += l
        loss.backward()
        for p in rnn.parameters():
            p.data.add_(p.grad.data, alpha=-learning_rate)
        return output, loss.item() / input_line_tensor.size(0)

    train = env.step(train)
    rnn.train()
    for it in range(10):
        category = all_categories[env.choice(n_categories)]
        line = CATEGORY_LINES[category][env.choice(3)]
        target = targetTensor(line)
        if env.compiled:    # a compiled call cannot replay a change of its input's shape
            target.unsqueeze_(-1)
        output, loss = train(categoryTensor(category), inputTensor(line), target)
        env.rec(f"loss {it}", loss, cross)
    env.rec("params", dict(rnn.named_parameters()), cross)

    max_length = 6

    def sample(category, start_letter="A"):
        with torch.no_grad():
            category_tensor = categoryTensor(category)
            input = inputTensor(start_letter)
            hidden = rnn.initHidden()
            output_name = start_letter
            for i in range(max_length):
                output, hidden = rnn(category_tensor, input[0], hidden)
                topv, topi = output.topk(1)
                topi = topi[0][0]
                if topi == n_out - 1:
                    break
                else:
                    letter = all_letters[topi]
                    output_name += letter
                input = inputTensor(letter)
            return output_name

    rnn.eval()
    env.rec("samples", [sample(c, s) for c, s in zip(all_categories, "ABG")], cross)

    def draw(category_tensor, input, hidden):
        output, hidden = rnn(category_tensor, input, hidden)
        return torch.multinomial(output.exp(), 1), hidden

    draw = env.step(draw)
    torch.manual_seed(5)
    hidden, input, drawn = rnn.initHidden(), inputTensor("A")[0], []
    for i in range(5):
        with torch.no_grad():
            idx, hidden = draw(categoryTensor("Beta"), input, hidden)
        drawn.append(idx.item())
        input = inputTensor(all_letters[min(idx.item(), n_letters - 1)])[0]
    env.rec("multinomial", drawn, False)
    env.rec("multinomial in range", all(0 <= i < n_out for i in drawn))


def names_generation_dropout(torch, env):
    names_generation(torch, env, dropout=0.1)


def ngram(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    CONTEXT_SIZE = 2
    EMBEDDING_DIM = 10
    test_sentence = """When forty winters shall besiege thy brow,
    And dig deep trenches in thy beauty's field,
    Thy youth's proud livery so gazed on now,
    Will be a totter'd weed of small worth held""".split()
    ngrams = [([test_sentence[i - j - 1] for j in range(CONTEXT_SIZE)], test_sentence[i])
              for i in range(CONTEXT_SIZE, len(test_sentence))]
    vocab = set(test_sentence)
    word_to_ix = {word: i for i, word in enumerate(vocab)}

    class NGramLanguageModeler(nn.Module):
        def __init__(self, vocab_size, embedding_dim, context_size):
            super().__init__()
            self.embeddings = nn.Embedding(vocab_size, embedding_dim)
            self.linear1 = nn.Linear(context_size * embedding_dim, 128)
            self.linear2 = nn.Linear(128, vocab_size)

        def forward(self, inputs):
            embeds = self.embeddings(inputs).view((1, -1))
            out = F.relu(self.linear1(embeds))
            out = self.linear2(out)
            log_probs = F.log_softmax(out, dim=1)
            return log_probs

    losses = []
    loss_function = nn.NLLLoss()
    model = env.init(NGramLanguageModeler(len(vocab), EMBEDDING_DIM, CONTEXT_SIZE))
    optimizer = optim.SGD(model.parameters(), lr=0.01)

    def step(model, context_idxs, target):
        model.zero_grad()
        log_probs = model(context_idxs)
        loss = loss_function(log_probs, target)
        loss.backward()
        optimizer.step()
        return loss.item()

    step = env.step(step)
    for epoch in range(3):
        total_loss = 0
        for context, target in ngrams:
            context_idxs = torch.tensor([word_to_ix[w] for w in context], dtype=torch.long)
            total_loss += step(model, context_idxs,
                               torch.tensor([word_to_ix[target]], dtype=torch.long))
        losses.append(total_loss)
    env.rec("losses", losses)
    env.rec("beauty", model.embeddings.weight[word_to_ix["beauty's"]])
    env.rec("state", model.state_dict())
