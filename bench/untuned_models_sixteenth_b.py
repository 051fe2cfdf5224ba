"""untuned_models_sixteenth.py's SAC update and CycleGAN step: _sac(lib, small) and
_cyclegan(lib, small) -> (model, step), each step its reference's whole update with its
several optimisers; seeded by build (SAC's replay memory by Python's random, seeded here as
its main.py seeds it)."""
import functools
import itertools
import random


def _sac(lib, small):
    # (pranz24/pytorch-soft-actor-critic's model.py and sac.py as written there: QNetwork,
    # GaussianPolicy, SAC.update_parameters with automatic_entropy_tuning and
    # target_update_interval 1, ReplayMemory.sample by random.sample and np.stack; the memory
    # filled once with a stand-in environment's transitions, as after the start steps)
    import numpy as np
    nn, F = lib.nn, lib.nn.functional
    Normal = lib.distributions.Normal
    state_dim, action_dim, hidden, batch_size, capacity = ((3, 2, 8, 4, 32) if small else
                                                           (17, 6, 256, 256, 10000))
    LOG_SIG_MAX, LOG_SIG_MIN, epsilon = 2, -20, 1e-6

    def weights_init_(m):
        if isinstance(m, nn.Linear):
            lib.nn.init.xavier_uniform_(m.weight, gain=1)
            lib.nn.init.constant_(m.bias, 0)

    class QNetwork(nn.Module):
        def __init__(self, num_inputs, num_actions, hidden_dim):
            super(QNetwork, self).__init__()
            self.linear1 = nn.Linear(num_inputs + num_actions, hidden_dim)
            self.linear2 = nn.Linear(hidden_dim, hidden_dim)
            self.linear3 = nn.Linear(hidden_dim, 1)
            self.linear4 = nn.Linear(num_inputs + num_actions, hidden_dim)
            self.linear5 = nn.Linear(hidden_dim, hidden_dim)
            self.linear6 = nn.Linear(hidden_dim, 1)
            self.apply(weights_init_)

        def forward(self, state, action):
            xu = lib.cat([state, action], 1)
            x1 = F.relu(self.linear1(xu))
            x1 = F.relu(self.linear2(x1))
            x1 = self.linear3(x1)
            x2 = F.relu(self.linear4(xu))
            x2 = F.relu(self.linear5(x2))
            x2 = self.linear6(x2)
            return x1, x2

    class GaussianPolicy(nn.Module):
        def __init__(self, num_inputs, num_actions, hidden_dim):
            super(GaussianPolicy, self).__init__()
            self.linear1 = nn.Linear(num_inputs, hidden_dim)
            self.linear2 = nn.Linear(hidden_dim, hidden_dim)
            self.mean_linear = nn.Linear(hidden_dim, num_actions)
            self.log_std_linear = nn.Linear(hidden_dim, num_actions)
            self.apply(weights_init_)
            self.action_scale = lib.tensor(1.)
            self.action_bias = lib.tensor(0.)

        def forward(self, state):
            x = F.relu(self.linear1(state))
            x = F.relu(self.linear2(x))
            mean = self.mean_linear(x)
            log_std = self.log_std_linear(x)
            log_std = lib.clamp(log_std, min=LOG_SIG_MIN, max=LOG_SIG_MAX)
            return mean, log_std

        def sample(self, state):
            mean, log_std = self.forward(state)
            std = log_std.exp()
            normal = Normal(mean, std)
            x_t = normal.rsample()  # for reparameterization trick (mean + std * N(0,1))
            y_t = lib.tanh(x_t)
            action = y_t * self.action_scale + self.action_bias
            log_prob = normal.log_prob(x_t)
            # Enforcing Action Bound
            log_prob -= lib.log(self.action_scale * (1 - y_t.pow(2)) + epsilon)
            log_prob = log_prob.sum(1, keepdim=True)
            mean = lib.tanh(mean) * self.action_scale + self.action_bias
            return action, log_prob, mean

    def soft_update(target, source, tau):
        for target_param, param in zip(target.parameters(), source.parameters()):
            target_param.data.copy_(target_param.data * (1.0 - tau) + param.data * tau)

    def hard_update(target, source):
        for target_param, param in zip(target.parameters(), source.parameters()):
            target_param.data.copy_(param.data)

    class ReplayMemory:
        def __init__(self, capacity):
            self.capacity, self.buffer, self.position = capacity, [], 0

        def push(self, state, action, reward, next_state, done):
            if len(self.buffer) < self.capacity:
                self.buffer.append(None)
            self.buffer[self.position] = (state, action, reward, next_state, done)
            self.position = (self.position + 1) % self.capacity

        def sample(self, batch_size):
            batch = random.sample(self.buffer, batch_size)
            state, action, reward, next_state, done = map(np.stack, zip(*batch))
            return state, action, reward, next_state, done

    class SAC(object):
        def __init__(self, num_inputs, action_dim):
            self.gamma, self.tau, self.alpha = 0.99, 0.005, 0.2
            self.target_update_interval, self.automatic_entropy_tuning = 1, True
            self.device = lib.device("cpu")
            self.critic = QNetwork(num_inputs, action_dim, hidden).to(device=self.device)
            self.critic_optim = lib.optim.Adam(self.critic.parameters(), lr=0.0003)
            self.critic_target = QNetwork(num_inputs, action_dim, hidden).to(self.device)
            hard_update(self.critic_target, self.critic)
            self.target_entropy = -lib.prod(lib.Tensor((action_dim,)).to(self.device)).item()
            self.log_alpha = lib.zeros(1, requires_grad=True, device=self.device)
            self.alpha_optim = lib.optim.Adam([self.log_alpha], lr=0.0003)
            self.policy = GaussianPolicy(num_inputs, action_dim, hidden).to(self.device)
            self.policy_optim = lib.optim.Adam(self.policy.parameters(), lr=0.0003)

        def update_parameters(self, memory, batch_size, updates):
            # Sample a batch from memory
            state_batch, action_batch, reward_batch, next_state_batch, mask_batch = memory.sample(batch_size=batch_size)
            state_batch = lib.FloatTensor(state_batch).to(self.device)
            next_state_batch = lib.FloatTensor(next_state_batch).to(self.device)
            action_batch = lib.FloatTensor(action_batch).to(self.device)
            reward_batch = lib.FloatTensor(reward_batch).to(self.device).unsqueeze(1)
            mask_batch = lib.FloatTensor(mask_batch).to(self.device).unsqueeze(1)
            with lib.no_grad():
                next_state_action, next_state_log_pi, _ = self.policy.sample(next_state_batch)
                qf1_next_target, qf2_next_target = self.critic_target(next_state_batch, next_state_action)
                min_qf_next_target = lib.min(qf1_next_target, qf2_next_target) - self.alpha * next_state_log_pi
                next_q_value = reward_batch + mask_batch * self.gamma * (min_qf_next_target)
            qf1, qf2 = self.critic(state_batch, action_batch)  # Two Q-functions to mitigate positive bias in the policy improvement step
            qf1_loss = F.mse_loss(qf1, next_q_value)  # JQ = 𝔼(st,at)~D[0.5(Q1(st,at) - r(st,at) - γ(𝔼st+1~p[V(st+1)]))^2]
            qf2_loss = F.mse_loss(qf2, next_q_value)
            qf_loss = qf1_loss + qf2_loss
            self.critic_optim.zero_grad()
            qf_loss.backward()
            self.critic_optim.step()
            pi, log_pi, _ = self.policy.sample(state_batch)
            qf1_pi, qf2_pi = self.critic(state_batch, pi)
            min_qf_pi = lib.min(qf1_pi, qf2_pi)
            policy_loss = ((self.alpha * log_pi) - min_qf_pi).mean()  # Jπ = 𝔼st∼D,εt∼N[α * logπ(f(εt;st)|st) − Q(st,f(εt;st))]
            self.policy_optim.zero_grad()
            policy_loss.backward()
            self.policy_optim.step()
            if self.automatic_entropy_tuning:
                alpha_loss = -(self.log_alpha * (log_pi + self.target_entropy).detach()).mean()
                self.alpha_optim.zero_grad()
                alpha_loss.backward()
                self.alpha_optim.step()
                self.alpha = self.log_alpha.exp()
                alpha_tlogs = self.alpha.clone()  # For TensorboardX logs
            else:
                alpha_loss = lib.tensor(0.).to(self.device)
                alpha_tlogs = lib.tensor(self.alpha)  # For TensorboardX logs
            if updates % self.target_update_interval == 0:
                soft_update(self.critic_target, self.critic, self.tau)
            return qf1_loss.item(), qf2_loss.item(), policy_loss.item(), alpha_loss.item(), alpha_tlogs.item()

    random.seed(0)
    np.random.seed(0)
    agent = SAC(state_dim, action_dim)
    memory = ReplayMemory(capacity)
    for t in range(capacity // 4):         # (random actions, as before start_steps ends)
        state = np.random.randn(state_dim)
        action = np.random.uniform(-1, 1, action_dim)
        next_state = state + 0.1 * np.random.randn(state_dim)
        memory.push(state, action, float(np.random.randn()), next_state, float((t + 1) % 200 != 0))
    model = nn.ModuleDict({"critic": agent.critic, "critic_target": agent.critic_target,
                           "policy": agent.policy})
    model.log_alpha = agent.log_alpha       # (checked beside the networks: a bare tensor)
    updates = [0]

    def step():
        critic_1_loss, critic_2_loss, policy_loss, ent_loss, alpha = agent.update_parameters(
            memory, batch_size, updates[0])
        updates[0] += 1
        return lib.tensor(critic_1_loss + critic_2_loss + policy_loss + ent_loss + alpha)
    return model, step


def _cyclegan(lib, small):
    # (junyanz/pytorch-CycleGAN-and-pix2pix's networks.py ResnetGenerator, ResnetBlock,
    # NLayerDiscriminator and GANLoss('lsgan'), and cycle_gan_model.py's optimize_parameters
    # with pool_size 0 (its --pool_size option; the pool draws by Python's random); instance
    # norm, init_type normal 0.02, batch 1 as the repository trains)
    nn = lib.nn
    size, ngf, ndf, n_blocks = (16, 4, 4, 1) if small else (64, 16, 16, 3)
    norm_layer = functools.partial(nn.InstanceNorm2d, affine=False, track_running_stats=False)

    class ResnetBlock(nn.Module):
        def __init__(self, dim, padding_type, norm_layer, use_dropout, use_bias):
            super(ResnetBlock, self).__init__()
            self.conv_block = self.build_conv_block(dim, padding_type, norm_layer, use_dropout, use_bias)

        def build_conv_block(self, dim, padding_type, norm_layer, use_dropout, use_bias):
            conv_block = [nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, kernel_size=3, padding=0, bias=use_bias),
                          norm_layer(dim), nn.ReLU(True)]
            if use_dropout:
                conv_block += [nn.Dropout(0.5)]
            conv_block += [nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, kernel_size=3, padding=0, bias=use_bias),
                           norm_layer(dim)]
            return nn.Sequential(*conv_block)

        def forward(self, x):
            out = x + self.conv_block(x)  # add skip connections
            return out

    class ResnetGenerator(nn.Module):
        def __init__(self, input_nc, output_nc, ngf=64, norm_layer=nn.BatchNorm2d, use_dropout=False, n_blocks=6,
                     padding_type='reflect'):
            super(ResnetGenerator, self).__init__()
            use_bias = norm_layer.func == nn.InstanceNorm2d
            model = [nn.ReflectionPad2d(3), nn.Conv2d(input_nc, ngf, kernel_size=7, padding=0, bias=use_bias),
                     norm_layer(ngf), nn.ReLU(True)]
            n_downsampling = 2
            for i in range(n_downsampling):  # add downsampling layers
                mult = 2 ** i
                model += [nn.Conv2d(ngf * mult, ngf * mult * 2, kernel_size=3, stride=2, padding=1, bias=use_bias),
                          norm_layer(ngf * mult * 2), nn.ReLU(True)]
            mult = 2 ** n_downsampling
            for i in range(n_blocks):       # add ResNet blocks
                model += [ResnetBlock(ngf * mult, padding_type=padding_type, norm_layer=norm_layer,
                                      use_dropout=use_dropout, use_bias=use_bias)]
            for i in range(n_downsampling):  # add upsampling layers
                mult = 2 ** (n_downsampling - i)
                model += [nn.ConvTranspose2d(ngf * mult, int(ngf * mult / 2), kernel_size=3, stride=2, padding=1,
                                             output_padding=1, bias=use_bias),
                          norm_layer(int(ngf * mult / 2)), nn.ReLU(True)]
            model += [nn.ReflectionPad2d(3)]
            model += [nn.Conv2d(ngf, output_nc, kernel_size=7, padding=0)]
            model += [nn.Tanh()]
            self.model = nn.Sequential(*model)

        def forward(self, input):
            return self.model(input)

    class NLayerDiscriminator(nn.Module):
        def __init__(self, input_nc, ndf=64, n_layers=3, norm_layer=nn.BatchNorm2d):
            super(NLayerDiscriminator, self).__init__()
            use_bias = norm_layer.func == nn.InstanceNorm2d
            kw, padw = 4, 1
            sequence = [nn.Conv2d(input_nc, ndf, kernel_size=kw, stride=2, padding=padw), nn.LeakyReLU(0.2, True)]
            nf_mult = 1
            for n in range(1, n_layers):  # gradually increase the number of filters
                nf_mult_prev = nf_mult
                nf_mult = min(2 ** n, 8)
                sequence += [nn.Conv2d(ndf * nf_mult_prev, ndf * nf_mult, kernel_size=kw, stride=2, padding=padw,
                                       bias=use_bias), norm_layer(ndf * nf_mult), nn.LeakyReLU(0.2, True)]
            nf_mult_prev = nf_mult
            nf_mult = min(2 ** n_layers, 8)
            sequence += [nn.Conv2d(ndf * nf_mult_prev, ndf * nf_mult, kernel_size=kw, stride=1, padding=padw,
                                   bias=use_bias), norm_layer(ndf * nf_mult), nn.LeakyReLU(0.2, True)]
            sequence += [nn.Conv2d(ndf * nf_mult, 1, kernel_size=kw, stride=1, padding=padw)]
            self.model = nn.Sequential(*sequence)

        def forward(self, input):
            return self.model(input)

    class GANLoss(nn.Module):
        def __init__(self, target_real_label=1.0, target_fake_label=0.0):
            super(GANLoss, self).__init__()
            self.register_buffer('real_label', lib.tensor(target_real_label))
            self.register_buffer('fake_label', lib.tensor(target_fake_label))
            self.loss = nn.MSELoss()

        def get_target_tensor(self, prediction, target_is_real):
            target_tensor = self.real_label if target_is_real else self.fake_label
            return target_tensor.expand_as(prediction)

        def __call__(self, prediction, target_is_real):
            return self.loss(prediction, self.get_target_tensor(prediction, target_is_real))

    def init_func(m):
        classname = m.__class__.__name__
        if hasattr(m, 'weight') and (classname.find('Conv') != -1 or classname.find('Linear') != -1):
            lib.nn.init.normal_(m.weight.data, 0.0, 0.02)
            if hasattr(m, 'bias') and m.bias is not None:
                lib.nn.init.constant_(m.bias.data, 0.0)

    class CycleGANModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.netG_A = ResnetGenerator(3, 3, ngf, norm_layer=norm_layer, n_blocks=n_blocks)
            self.netG_B = ResnetGenerator(3, 3, ngf, norm_layer=norm_layer, n_blocks=n_blocks)
            self.netD_A = NLayerDiscriminator(3, ndf, n_layers=3 if size >= 32 else 2, norm_layer=norm_layer)
            self.netD_B = NLayerDiscriminator(3, ndf, n_layers=3 if size >= 32 else 2, norm_layer=norm_layer)
            self.apply(init_func)
            self.criterionGAN = GANLoss()
            self.criterionCycle = nn.L1Loss()
            self.criterionIdt = nn.L1Loss()
            self.optimizer_G = lib.optim.Adam(itertools.chain(self.netG_A.parameters(), self.netG_B.parameters()),
                                              lr=0.0002, betas=(0.5, 0.999))
            self.optimizer_D = lib.optim.Adam(itertools.chain(self.netD_A.parameters(), self.netD_B.parameters()),
                                              lr=0.0002, betas=(0.5, 0.999))

        def set_input(self, real_A, real_B):
            self.real_A, self.real_B = real_A, real_B

        def forward(self):
            self.fake_B = self.netG_A(self.real_A)  # G_A(A)
            self.rec_A = self.netG_B(self.fake_B)   # G_B(G_A(A))
            self.fake_A = self.netG_B(self.real_B)  # G_B(B)
            self.rec_B = self.netG_A(self.fake_A)   # G_A(G_B(B))

        def backward_D_basic(self, netD, real, fake):
            pred_real = netD(real)
            loss_D_real = self.criterionGAN(pred_real, True)
            pred_fake = netD(fake.detach())
            loss_D_fake = self.criterionGAN(pred_fake, False)
            loss_D = (loss_D_real + loss_D_fake) * 0.5
            loss_D.backward()
            return loss_D

        def backward_D_A(self):
            self.loss_D_A = self.backward_D_basic(self.netD_A, self.real_B, self.fake_B)

        def backward_D_B(self):
            self.loss_D_B = self.backward_D_basic(self.netD_B, self.real_A, self.fake_A)

        def backward_G(self):
            lambda_idt, lambda_A, lambda_B = 0.5, 10.0, 10.0
            self.idt_A = self.netG_A(self.real_B)
            self.loss_idt_A = self.criterionIdt(self.idt_A, self.real_B) * lambda_B * lambda_idt
            self.idt_B = self.netG_B(self.real_A)
            self.loss_idt_B = self.criterionIdt(self.idt_B, self.real_A) * lambda_A * lambda_idt
            self.loss_G_A = self.criterionGAN(self.netD_A(self.fake_B), True)
            self.loss_G_B = self.criterionGAN(self.netD_B(self.fake_A), True)
            self.loss_cycle_A = self.criterionCycle(self.rec_A, self.real_A) * lambda_A
            self.loss_cycle_B = self.criterionCycle(self.rec_B, self.real_B) * lambda_B
            self.loss_G = (self.loss_G_A + self.loss_G_B + self.loss_cycle_A + self.loss_cycle_B
                           + self.loss_idt_A + self.loss_idt_B)
            self.loss_G.backward()

        def set_requires_grad(self, nets, requires_grad=False):
            for net in nets:
                for param in net.parameters():
                    param.requires_grad = requires_grad

        def optimize_parameters(self):
            self.forward()
            self.set_requires_grad([self.netD_A, self.netD_B], False)
            self.optimizer_G.zero_grad()
            self.backward_G()
            self.optimizer_G.step()
            self.set_requires_grad([self.netD_A, self.netD_B], True)
            self.optimizer_D.zero_grad()
            self.backward_D_A()
            self.backward_D_B()
            self.optimizer_D.step()

    model = CycleGANModel()
    model.set_input(lib.rand(1, 3, size, size) * 2 - 1, lib.rand(1, 3, size, size) * 2 - 1)

    def step():
        model.optimize_parameters()
        return model.loss_G.detach() + model.loss_D_A.detach() + model.loss_D_B.detach()
    return model, step
