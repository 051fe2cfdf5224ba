"""Batch 22 (s74, u12), part 2: Gatys style transfer as the tutorial builds it (a Sequential
made from a CNN's children with content / style loss modules that store self.loss, trimmed
after the last loss, LBFGS on the input image with run[0] counted outside the compiled body),
DQN (a replay deque of namedtuples, non-final masks, SmoothL1Loss, clip_grad_value_, AdamW
with amsgrad; the soft target update through state_dicts and the epsilon-greedy
select_action compiled as well: its `torch.tensor([[random.randrange(2)]])` of a draw ran
eagerly, "cannot replay", before runtime/tensor_stand_ins.py) and AG_NEWS-style
text classification (EmbeddingBag with offsets from a collate_fn's cumsum, a DataLoader,
SGD lr=5 with clip_grad_norm_, StepLR stepped when validation accuracy drops)."""
import collections
import math
import random

import pytest

torch = pytest.importorskip("torch")

from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def style_transfer_sequential(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    cnn = env.init(nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(inplace=True),
                                 nn.MaxPool2d(2), nn.Conv2d(4, 6, 3, padding=1),
                                 nn.ReLU(inplace=True), nn.Conv2d(6, 6, 3, padding=1),
                                 nn.ReLU(inplace=True))).eval()
    norm_mean, norm_std = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])

    class ContentLoss(nn.Module):
        def __init__(self, target):
            super().__init__()
            self.target = target.detach()

        def forward(self, input):
            self.loss = F.mse_loss(input, self.target)
            return input

    def gram_matrix(input):
        a, b, c, d = input.size()
        features = input.view(a * b, c * d)
        G = torch.mm(features, features.t())
        return G.div(a * b * c * d)

    class StyleLoss(nn.Module):
        def __init__(self, target_feature):
            super().__init__()
            self.target = gram_matrix(target_feature).detach()

        def forward(self, input):
            self.loss = F.mse_loss(gram_matrix(input), self.target)
            return input

    class Normalization(nn.Module):
        def __init__(self, mean, std):
            super().__init__()
            self.mean = torch.tensor(mean).view(-1, 1, 1)
            self.std = torch.tensor(std).view(-1, 1, 1)

        def forward(self, img):
            return (img - self.mean) / self.std

    def get_style_model_and_losses(style_img, content_img, content_layers=("conv_3",),
                                   style_layers=("conv_1", "conv_2", "conv_3")):
        content_losses, style_losses = [], []
        model = nn.Sequential(Normalization(norm_mean, norm_std))
        i = 0
        for layer in cnn.children():
            if isinstance(layer, nn.Conv2d):
                i += 1
                name = f"conv_{i}"
            elif isinstance(layer, nn.ReLU):
                name = f"relu_{i}"
                layer = nn.ReLU(inplace=False)
            elif isinstance(layer, nn.MaxPool2d):
                name = f"pool_{i}"
            else:
                raise RuntimeError(f"Unrecognized layer: {layer.__class__.__name__}")
            model.add_module(name, layer)
            if name in content_layers:
                content_loss = ContentLoss(model(content_img).detach())
                model.add_module(f"content_loss_{i}", content_loss)
                content_losses.append(content_loss)
            if name in style_layers:
                style_loss = StyleLoss(model(style_img).detach())
                model.add_module(f"style_loss_{i}", style_loss)
                style_losses.append(style_loss)
        for i in range(len(model) - 1, -1, -1):
            if isinstance(model[i], (ContentLoss, StyleLoss)):
                break
        return model[:(i + 1)], style_losses, content_losses

    content_img, style_img = env.rand(1, 3, 8, 8), env.rand(1, 3, 8, 8)
    input_img = content_img.clone()
    model, style_losses, content_losses = get_style_model_and_losses(style_img, content_img)
    env.rec("layers", [type(m).__name__ for m in model] + list(dict(model.named_children())))
    input_img.requires_grad_(True)
    model.eval()
    model.requires_grad_(False)
    optimizer = optim.LBFGS([input_img], max_iter=4)
    style_weight, content_weight = 1e5, 1

    def closure_body():
        with torch.no_grad():
            input_img.clamp_(0, 1)
        optimizer.zero_grad()
        model(input_img)
        style_score = 0
        content_score = 0
        for sl in style_losses:
            style_score += sl.loss
        for cl in content_losses:
            content_score += cl.loss
        style_score *= style_weight
        content_score *= content_weight
        loss = style_score + content_score
        loss.backward()
        return style_score + content_score, style_score.detach(), content_score.detach()
    body = env.step(closure_body)
    run = [0]
    scores = []

    def closure():
        total, s, c = body()
        run[0] += 1
        scores.append((run[0], s.item(), c.item()))
        return total
    while run[0] <= 8:
        optimizer.step(closure)
    with torch.no_grad():
        input_img.clamp_(0, 1)
    env.rec("scores", scores)
    env.rec("img", input_img)
    env.rec("state", optimizer.state_dict()["state"][0]["n_iter"])


Transition = collections.namedtuple("Transition", ("state", "action", "next_state", "reward"))


class ReplayMemory:
    def __init__(self, capacity, rng):
        self.memory = collections.deque([], maxlen=capacity)
        self.rng = rng

    def push(self, *args):
        self.memory.append(Transition(*args))

    def sample(self, batch_size):
        return self.rng.sample(self.memory, batch_size)

    def __len__(self):
        return len(self.memory)


def dqn_soft_update(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    BATCH_SIZE, GAMMA, EPS_START, EPS_END, EPS_DECAY, TAU, LR = 6, 0.99, 0.9, 0.05, 20, 0.005, 1e-3

    class DQN(nn.Module):
        def __init__(self, n_observations, n_actions):
            super().__init__()
            self.layer1 = nn.Linear(n_observations, 16)
            self.layer2 = nn.Linear(16, 16)
            self.layer3 = nn.Linear(16, n_actions)

        def forward(self, x):
            x = F.relu(self.layer1(x))
            x = F.relu(self.layer2(x))
            return self.layer3(x)

    policy_net = env.init(DQN(4, 2))
    target_net = DQN(4, 2)
    target_net.load_state_dict(policy_net.state_dict())
    optimizer = optim.AdamW(policy_net.parameters(), lr=LR, amsgrad=True)
    random.seed(0)      # (epsilon-greedy draws from the random module, as the tutorial's)
    memory = ReplayMemory(50, random.Random(1))
    steps_done = 0

    def select_action(state):
        nonlocal steps_done
        sample = random.random()
        eps_threshold = EPS_END + (EPS_START - EPS_END) * math.exp(-1. * steps_done / EPS_DECAY)
        steps_done += 1
        if sample > eps_threshold:
            with torch.no_grad():
                return policy_net(state).max(1).indices.view(1, 1)
        return torch.tensor([[random.randrange(2)]], dtype=torch.long)

    def env_step(s, a):            # (a cart-pole-like system in Python floats)
        x, v, th, w = s
        force = 1.0 if a == 1 else -1.0
        w2 = w + 0.05 * (9.8 * math.sin(th) - force * math.cos(th))
        v2 = v + 0.05 * force
        s2 = (x + 0.05 * v2, v2, th + 0.05 * w2, w2)
        return s2, 1.0, abs(s2[2]) > 0.2 or abs(s2[0]) > 1.0

    def optimize_model(state_batch, action_batch, reward_batch, non_final_mask,
                       non_final_next_states):
        state_action_values = policy_net(state_batch).gather(1, action_batch)
        next_state_values = torch.zeros(BATCH_SIZE)
        with torch.no_grad():
            next_state_values[non_final_mask] = target_net(non_final_next_states).max(1).values
        expected_state_action_values = (next_state_values * GAMMA) + reward_batch
        criterion = nn.SmoothL1Loss()
        loss = criterion(state_action_values, expected_state_action_values.unsqueeze(1))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
        optimizer.step()
        return loss.detach()
    opt_step = env.step(optimize_model)
    act = env.step(select_action)   # (its draws made again by each compiled call)

    def soft_update(target_net, policy_net):
        target_net_state_dict = target_net.state_dict()
        policy_net_state_dict = policy_net.state_dict()
        for key in policy_net_state_dict:
            target_net_state_dict[key] = (policy_net_state_dict[key] * TAU
                                          + target_net_state_dict[key] * (1 - TAU))
        target_net.load_state_dict(target_net_state_dict)
    soft = env.step(soft_update)
    durations = []
    for i_episode in range(3):
        s = tuple(v * 0.05 for v in env.randn(4).tolist())
        state = torch.tensor(s, dtype=torch.float32).unsqueeze(0)
        for t in range(30):
            action = act(state)
            s, reward, terminated = env_step(s, action.item())
            reward = torch.tensor([reward])
            next_state = None if terminated else torch.tensor(s, dtype=torch.float32).unsqueeze(0)
            memory.push(state, action, next_state, reward)
            state = next_state
            if len(memory) >= BATCH_SIZE:
                transitions = memory.sample(BATCH_SIZE)
                batch = Transition(*zip(*transitions))
                non_final_mask = torch.tensor(tuple(map(lambda s: s is not None,
                                                        batch.next_state)), dtype=torch.bool)
                non_final_next_states = torch.cat([s for s in batch.next_state if s is not None])
                env.rec(f"loss {i_episode} {t}", opt_step(
                    torch.cat(batch.state), torch.cat(batch.action), torch.cat(batch.reward),
                    non_final_mask, non_final_next_states))
                soft(target_net, policy_net)
            if terminated:
                durations.append(t + 1)
                break
    env.rec("durations", durations)
    env.rec("policy", dict(policy_net.state_dict()))
    env.rec("target", dict(target_net.state_dict()))


def text_classification_embeddingbag(torch, env):
    nn = torch.nn
    from_lib = torch.utils.data
    corpus = [("1", "stocks rally as markets rise"), ("2", "team wins the final game"),
              ("3", "new chip speeds up phones"), ("1", "bank rates fall again"),
              ("2", "coach praises the team"), ("3", "software update fixes phones"),
              ("1", "markets slip on bank news"), ("2", "star scores in final"),
              ("3", "chip maker unveils software"), ("1", "stocks and rates rise"),
              ("2", "game ends in a draw"), ("3", "phones get new chip")]
    tokenizer = str.split
    counts = collections.Counter(tok for _, line in corpus for tok in tokenizer(line))
    itos = ["<unk>"] + sorted(counts, key=lambda w: (-counts[w], w))
    stoi = {w: i for i, w in enumerate(itos)}

    def text_pipeline(x):
        return [stoi.get(tok, 0) for tok in tokenizer(x)]

    def label_pipeline(x):
        return int(x) - 1

    def collate_batch(batch):
        label_list, text_list, offsets = [], [], [0]
        for _label, _text in batch:
            label_list.append(label_pipeline(_label))
            processed_text = torch.tensor(text_pipeline(_text), dtype=torch.int64)
            text_list.append(processed_text)
            offsets.append(processed_text.size(0))
        label_list = torch.tensor(label_list, dtype=torch.int64)
        offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
        text_list = torch.cat(text_list)
        return label_list, text_list, offsets

    class TextClassificationModel(nn.Module):
        def __init__(self, vocab_size, embed_dim, num_class):
            super().__init__()
            self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
            self.fc = nn.Linear(embed_dim, num_class)
            self.init_weights()

        def init_weights(self):
            initrange = 0.5
            self.embedding.weight.data.uniform_(-initrange, initrange)
            self.fc.weight.data.uniform_(-initrange, initrange)
            self.fc.bias.data.zero_()

        def forward(self, text, offsets):
            return self.fc(self.embedding(text, offsets))

    model = env.init(TextClassificationModel(len(itos), 8, 3))
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=5)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)
    train_dataloader = from_lib.DataLoader(corpus[:8], batch_size=3, shuffle=False,
                                           collate_fn=collate_batch)
    valid_dataloader = from_lib.DataLoader(corpus[8:], batch_size=3, shuffle=False,
                                           collate_fn=collate_batch)

    def train_step(label, text, offsets):
        optimizer.zero_grad()
        predicted_label = model(text, offsets)
        loss = criterion(predicted_label, label)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        optimizer.step()
        return (predicted_label.argmax(1) == label).sum().item(), label.size(0), loss.detach()
    step = env.step(train_step)

    def evaluate(dataloader):
        model.eval()
        total_acc, total_count = 0, 0
        with torch.no_grad():
            for label, text, offsets in dataloader:
                predicted_label = model(text, offsets)
                total_acc += (predicted_label.argmax(1) == label).sum().item()
                total_count += label.size(0)
        return total_acc / total_count

    total_accu = None
    for epoch in range(1, 4):
        model.train()
        for idx, (label, text, offsets) in enumerate(train_dataloader):
            env.rec(f"{epoch} {idx} offsets", offsets)
            env.rec(f"{epoch} {idx}", step(label, text, offsets))
        accu_val = evaluate(valid_dataloader)
        if total_accu is not None and total_accu > accu_val:
            scheduler.step()
        else:
            total_accu = accu_val
        env.rec(f"epoch {epoch}", f"| end of epoch {epoch:3d} | valid accuracy {accu_val:8.3f} "
                                  f"| lr {scheduler.get_last_lr()[0]}")
    ex_text_str = "markets rise on chip news"
    with torch.no_grad():
        text = torch.tensor(text_pipeline(ex_text_str))
        output = model(text, torch.tensor([0]))
        env.rec("predict", output.argmax(1).item() + 1)
    env.rec("params", dict(model.state_dict()))


PROGRAMS = {f.__name__: f for f in (style_transfer_sequential, dqn_soft_update,
                                     text_classification_embeddingbag)}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS))
def test_program(name, program):
    run_tutorial(program, rtol=1e-4, atol=1e-5)
