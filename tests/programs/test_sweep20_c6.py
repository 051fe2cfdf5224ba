"""Sweep 20 (C), part 6: recurrent models. A seq2seq GRU: the encoder packs padded source
sentences with pack_padded_sequence(enforce_sorted=False), unpacks with
pad_packed_sequence, and hands its hidden state to a decoder that runs one token at a time,
teacher-forced or fed its own topk(1) prediction (`decoder_input = topi.squeeze().detach()`)
by a coin flipped per batch (the same flips in every run), NLLLoss over log_softmax summed
per step and divided by the target length. Then a char-RNN: nn.LSTM(num_layers=2,
batch_first) over truncated-BPTT windows, the (h, c) tuple detached between batches,
clip_grad_norm_, a checkpoint dict of model and optimizer state_dicts saved with torch.save
mid-run, loaded into a fresh model and optimizer that carry on training. Run with PyTorch,
with llgrad eagerly and with llgrad.compile (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def seq2seq_gru(torch, env):
    nn, F = torch.nn, torch.nn.functional
    from importlib import import_module
    rnn_utils = import_module(torch.__name__ + ".nn.utils.rnn")
    V_in, V_out, H, SOS, PAD = 11, 9, 12, 0, 0

    class EncoderRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V_in, H, padding_idx=PAD)
            self.gru = nn.GRU(H, H, batch_first=True)

        def forward(self, src, lengths):
            packed = rnn_utils.pack_padded_sequence(self.embedding(src), lengths, batch_first=True,
                                                    enforce_sorted=False)
            out, hidden = self.gru(packed)
            out, _ = rnn_utils.pad_packed_sequence(out, batch_first=True)
            return out, hidden

    class DecoderRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V_out, H)
            self.gru = nn.GRU(H, H, batch_first=True)
            self.out = nn.Linear(H, V_out)

        def forward_step(self, inp, hidden):
            output = F.relu(self.embedding(inp.unsqueeze(1)))
            output, hidden = self.gru(output, hidden)
            return F.log_softmax(self.out(output.squeeze(1)), dim=-1), hidden

    encoder, decoder = env.init(EncoderRNN()), env.init(DecoderRNN())
    enc_opt = torch.optim.SGD(encoder.parameters(), lr=0.1)
    dec_opt = torch.optim.SGD(decoder.parameters(), lr=0.1)
    criterion = nn.NLLLoss()

    def train(src, lengths, target, teacher_forcing):
        enc_opt.zero_grad()
        dec_opt.zero_grad()
        enc_out, hidden = encoder(src, lengths)
        decoder_input = torch.full((src.size(0),), SOS, dtype=torch.long)
        loss = 0
        target_length = target.size(1)
        for di in range(target_length):
            out, hidden = decoder.forward_step(decoder_input, hidden)
            loss += criterion(out, target[:, di])
            if teacher_forcing:
                decoder_input = target[:, di]
            else:
                topv, topi = out.topk(1)
                decoder_input = topi.squeeze().detach()
        loss.backward()
        enc_opt.step()
        dec_opt.step()
        return loss.item() / target_length, enc_out.shape
    train = env.step(train)
    src = env.randint(1, V_in, (4, 6))
    lengths = torch.tensor([6, 3, 5, 2])
    src = src * (torch.arange(6)[None, :] < lengths[:, None])
    target = env.randint(1, V_out, (4, 4))
    for i in range(6):
        tf = env.choice(2) == 1
        env.rec(f"iter{i}", (train(src, lengths, target, tf), tf))
    # a batch whose longest sentence is shorter: the padded output narrows
    env.rec("short", train(src[1:], lengths[1:], target[1:], True))
    env.rec("enc", encoder.state_dict())
    env.rec("dec", decoder.state_dict())


def char_rnn(torch, env):
    nn, F = torch.nn, torch.nn.functional
    V, E, H, L, seq = 15, 8, 16, 2, 5

    class CharRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, E)
            self.lstm = nn.LSTM(E, H, num_layers=L, batch_first=True)
            self.fc = nn.Linear(H, V)

        def forward(self, x, hidden):
            out, hidden = self.lstm(self.embed(x), hidden)
            return self.fc(out.reshape(-1, H)), hidden

        def init_hidden(self, batch):
            return (torch.zeros(L, batch, H), torch.zeros(L, batch, H))

    def make(state=None):
        model = CharRNN()
        opt = torch.optim.Adam(model.parameters(), lr=5e-3)
        if state is not None:
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
        return model, opt

    model, opt = make()
    env.init(model)
    text = env.randint(0, V, (3 * 4 * seq + 1,))
    data, targets = text[:-1].view(3, -1), text[1:].view(3, -1)

    def make_step(model, opt):
        def step(x, y, hidden):
            hidden = tuple(h.detach() for h in hidden)
            model.zero_grad()
            logits, hidden = model(x, hidden)
            loss = F.cross_entropy(logits, y.reshape(-1))
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
            return loss.item(), hidden
        return env.step(step)

    step = make_step(model, opt)
    hidden = model.init_hidden(3)
    losses = []
    for epoch in range(2):
        for i in range(0, data.size(1), seq):
            loss, hidden = step(data[:, i:i + seq], targets[:, i:i + seq], hidden)
            losses.append(loss)
        if epoch == 0:
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch},
                       env.path("ckpt.pt"))
    env.rec("losses", losses)
    env.rec("hidden", hidden)
    ckpt = torch.load(env.path("ckpt.pt"))
    model2, opt2 = make(ckpt)
    step2 = make_step(model2, opt2)
    hidden = model2.init_hidden(3)
    more = []
    for i in range(0, data.size(1), seq):
        loss, hidden = step2(data[:, i:i + seq], targets[:, i:i + seq], hidden)
        more.append(loss)
    env.rec("resumed", (ckpt["epoch"], more))
    env.rec("params", (model.state_dict(), model2.state_dict()))
    env.rec("adam step", opt2.state_dict()["state"][0]["step"])


@pytest.mark.parametrize("program", [seq2seq_gru, pytest.param(char_rnn, marks=pytest.mark.slow)])
def test_recurrent(program):
    run_tutorial(program)
