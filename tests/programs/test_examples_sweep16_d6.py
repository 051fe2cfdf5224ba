"""Sweep 16 (D), part 6: pytorch/examples' imagenet/main.py at small size: SGD with momentum
and weight decay, StepLR, the top-k accuracy with t()/eq/expand_as/reshape/mul_, the
checkpoint dict through torch.save / torch.load(map_location=...) and a resume that
loads model, optimizer and scheduler states and trains on. See tutorial_harness.py."""
import pytest

pytest.importorskip("torch")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def imagenet(torch, env):
    nn = torch.nn

    def accuracy(output, target, topk=(1,)):
        with torch.no_grad():
            maxk = max(topk)
            batch_size = target.size(0)
            _, pred = output.topk(maxk, 1, True, True)
            pred = pred.t()
            correct = pred.eq(target.view(1, -1).expand_as(pred))
            res = []
            for k in topk:
                correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
                res.append(correct_k.mul_(100.0 / batch_size))
            return res

    def make():
        return nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(inplace=True),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(6 * 4 * 4, 10))

    model = env.init(make())
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.1)

    def train_step(images, target):
        output = model(images)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return output, loss

    step = env.step(train_step)
    batches = [(env.rand(8, 3, 8, 8), env.randint(0, 10, (8,))) for _ in range(2)]
    for epoch in range(3):
        model.train()
        for images, target in batches:
            output, loss = step(images, target)
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            env.rec(f"train {epoch}", (loss, acc1, acc5))
        scheduler.step()
    path = env.path("checkpoint.pth.tar")
    torch.save({'epoch': 3, 'arch': 'small', 'state_dict': model.state_dict(),
                'best_acc1': acc1, 'optimizer': optimizer.state_dict(),
                'scheduler': scheduler.state_dict()}, path)

    resumed = make()
    opt2 = torch.optim.SGD(resumed.parameters(), 0.1, momentum=0.9, weight_decay=1e-4)
    sched2 = torch.optim.lr_scheduler.StepLR(opt2, step_size=2, gamma=0.1)
    checkpoint = torch.load(path, map_location='cpu')
    resumed.load_state_dict(checkpoint['state_dict'])
    opt2.load_state_dict(checkpoint['optimizer'])
    sched2.load_state_dict(checkpoint['scheduler'])
    env.rec("resumed", (checkpoint['epoch'], checkpoint['best_acc1'], sched2.get_last_lr()))
    model, optimizer, scheduler = resumed, opt2, sched2
    step = env.step(train_step)
    for epoch in range(3, 5):
        for images, target in batches:
            output, loss = step(images, target)
            env.rec(f"resumed train {epoch}", (loss, accuracy(output, target, (1, 3))))
        scheduler.step()
        env.rec(f"lr {epoch}", scheduler.get_last_lr())
    model.eval()
    with torch.no_grad():
        output = model(batches[0][0])
        env.rec("eval", (output, accuracy(output, batches[0][1], topk=(1, 5))))
    env.rec("momentum", [optimizer.state[p]["momentum_buffer"] for p in model.parameters()])


def test_imagenet():
    run_tutorial(imagenet, rtol=1e-5, atol=1e-6)


def translation(torch, env):
    """language_translation's Translator: nn.Transformer(batch_first=True) with a causal
    target mask, bool padding masks, CrossEntropyLoss(ignore_index=PAD), Adam, then greedy
    decoding through encode / decode with a growing target."""
    nn, math = torch.nn, __import__("math")
    PAD, BOS, EOS, V, E = 1, 2, 3, 12, 8

    class PositionalEncoding(nn.Module):
        def __init__(self, emb_size, maxlen=50):
            super().__init__()
            den = torch.exp(- torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
            pos = torch.arange(0, maxlen).reshape(maxlen, 1)
            pos_embedding = torch.zeros((maxlen, emb_size))
            pos_embedding[:, 0::2] = torch.sin(pos * den)
            pos_embedding[:, 1::2] = torch.cos(pos * den)
            self.register_buffer('pos_embedding', pos_embedding.unsqueeze(0))

        def forward(self, token_embedding):
            return token_embedding + self.pos_embedding[:, :token_embedding.size(1), :]

    class Translator(nn.Module):
        def __init__(self):
            super().__init__()
            self.src_embedding = nn.Embedding(V, E)
            self.tgt_embedding = nn.Embedding(V, E)
            self.pos = PositionalEncoding(E)
            self.transformer = nn.Transformer(d_model=E, nhead=2, num_encoder_layers=1,
                                              num_decoder_layers=1, dim_feedforward=16,
                                              dropout=0.0, batch_first=True)
            self.ff = nn.Linear(E, V)

        def forward(self, src, trg, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask,
                    memory_key_padding_mask):
            src_emb = self.pos(self.src_embedding(src) * math.sqrt(E))
            tgt_emb = self.pos(self.tgt_embedding(trg) * math.sqrt(E))
            outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None,
                                    src_padding_mask, tgt_padding_mask, memory_key_padding_mask)
            return self.ff(outs)

        def encode(self, src, src_mask):
            return self.transformer.encoder(self.pos(self.src_embedding(src) * math.sqrt(E)), src_mask)

        def decode(self, tgt, memory, tgt_mask):
            return self.transformer.decoder(self.pos(self.tgt_embedding(tgt) * math.sqrt(E)),
                                            memory, tgt_mask)

    def create_mask(src, tgt):
        src_seq_len, tgt_seq_len = src.shape[1], tgt.shape[1]
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(tgt_seq_len)
        src_mask = torch.zeros((src_seq_len, src_seq_len)).type(torch.bool)
        return src_mask, tgt_mask, (src == PAD), (tgt == PAD)

    model = env.init(Translator())
    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)

    def train_step(src, tgt):
        tgt_input = tgt[:, :-1]
        src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input)
        logits = model(src, tgt_input, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask,
                       src_padding_mask)
        optimizer.zero_grad()
        tgt_out = tgt[:, 1:]
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        loss.backward()
        optimizer.step()
        return loss

    step = env.step(train_step)
    src = env.randint(4, V, (3, 6))
    tgt = env.randint(4, V, (3, 7))
    src[0, 4:] = PAD
    tgt[1, 5:] = PAD
    tgt[:, 0] = BOS
    for k in range(3):
        env.rec(f"loss {k}", step(src, tgt))
    model.eval()
    with torch.no_grad():
        s = src[:1, :4]
        memory = model.encode(s, torch.zeros(4, 4).type(torch.bool))
        ys = torch.ones(1, 1).fill_(BOS).type(torch.long)
        for i in range(5):
            tgt_mask = nn.Transformer.generate_square_subsequent_mask(ys.size(1)).type(torch.bool)
            out = model.decode(ys, memory, tgt_mask)
            prob = model.ff(out[:, -1])
            _, next_word = torch.max(prob, dim=1)
            ys = torch.cat([ys, torch.ones(1, 1).type_as(s.data).fill_(next_word.item())], dim=1)
        env.rec("decoded", ys)
        env.rec("last prob", prob)


def test_language_translation():
    run_tutorial(translation, rtol=1e-4, atol=1e-5)
