"""Batch 22 (s74, u12), part 3: a char-RNN name classifier and a spatial transformer network."""
import string
import unicodedata

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

NAMES = {"English": ["Abbott", "Smith", "Ashby", "Cole"], "French": ["Bélanger", "Dubois",
         "Lévêque", "Roux"], "Italian": ["Abate", "Rossi", "Bruno", "Ricci"]}


def char_rnn_classifier(torch, env):
    nn = torch.nn
    allowed_characters = string.ascii_letters + " .,;'"
    n_letters = len(allowed_characters)

    def unicodeToAscii(s):
        return "".join(c for c in unicodedata.normalize("NFD", s)
                       if unicodedata.category(c) != "Mn" and c in allowed_characters)

    def letterToIndex(letter):
        return allowed_characters.find(letter)

    def lineToTensor(line):
        tensor = torch.zeros(len(line), 1, n_letters)
        for li, letter in enumerate(line):
            tensor[li][0][letterToIndex(letter)] = 1
        return tensor
    env.rec("ascii", unicodeToAscii("Ślusàrski"))

    class CharRNN(nn.Module):
        def __init__(self, input_size, hidden_size, output_size):
            super().__init__()
            self.hidden_size = hidden_size
            self.rnn = nn.RNN(input_size, hidden_size)
            self.h2o = nn.Linear(hidden_size, output_size)
            self.softmax = nn.LogSoftmax(dim=1)

        def initHidden(self):
            return torch.zeros(1, 1, self.hidden_size)

        def forward(self, line_tensor, hidden):
            rnn_out, hidden = self.rnn(line_tensor, hidden)
            return self.softmax(self.h2o(hidden[0])), hidden

    labels_uniq = list(NAMES)
    data = [(torch.tensor([labels_uniq.index(lab)], dtype=torch.long),
             lineToTensor(unicodeToAscii(n)), lab, n) for lab in NAMES for n in NAMES[lab]]
    rnn = env.init(CharRNN(n_letters, 12, len(labels_uniq)))
    criterion = nn.NLLLoss()
    learning_rate = 0.05

    def train(category_tensor, line_tensor):
        hidden = rnn.initHidden()
        rnn.zero_grad()
        for i in range(line_tensor.size()[0]):      # (the hidden state carried by hand)
            output, hidden = rnn(line_tensor[i:i + 1], hidden)
        loss = criterion(output, category_tensor)
        loss.backward()
        nn.utils.clip_grad_norm_(rnn.parameters(), 3)
        for p in rnn.parameters():
            p.data.add_(p.grad.data, alpha=-learning_rate)
        return output, loss.item()
    step = env.step(train)

    def categoryFromOutput(output):
        top_n, top_i = output.topk(1)
        category_i = top_i[0].item()
        return labels_uniq[category_i], category_i
    all_losses = []
    for epoch in range(2):
        for k in [env.choice(len(data)) for _ in range(6)]:
            label_tensor, text_tensor, label, text = data[k]
            output, loss = step(label_tensor, text_tensor)
            guess, guess_i = categoryFromOutput(output)
            all_losses.append(loss)
            env.rec(f"{epoch} {k}", f"{loss:.4f} {text} / {guess} {'✓' if guess == label else '✗'}")
    env.rec("losses", all_losses)
    confusion = torch.zeros(len(labels_uniq), len(labels_uniq))
    rnn.eval()
    with torch.no_grad():
        for label_tensor, text_tensor, label, text in data:
            output, _ = rnn(text_tensor, rnn.initHidden())
            guess, guess_i = categoryFromOutput(output)
            confusion[labels_uniq.index(label)][guess_i] += 1
    for i in range(len(labels_uniq)):
        denom = confusion[i].sum()
        if denom > 0:
            confusion[i] = confusion[i] / denom
    env.rec("confusion", confusion)
    env.rec("params", dict(rnn.state_dict()))


def spatial_transformer(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 6, kernel_size=5)
            self.conv2 = nn.Conv2d(6, 8, kernel_size=5)
            self.conv2_drop = nn.Dropout2d(p=0.0)
            self.fc1 = nn.Linear(8 * 2 * 2, 16)
            self.fc2 = nn.Linear(16, 3)
            self.localization = nn.Sequential(
                nn.Conv2d(1, 4, kernel_size=7), nn.MaxPool2d(2, stride=2), nn.ReLU(True),
                nn.Conv2d(4, 6, kernel_size=5), nn.MaxPool2d(2, stride=2), nn.ReLU(True))
            self.fc_loc = nn.Sequential(nn.Linear(6 * 1 * 1, 8), nn.ReLU(True),
                                        nn.Linear(8, 3 * 2))
            self.fc_loc[2].weight.data.zero_()
            self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

        def stn(self, x):
            xs = self.localization(x)
            xs = xs.view(-1, 6 * 1 * 1)
            theta = self.fc_loc(xs)
            theta = theta.view(-1, 2, 3)
            grid = F.affine_grid(theta, x.size())
            return F.grid_sample(x, grid)

        def forward(self, x):
            x = self.stn(x)
            x = F.relu(F.max_pool2d(self.conv1(x), 2))
            x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
            x = x.view(-1, 8 * 2 * 2)
            x = F.relu(self.fc1(x))
            x = F.dropout(x, p=0.0, training=self.training)
            return F.log_softmax(self.fc2(x), dim=1)

    model = Net()
    env.init(model)
    optimizer = optim.SGD(model.parameters(), lr=0.05)

    def train_step(data, target):
        model.train()
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        return loss.detach()

    def batch(n):
        target = env.randint(0, 3, (n,))
        img = env.rand(n, 1, 20, 20) * 0.2
        for i, t in enumerate(target.tolist()):
            img[i, 0, 3 + 4 * t:7 + 4 * t, 4:16] += 0.8
        return (img - 0.1307) / 0.3081, target
    step = env.step(train_step)
    for it in range(4):
        env.rec(f"loss {it}", step(*batch(4)))
    model.eval()
    with torch.no_grad():
        data, target = batch(6)
        output = model(data)
        test_loss = F.nll_loss(output, target, reduction="sum").item()
        pred = output.max(1, keepdim=True)[1]
        correct = pred.eq(target.view_as(pred)).sum().item()
        env.rec("test", f"Average loss: {test_loss / 6:.4f}, Accuracy: {correct}/6")
        transformed = model.stn(data[:2])
        inp = transformed[0].numpy().transpose((1, 2, 0))
        inp = np.clip(np.array([0.3081]) * inp + np.array([0.1307]), 0, 1)
        env.rec("stn", (transformed, inp.astype(np.float32)))
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {f.__name__: f for f in (char_rnn_classifier, spatial_transformer)}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
