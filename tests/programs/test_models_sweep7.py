"""Tutorial programs (seeded with torch.manual_seed, modules initialised by their own
constructors, data from torch's random functions; see test_basics_sweep7.py) on models:
the word-language-model LSTM with tied embeddings, char-RNN name classification, seq2seq
with attention, a small DCGAN, a VAE, an autoencoder, text classification with
EmbeddingBag and offsets."""
import math

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def word_language_model(torch, env):
    """examples/word_language_model: an LSTM RNNModel with tied weights, batchify /
    get_batch, hidden state repackaged between batches, clip_grad_norm_, manual SGD."""
    nn = torch.nn
    torch.manual_seed(0)
    ntoken, ninp, nhid, nlayers = 30, 16, 16, 2

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(0.2)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=0.2)
            self.decoder = nn.Linear(nhid, ntoken)
            self.decoder.weight = self.encoder.weight
            self.init_weights()

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output).view(-1, ntoken)
            return nn.functional.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            return (weight.new_zeros(nlayers, bsz, nhid), weight.new_zeros(nlayers, bsz, nhid))

    def batchify(data, bsz):
        nbatch = data.size(0) // bsz
        data = data.narrow(0, 0, nbatch * bsz)
        return data.view(bsz, -1).t().contiguous()

    bptt = 5

    def get_batch(source, i):
        seq_len = min(bptt, len(source) - 1 - i)
        return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].view(-1)

    def repackage_hidden(h):
        if isinstance(h, torch.Tensor):
            return h.detach()
        return tuple(repackage_hidden(v) for v in h)

    corpus = torch.randint(0, ntoken, (123,))
    train_data = batchify(corpus, 4)
    model = RNNModel()
    env.rec("tied", model.decoder.weight is model.encoder.weight)
    env.rec("n params", sum(p.numel() for p in model.parameters()))
    criterion = nn.NLLLoss()
    lr = 5.0

    def step(data, targets, hidden):
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        return loss.item(), hidden

    step = env.step(step)
    losses = []
    for epoch in range(2):
        model.train()
        hidden = model.init_hidden(4)
        for i in range(0, train_data.size(0) - 1, bptt):
            data, targets = get_batch(train_data, i)
            hidden = repackage_hidden(hidden)
            loss, hidden = step(data, targets, hidden)
            losses.append(loss)
    env.rec("losses", losses)
    model.eval()
    with torch.no_grad():
        hidden = model.init_hidden(4)
        data, targets = get_batch(train_data, 0)
        out, hidden = model(data, hidden)
        env.rec("eval", (criterion(out, targets), math.exp(criterion(out, targets).item())))
    env.rec("weights", model.state_dict())


def char_rnn_names(torch, env):
    """NLP from scratch: classifying names with a character-level RNN (one-hot letters,
    the hand-written RNN cell of the old tutorial, NLLLoss, manual SGD per example)."""
    nn = torch.nn
    torch.manual_seed(0)
    all_letters = "abcdefghijklmnopqrstuvwxyz .,;'"
    n_letters = len(all_letters)
    categories = ["English", "French", "Italian", "German"]
    names = {c: ["".join(all_letters[j] for j in torch.randint(0, 26, (int(n),)).tolist())
                 for n in torch.randint(3, 8, (4,))] for c in categories}

    def lineToTensor(line):
        tensor = torch.zeros(len(line), 1, n_letters)
        for li, letter in enumerate(line):
            tensor[li][0][all_letters.find(letter)] = 1
        return tensor

    class RNN(nn.Module):
        def __init__(self, input_size, hidden_size, output_size):
            super().__init__()
            self.hidden_size = hidden_size
            self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
            self.i2o = nn.Linear(input_size + hidden_size, output_size)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, input, hidden):
            combined = torch.cat((input, hidden), 1)
            hidden = self.i2h(combined)
            output = self.softmax(self.i2o(combined))
            return output, hidden

        def initHidden(self):
            return torch.zeros(1, self.hidden_size)

    rnn = RNN(n_letters, 24, len(categories))
    criterion = nn.NLLLoss()
    learning_rate = 0.005

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
    hist = []
    for it in range(16):
        ci = torch.randint(0, len(categories), (1,)).item()
        line = names[categories[ci]][torch.randint(0, 4, (1,)).item()]
        output, loss = train(torch.tensor([ci], dtype=torch.long), lineToTensor(line))
        top_n, top_i = output.topk(1)
        hist.append((line, loss, top_i[0].item()))
    env.rec("hist", hist)
    env.rec("weights", list(rnn.parameters()))


def seq2seq_attention_gru(torch, env):
    """The translation tutorial: EncoderRNN, AttnDecoderRNN with Bahdanau attention,
    teacher forcing decided by random.random's stand-in torch.rand, two Adam optimizers."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    V_in, V_out, H, MAX = 12, 10, 16, 6
    SOS, EOS = 0, 1

    class EncoderRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V_in, H)
            self.gru = nn.GRU(H, H, batch_first=True)
            self.dropout = nn.Dropout(0.1)

        def forward(self, input):
            return self.gru(self.dropout(self.embedding(input)))

    class BahdanauAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.Wa, self.Ua, self.Va = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, 1)

        def forward(self, query, keys):
            scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
            scores = scores.squeeze(2).unsqueeze(1)
            weights = F.softmax(scores, dim=-1)
            return torch.bmm(weights, keys), weights

    class AttnDecoderRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V_out, H)
            self.attention = BahdanauAttention()
            self.gru = nn.GRU(2 * H, H, batch_first=True)
            self.out = nn.Linear(H, V_out)
            self.dropout = nn.Dropout(0.1)

        def forward(self, encoder_outputs, encoder_hidden, target_tensor=None):
            batch_size = encoder_outputs.size(0)
            decoder_input = torch.empty(batch_size, 1, dtype=torch.long).fill_(SOS)
            decoder_hidden = encoder_hidden
            decoder_outputs, attentions = [], []
            for i in range(MAX):
                embedded = self.dropout(self.embedding(decoder_input))
                query = decoder_hidden.permute(1, 0, 2)
                context, attn_weights = self.attention(query, encoder_outputs)
                output, decoder_hidden = self.gru(torch.cat((embedded, context), dim=2),
                                                  decoder_hidden)
                decoder_outputs.append(self.out(output))
                attentions.append(attn_weights)
                if target_tensor is not None:
                    decoder_input = target_tensor[:, i].unsqueeze(1)
                else:
                    _, topi = decoder_outputs[-1].topk(1)
                    decoder_input = topi.squeeze(-1).detach()
            decoder_outputs = F.log_softmax(torch.cat(decoder_outputs, dim=1), dim=-1)
            return decoder_outputs, decoder_hidden, torch.cat(attentions, dim=1)

    encoder, decoder = EncoderRNN(), AttnDecoderRNN()
    enc_opt = torch.optim.Adam(encoder.parameters(), lr=0.01)
    dec_opt = torch.optim.Adam(decoder.parameters(), lr=0.01)
    criterion = nn.NLLLoss()
    src = torch.randint(2, V_in, (8, MAX))
    tgt = torch.randint(2, V_out, (8, MAX))
    tgt[:, -1] = EOS

    def train_epoch(input_tensor, target_tensor):
        enc_opt.zero_grad()
        dec_opt.zero_grad()
        encoder_outputs, encoder_hidden = encoder(input_tensor)
        decoder_outputs, _, _ = decoder(encoder_outputs, encoder_hidden, target_tensor)
        loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)),
                         target_tensor.view(-1))
        loss.backward()
        enc_opt.step()
        dec_opt.step()
        return loss.item()

    train_epoch = env.step(train_epoch)
    env.rec("losses", [train_epoch(src[i:i + 4], tgt[i:i + 4])
                       for _ in range(4) for i in (0, 4)])
    encoder.eval()
    decoder.eval()
    with torch.no_grad():
        eo, eh = encoder(src[:2])
        out, _, attn = decoder(eo, eh)
        env.rec("decoded", (out.argmax(-1), attn))


def dcgan_small(torch, env):
    """DCGAN: weights_init with normal_ by class name, a ConvTranspose generator, a
    strided conv discriminator with LeakyReLU + BatchNorm, BCELoss with real / fake labels,
    Adam(betas=(0.5, 0.999)), a fixed noise batch."""
    nn = torch.nn
    torch.manual_seed(0)
    nz, ngf, ndf = 8, 8, 8

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            nn.init.normal_(m.weight.data, 0.0, 0.02)
        elif classname.find("BatchNorm") != -1:
            nn.init.normal_(m.weight.data, 1.0, 0.02)
            nn.init.constant_(m.bias.data, 0)

    netG = nn.Sequential(
        nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 2),
        nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf),
        nn.ReLU(True),
        nn.ConvTranspose2d(ngf, 1, 4, 2, 1, bias=False), nn.Tanh())
    netD = nn.Sequential(
        nn.Conv2d(1, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid())
    netG.apply(weights_init)
    netD.apply(weights_init)
    criterion = nn.BCELoss()
    fixed_noise = torch.randn(4, nz, 1, 1)
    real_label, fake_label = 1.0, 0.0
    optimizerD = torch.optim.Adam(netD.parameters(), lr=0.0002, betas=(0.5, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=0.0002, betas=(0.5, 0.999))
    reals = torch.rand(3, 6, 1, 16, 16) * 2 - 1

    def step(real_cpu):
        netD.zero_grad()
        b_size = real_cpu.size(0)
        label = torch.full((b_size,), real_label, dtype=torch.float)
        output = netD(real_cpu).view(-1)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()
        noise = torch.randn(b_size, nz, 1, 1)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach()).view(-1)
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()
        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake).view(-1)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()
        return errD.item(), errG.item(), D_x, D_G_z1, D_G_z2

    step = env.step(step)
    env.rec("hist", [step(r) for r in reals])
    with torch.no_grad():
        env.rec("fixed", netG(fixed_noise))
    env.rec("D", netD.state_dict())


def vae_tutorial(torch, env):
    """examples/vae: fc encoder to mu / logvar, reparameterize with randn_like, BCE + KLD
    summed, a test pass under no_grad, sampling from the prior."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(64, 32)
            self.fc21 = nn.Linear(32, 4)
            self.fc22 = nn.Linear(32, 4)
            self.fc3 = nn.Linear(4, 32)
            self.fc4 = nn.Linear(32, 64)

        def encode(self, x):
            h1 = F.relu(self.fc1(x))
            return self.fc21(h1), self.fc22(h1)

        def reparameterize(self, mu, logvar):
            std = torch.exp(0.5 * logvar)
            eps = torch.randn_like(std)
            return mu + eps * std

        def decode(self, z):
            return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

        def forward(self, x):
            mu, logvar = self.encode(x.view(-1, 64))
            z = self.reparameterize(mu, logvar)
            return self.decode(z), mu, logvar

    def loss_function(recon_x, x, mu, logvar):
        BCE = F.binary_cross_entropy(recon_x, x.view(-1, 64), reduction="sum")
        KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return BCE + KLD

    model = VAE()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = torch.rand(5, 8, 1, 8, 8)

    def train_step(x):
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(x)
        loss = loss_function(recon_batch, x, mu, logvar)
        loss.backward()
        optimizer.step()
        return loss.item()

    train_step = env.step(train_step)
    for epoch in range(2):
        model.train()
        env.rec(f"train {epoch}", [train_step(x) / len(x) for x in data])
        model.eval()
        with torch.no_grad():
            test_loss = 0
            for x in data[:2]:
                recon_batch, mu, logvar = model(x)
                test_loss += loss_function(recon_batch, x, mu, logvar).item()
        env.rec(f"test {epoch}", test_loss)
    with torch.no_grad():
        sample = torch.randn(6, 4)
        env.rec("sample", model.decode(sample).view(6, 1, 8, 8))


def autoencoder(torch, env):
    """A fully connected autoencoder trained with MSE through a shuffled DataLoader; the
    codes of the test set."""
    nn = torch.nn
    data = torch.utils.data
    torch.manual_seed(0)

    class AE(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 4))
            self.decoder = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 32),
                                         nn.Sigmoid())

        def forward(self, x):
            return self.decoder(self.encoder(x))

    model = AE()
    loader = data.DataLoader(data.TensorDataset(torch.rand(40, 32)), batch_size=8, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-5)
    criterion = nn.MSELoss()

    def step(img):
        output = model(img)
        loss = criterion(output, img)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    step = env.step(step)
    env.rec("losses", [step(img) for _ in range(3) for (img,) in loader])
    with torch.no_grad():
        env.rec("codes", model.encoder(torch.rand(3, 32)))


def embeddingbag_text_classification(torch, env):
    """The text classification tutorial: collate_batch building a flat text tensor and
    offsets (cumsum), EmbeddingBag(mean), init_weights with uniform_, SGD + StepLR,
    clip_grad_norm_(0.1), accuracy."""
    nn = torch.nn
    data = torch.utils.data
    torch.manual_seed(0)
    vocab_size, emsize, num_class = 50, 16, 4
    lengths = torch.randint(3, 12, (32,)).tolist()
    dataset = [(int(torch.randint(0, num_class, (1,))), torch.randint(0, vocab_size, (n,)).tolist())
               for n in lengths]

    def collate_batch(batch):
        label_list, text_list, offsets = [], [], [0]
        for _label, _text in batch:
            label_list.append(_label)
            processed_text = torch.tensor(_text, dtype=torch.int64)
            text_list.append(processed_text)
            offsets.append(processed_text.size(0))
        label_list = torch.tensor(label_list, dtype=torch.int64)
        offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
        text_list = torch.cat(text_list)
        return label_list, text_list, offsets

    class TextClassificationModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.EmbeddingBag(vocab_size, emsize, sparse=False)
            self.fc = nn.Linear(emsize, num_class)
            self.init_weights()

        def init_weights(self):
            initrange = 0.5
            self.embedding.weight.data.uniform_(-initrange, initrange)
            self.fc.weight.data.uniform_(-initrange, initrange)
            self.fc.bias.data.zero_()

        def forward(self, text, offsets):
            return self.fc(self.embedding(text, offsets))

    train_ds, valid_ds = data.random_split(dataset, [24, 8])
    train_dataloader = data.DataLoader(train_ds, batch_size=8, shuffle=True,
                                       collate_fn=collate_batch)
    valid_dataloader = data.DataLoader(valid_ds, batch_size=8, collate_fn=collate_batch)
    model = TextClassificationModel()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=5)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)

    def train_step(label, text, offsets):
        optimizer.zero_grad()
        predicted_label = model(text, offsets)
        loss = criterion(predicted_label, label)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        optimizer.step()
        return (predicted_label.argmax(1) == label).sum().item(), loss.item()

    train_step = env.step(train_step)
    for epoch in range(3):
        model.train()
        env.rec(f"train {epoch}", [train_step(*b) for b in train_dataloader])
        model.eval()
        total_acc, total_count = 0, 0
        with torch.no_grad():
            for label, text, offsets in valid_dataloader:
                predicted_label = model(text, offsets)
                total_acc += (predicted_label.argmax(1) == label).sum().item()
                total_count += label.size(0)
        env.rec(f"valid {epoch}", total_acc / total_count)
        scheduler.step()
    env.rec("split", (list(train_ds.indices), list(valid_ds.indices)))
    env.rec("weights", model.state_dict())


PROGRAMS = {f.__name__: f for f in [
    word_language_model, char_rnn_names, seq2seq_attention_gru, dcgan_small, vae_tutorial,
    autoencoder, embeddingbag_text_classification]}


# (over ~1.5 s each with their builds, on a machine the suite shares: in the slow run)
SLOW = {"autoencoder", "char_rnn_names", "dcgan_small", "embeddingbag_text_classification",
        "seq2seq_attention_gru", "vae_tutorial", "word_language_model"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], rtol=1e-4, atol=1e-6)
