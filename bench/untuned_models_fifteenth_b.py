"""untuned_models_fifteenth.py's PPO update and DeepLabV3 segmenter: _ppo(lib, small) ->
(model, step), its whole update a step; _deeplab(lib, small) -> (model, optimizer, loss
closure, {"scheduler"/"data"}); seeded by build."""


def _ppo(lib, small):
    # (nikhilbarhate99/PPO-PyTorch's PPO.py, discrete actions, as written there: the rollout
    # collected once by policy_old.act on a stand-in environment's states and Python-float
    # rewards; each step is update() without buffer.clear(), so every step sees that rollout)
    nn = lib.nn
    Categorical = lib.distributions.Categorical
    state_dim, action_dim, timesteps, ep_len, k_epochs = ((4, 3, 16, 6, 2) if small else
                                                          (8, 4, 512, 200, 4))
    lr_actor, lr_critic, gamma, eps_clip = 0.0003, 0.001, 0.99, 0.2

    class RolloutBuffer:
        def __init__(self):
            self.actions, self.states, self.logprobs = [], [], []
            self.rewards, self.state_values, self.is_terminals = [], [], []

    class ActorCritic(nn.Module):
        def __init__(self, state_dim, action_dim):
            super(ActorCritic, self).__init__()
            self.actor = nn.Sequential(nn.Linear(state_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                                       nn.Linear(64, action_dim), nn.Softmax(dim=-1))
            self.critic = nn.Sequential(nn.Linear(state_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                                        nn.Linear(64, 1))

        def act(self, state):
            action_probs = self.actor(state)
            dist = Categorical(action_probs)
            action = dist.sample()
            action_logprob = dist.log_prob(action)
            state_val = self.critic(state)
            return action.detach(), action_logprob.detach(), state_val.detach()

        def evaluate(self, state, action):
            action_probs = self.actor(state)
            dist = Categorical(action_probs)
            action_logprobs = dist.log_prob(action)
            dist_entropy = dist.entropy()
            state_values = self.critic(state)
            return action_logprobs, state_values, dist_entropy

    class PPO:
        def __init__(self):
            self.gamma, self.eps_clip, self.K_epochs = gamma, eps_clip, k_epochs
            self.buffer = RolloutBuffer()
            self.policy = ActorCritic(state_dim, action_dim)
            self.optimizer = lib.optim.Adam([
                {'params': self.policy.actor.parameters(), 'lr': lr_actor},
                {'params': self.policy.critic.parameters(), 'lr': lr_critic}])
            self.policy_old = ActorCritic(state_dim, action_dim)
            self.policy_old.load_state_dict(self.policy.state_dict())
            self.MseLoss = nn.MSELoss()

        def select_action(self, state):
            with lib.no_grad():
                state = lib.FloatTensor(state)
                action, action_logprob, state_val = self.policy_old.act(state)
            self.buffer.states.append(state)
            self.buffer.actions.append(action)
            self.buffer.logprobs.append(action_logprob)
            self.buffer.state_values.append(state_val)
            return action.item()

        def update(self):
            rewards = []
            discounted_reward = 0
            for reward, is_terminal in zip(reversed(self.buffer.rewards), reversed(self.buffer.is_terminals)):
                if is_terminal:
                    discounted_reward = 0
                discounted_reward = reward + (self.gamma * discounted_reward)
                rewards.insert(0, discounted_reward)
            rewards = lib.tensor(rewards, dtype=lib.float32)
            rewards = (rewards - rewards.mean()) / (rewards.std() + 1e-7)
            old_states = lib.squeeze(lib.stack(self.buffer.states, dim=0)).detach()
            old_actions = lib.squeeze(lib.stack(self.buffer.actions, dim=0)).detach()
            old_logprobs = lib.squeeze(lib.stack(self.buffer.logprobs, dim=0)).detach()
            old_state_values = lib.squeeze(lib.stack(self.buffer.state_values, dim=0)).detach()
            advantages = rewards.detach() - old_state_values.detach()
            for _ in range(self.K_epochs):
                logprobs, state_values, dist_entropy = self.policy.evaluate(old_states, old_actions)
                state_values = lib.squeeze(state_values)
                ratios = lib.exp(logprobs - old_logprobs.detach())
                surr1 = ratios * advantages
                surr2 = lib.clamp(ratios, 1 - self.eps_clip, 1 + self.eps_clip) * advantages
                loss = -lib.min(surr1, surr2) + 0.5 * self.MseLoss(state_values, rewards) - 0.01 * dist_entropy
                self.optimizer.zero_grad()
                loss.mean().backward()
                self.optimizer.step()
            self.policy_old.load_state_dict(self.policy.state_dict())
            return loss.mean().detach()

    agent = PPO()
    states = lib.randn(timesteps, state_dim).tolist()       # (the environment's observations)
    rewards = (lib.rand(timesteps) * 2 - 1).tolist()
    for t in range(timesteps):
        agent.select_action(states[t])
        agent.buffer.rewards.append(rewards[t])
        agent.buffer.is_terminals.append((t + 1) % ep_len == 0)
    return agent.policy, agent.update


def _deeplab(lib, small):
    # (torchvision's models/segmentation deeplabv3.py ASPP, ASPPConv, ASPPPooling and
    # DeepLabHead, _SimpleSegmentationModel's forward and references/segmentation's criterion
    # and poly schedule, on a small ResNet of BasicBlocks whose last stage is dilated (output
    # stride 8, as replace_stride_with_dilation makes it); ASPP at 64 channels, not 256)
    from collections import OrderedDict
    nn, F = lib.nn, lib.nn.functional
    batch, size, width, classes, aspp = (2, 32, 4, 3, 8) if small else (8, 96, 16, 21, 64)

    class BasicBlock(nn.Module):
        def __init__(self, inplanes, planes, stride=1, dilation=1):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, padding=dilation, dilation=dilation, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, padding=dilation, dilation=dilation, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = None
            if stride != 1 or inplanes != planes:
                self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                                nn.BatchNorm2d(planes))

        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            return self.relu(out)

    class Backbone(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
            self.bn1, self.relu = nn.BatchNorm2d(width), nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            self.layer1 = BasicBlock(width, width)
            self.layer2 = BasicBlock(width, 2 * width, stride=2)
            self.layer3 = BasicBlock(2 * width, 4 * width, dilation=2)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            return OrderedDict(out=self.layer3(self.layer2(self.layer1(x))))

    class ASPPConv(nn.Sequential):
        def __init__(self, in_channels, out_channels, dilation):
            modules = [nn.Conv2d(in_channels, out_channels, 3, padding=dilation, dilation=dilation, bias=False),
                       nn.BatchNorm2d(out_channels), nn.ReLU()]
            super().__init__(*modules)

    class ASPPPooling(nn.Sequential):
        def __init__(self, in_channels, out_channels):
            super().__init__(nn.AdaptiveAvgPool2d(1), nn.Conv2d(in_channels, out_channels, 1, bias=False),
                             nn.BatchNorm2d(out_channels), nn.ReLU())

        def forward(self, x):
            size = x.shape[-2:]
            for mod in self:
                x = mod(x)
            return F.interpolate(x, size=size, mode="bilinear", align_corners=False)

    class ASPP(nn.Module):
        def __init__(self, in_channels, atrous_rates, out_channels=256):
            super().__init__()
            modules = [nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, bias=False),
                                     nn.BatchNorm2d(out_channels), nn.ReLU())]
            rates = tuple(atrous_rates)
            for rate in rates:
                modules.append(ASPPConv(in_channels, out_channels, rate))
            modules.append(ASPPPooling(in_channels, out_channels))
            self.convs = nn.ModuleList(modules)
            self.project = nn.Sequential(nn.Conv2d(len(self.convs) * out_channels, out_channels, 1, bias=False),
                                         nn.BatchNorm2d(out_channels), nn.ReLU(), nn.Dropout(0.5))

        def forward(self, x):
            _res = []
            for conv in self.convs:
                _res.append(conv(x))
            res = lib.cat(_res, dim=1)
            return self.project(res)

    class DeepLabHead(nn.Sequential):
        def __init__(self, in_channels, num_classes, atrous_rates=(12, 24, 36)):
            super().__init__(ASPP(in_channels, atrous_rates, aspp),
                             nn.Conv2d(aspp, aspp, 3, padding=1, bias=False), nn.BatchNorm2d(aspp),
                             nn.ReLU(), nn.Conv2d(aspp, num_classes, 1))

    class DeepLabV3(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = Backbone()
            self.classifier = DeepLabHead(4 * width, classes)

        def forward(self, x):
            input_shape = x.shape[-2:]
            features = self.backbone(x)
            result = OrderedDict()
            x = features["out"]
            x = self.classifier(x)
            x = F.interpolate(x, size=input_shape, mode="bilinear", align_corners=False)
            result["out"] = x
            return result

    def criterion(inputs, target):
        losses = {}
        for name, x in inputs.items():
            losses[name] = nn.functional.cross_entropy(x, target, ignore_index=255)
        if len(losses) == 1:
            return losses["out"]
        return losses["out"] + 0.5 * losses["aux"]

    model = DeepLabV3()
    params_to_optimize = [{"params": [p for p in model.backbone.parameters() if p.requires_grad]},
                          {"params": [p for p in model.classifier.parameters() if p.requires_grad]}]
    optimizer = lib.optim.SGD(params_to_optimize, lr=0.01, momentum=0.9, weight_decay=1e-4)
    total_iters = 1000
    scheduler = lib.optim.lr_scheduler.LambdaLR(optimizer, lambda x: (1 - x / total_iters) ** 0.9)
    image = lib.randn(batch, 3, size, size)
    target = lib.randint(0, classes, (batch, size, size))
    target[:, :, :size // 8] = 255          # (the void border VOC's masks carry)

    def loss():
        return criterion(model(image), target)
    return model, optimizer, loss, {"scheduler": scheduler, "data": (image, target)}
