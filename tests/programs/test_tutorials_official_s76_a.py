"""Batch s76 (a): programs following pytorch.org's official tutorials closely (their class
names and idioms, tiny sizes), run with PyTorch, llgrad eagerly and llgrad compiling the step
(tutorial_harness.py): the chatbot tutorial (a bidirectional GRU encoder over packed
sequences, Luong attention, maskNLLLoss, teacher forcing, GreedySearchDecoder) and the
60-minute blitz (Q.backward(gradient=...), the Net with out.backward(grad), grad_fn chains,
a manual f.data.sub_ update, a frozen backbone with a new head).
More in test_tutorials_official_s76_a2.py and _a3.py."""
import itertools

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]


def chatbot(torch, env):
    nn, F = torch.nn, torch.nn.functional
    PAD_token, SOS_token, EOS_token = 0, 1, 2
    V, hidden_size, n_layers = 12, 8, 2

    class EncoderRNN(nn.Module):
        def __init__(self, hidden_size, embedding, n_layers=1, dropout=0):
            super().__init__()
            self.n_layers = n_layers
            self.hidden_size = hidden_size
            self.embedding = embedding
            self.gru = nn.GRU(hidden_size, hidden_size, n_layers,
                              dropout=(0 if n_layers == 1 else dropout), bidirectional=True)

        def forward(self, input_seq, input_lengths, hidden=None):
            embedded = self.embedding(input_seq)
            packed = nn.utils.rnn.pack_padded_sequence(embedded, input_lengths)
            outputs, hidden = self.gru(packed, hidden)
            outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs)
            outputs = outputs[:, :, :self.hidden_size] + outputs[:, :, self.hidden_size:]
            return outputs, hidden

    class Attn(nn.Module):
        def __init__(self, method, hidden_size):
            super().__init__()
            self.method = method
            self.hidden_size = hidden_size
            if self.method == 'general':
                self.attn = nn.Linear(self.hidden_size, hidden_size)

        def dot_score(self, hidden, encoder_output):
            return torch.sum(hidden * encoder_output, dim=2)

        def general_score(self, hidden, encoder_output):
            energy = self.attn(encoder_output)
            return torch.sum(hidden * energy, dim=2)

        def forward(self, hidden, encoder_outputs):
            if self.method == 'general':
                attn_energies = self.general_score(hidden, encoder_outputs)
            else:
                attn_energies = self.dot_score(hidden, encoder_outputs)
            attn_energies = attn_energies.t()
            return F.softmax(attn_energies, dim=1).unsqueeze(1)

    class LuongAttnDecoderRNN(nn.Module):
        def __init__(self, attn_model, embedding, hidden_size, output_size, n_layers=1,
                     dropout=0.1):
            super().__init__()
            self.attn_model = attn_model
            self.hidden_size = hidden_size
            self.output_size = output_size
            self.n_layers = n_layers
            self.dropout = dropout
            self.embedding = embedding
            self.embedding_dropout = nn.Dropout(dropout)
            self.gru = nn.GRU(hidden_size, hidden_size, n_layers,
                              dropout=(0 if n_layers == 1 else dropout))
            self.concat = nn.Linear(hidden_size * 2, hidden_size)
            self.out = nn.Linear(hidden_size, output_size)
            self.attn = Attn(attn_model, hidden_size)

        def forward(self, input_step, last_hidden, encoder_outputs):
            embedded = self.embedding(input_step)
            embedded = self.embedding_dropout(embedded)
            rnn_output, hidden = self.gru(embedded, last_hidden)
            attn_weights = self.attn(rnn_output, encoder_outputs)
            context = attn_weights.bmm(encoder_outputs.transpose(0, 1))
            rnn_output = rnn_output.squeeze(0)
            context = context.squeeze(1)
            concat_input = torch.cat((rnn_output, context), 1)
            concat_output = torch.tanh(self.concat(concat_input))
            output = self.out(concat_output)
            output = F.softmax(output, dim=1)
            return output, hidden

    def maskNLLLoss(inp, target, mask):
        nTotal = mask.sum()
        crossEntropy = -torch.log(torch.gather(inp, 1, target.view(-1, 1)).squeeze(1))
        loss = crossEntropy.masked_select(mask).mean()
        return loss, nTotal.item()

    def zeroPadding(l, fillvalue=PAD_token):
        return list(itertools.zip_longest(*l, fillvalue=fillvalue))

    def binaryMatrix(l, value=PAD_token):
        return [[0 if token == PAD_token else 1 for token in seq] for seq in l]

    def sentence():
        return [3 + env.choice(V - 3) for _ in range(1 + env.choice(4))] + [EOS_token]

    def batch2TrainData(pair_batch):
        pair_batch.sort(key=lambda x: len(x[0]), reverse=True)
        input_batch, output_batch = zip(*pair_batch)
        lengths = torch.tensor([len(indexes) for indexes in input_batch])
        inp = torch.LongTensor(zeroPadding(input_batch))
        max_target_len = max([len(indexes) for indexes in output_batch])
        padList = zeroPadding(output_batch)
        mask = torch.BoolTensor(binaryMatrix(padList))
        return inp, lengths, torch.LongTensor(padList), mask, max_target_len

    embedding = nn.Embedding(V, hidden_size)
    encoder = env.init(EncoderRNN(hidden_size, embedding, n_layers, 0.0))
    decoder = env.init(LuongAttnDecoderRNN('dot', embedding, hidden_size, V, n_layers, 0.0))
    encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-2)
    decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=1e-2 * 5.0)

    def train(input_variable, lengths, target_variable, mask, max_target_len,
              use_teacher_forcing, clip=50.0):
        encoder_optimizer.zero_grad()
        decoder_optimizer.zero_grad()
        loss, print_losses, n_totals = 0, [], 0
        encoder_outputs, encoder_hidden = encoder(input_variable, lengths)
        decoder_input = torch.LongTensor([[SOS_token for _ in range(input_variable.shape[1])]])
        decoder_hidden = encoder_hidden[:decoder.n_layers]
        for t in range(max_target_len):
            decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden,
                                                     encoder_outputs)
            if use_teacher_forcing:
                decoder_input = target_variable[t].view(1, -1)
            else:
                _, topi = decoder_output.topk(1)
                decoder_input = torch.LongTensor([[topi[i][0]
                                                   for i in range(input_variable.shape[1])]])
            mask_loss, nTotal = maskNLLLoss(decoder_output, target_variable[t], mask[t])
            loss += mask_loss
            print_losses.append(mask_loss.item() * nTotal)
            n_totals += nTotal
        loss.backward()
        _ = nn.utils.clip_grad_norm_(encoder.parameters(), clip)
        _ = nn.utils.clip_grad_norm_(decoder.parameters(), clip)
        encoder_optimizer.step()
        decoder_optimizer.step()
        return sum(print_losses) / n_totals

    step = env.step(train)
    encoder.train()
    decoder.train()
    for iteration in range(4):
        batch = batch2TrainData([[sentence(), sentence()] for _ in range(3)])
        loss = step(*batch, use_teacher_forcing=iteration % 2 == 0)
        env.rec(f"iter {iteration}", "Iteration: {}; Percent complete: {:.1f}%; Average loss: "
                "{:.4f}".format(iteration + 1, (iteration + 1) / 4 * 100, loss))

    class GreedySearchDecoder(nn.Module):
        def __init__(self, encoder, decoder):
            super().__init__()
            self.encoder = encoder
            self.decoder = decoder

        def forward(self, input_seq, input_length, max_length):
            encoder_outputs, encoder_hidden = self.encoder(input_seq, input_length)
            decoder_hidden = encoder_hidden[:self.decoder.n_layers]
            decoder_input = torch.ones(1, 1, dtype=torch.long) * SOS_token
            all_tokens = torch.zeros([0], dtype=torch.long)
            all_scores = torch.zeros([0])
            for _ in range(max_length):
                decoder_output, decoder_hidden = self.decoder(decoder_input, decoder_hidden,
                                                              encoder_outputs)
                decoder_scores, decoder_input = torch.max(decoder_output, dim=1)
                all_tokens = torch.cat((all_tokens, decoder_input), dim=0)
                all_scores = torch.cat((all_scores, decoder_scores), dim=0)
                decoder_input = torch.unsqueeze(decoder_input, 0)
            return all_tokens, all_scores

    encoder.eval()
    decoder.eval()
    searcher = GreedySearchDecoder(encoder, decoder)
    indexes_batch = [sentence()]
    lengths = torch.tensor([len(indexes) for indexes in indexes_batch])
    input_batch = torch.LongTensor(indexes_batch).transpose(0, 1)
    with torch.no_grad():
        tokens, scores = searcher(input_batch, lengths, 5)
    env.rec("tokens", tokens)
    env.rec("scores", scores)
    env.rec("params", dict(list(encoder.named_parameters()) + list(decoder.named_parameters())))


def blitz_autograd(torch, env):
    nn, optim = torch.nn, torch.optim
    a = torch.tensor([2., 3.], requires_grad=True)
    b = torch.tensor([6., 4.], requires_grad=True)
    Q = 3 * a**3 - b**2
    external_grad = torch.tensor([1., 1.])
    Q.backward(gradient=external_grad)
    env.rec("a.grad", a.grad)
    env.rec("checks", (9 * a**2 == a.grad, -2 * b == b.grad))

    x = torch.rand(5, 5)
    y = torch.rand(5, 5)
    z = torch.rand((5, 5), requires_grad=True)
    a = x + y
    env.rec("requires_grad", f"Does `a` require gradients?: {a.requires_grad}")
    b = x + z
    env.rec("requires_grad b", f"Does `b` require gradients?: {b.requires_grad}")

    class Net(nn.Module):          # (the blitz's Net, 1x32x32 inputs)
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 6, 5)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1 = nn.Linear(16 * 5 * 5, 120)
            self.fc2 = nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, input):
            c1 = torch.nn.functional.relu(self.conv1(input))
            s2 = torch.nn.functional.max_pool2d(c1, (2, 2))
            c3 = torch.nn.functional.relu(self.conv2(s2))
            s4 = torch.nn.functional.max_pool2d(c3, 2)
            s4 = torch.flatten(s4, 1)
            f5 = torch.nn.functional.relu(self.fc1(s4))
            f6 = torch.nn.functional.relu(self.fc2(f5))
            return self.fc3(f6)

    net = env.init(Net())
    params = list(net.parameters())
    env.rec("n params", (len(params), tuple(params[0].size())))
    input = env.randn(1, 1, 32, 32)
    out = net(input)
    net.zero_grad()
    out.backward(env.randn(1, 10))
    env.rec("conv1.bias.grad", net.conv1.bias.grad)
    output = net(input)
    target = env.randn(10).view(1, -1)
    criterion = nn.MSELoss()
    loss = criterion(output, target)
    env.rec("grad_fn chain", (type(loss.grad_fn).__name__,
                              type(loss.grad_fn.next_functions[0][0]).__name__,
                              type(loss.grad_fn.next_functions[0][0].next_functions[0][0])
                              .__name__))
    net.zero_grad()
    env.rec("bias grad before", net.conv1.bias.grad)
    loss.backward()
    env.rec("bias grad after", net.conv1.bias.grad)
    learning_rate = 0.01
    for f in net.parameters():
        f.data.sub_(f.grad.data * learning_rate)

    # (freezing: all parameters frozen, a new classifier head, SGD over all of them)
    for param in net.parameters():
        param.requires_grad = False
    net.fc3 = env.init(nn.Linear(84, 3))
    optimizer = optim.SGD(net.parameters(), lr=1e-2, momentum=0.9)

    def train_step(x, t):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(net(x), t)
        loss.backward()
        optimizer.step()
        return loss

    step = env.step(train_step)
    xs, ts = env.randn(4, 1, 32, 32), env.randint(0, 3, (4,))
    for it in range(4):
        env.rec(f"loss {it}", step(xs, ts).item())
    env.rec("frozen grads", tuple(p.grad is None for p in net.parameters()))
    env.rec("params", dict(net.named_parameters()))


PROGRAMS = {f.__name__: f for f in (chatbot, blitz_autograd)}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
