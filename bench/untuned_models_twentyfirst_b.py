"""untuned_models_twentyfirst.py's Bayes by Backprop, Langevin-trained energy-based model and
ALiBi language model (the docstring there says what each is)."""
import math

import numpy as np


def _bayesbp(lib, small):
    # (nitarshan/bayes-by-backprop's Gaussian, ScaleMixtureGaussian, BayesianLinear,
    # BayesianNetwork.sample_elbo)
    nn, F = lib.nn, lib.nn.functional
    batch, d_in, hid, n_cls, samples = (6, 10, 12, 4, 2) if small else (128, 784, 400, 10, 2)
    num_batches = 100
    PI, SIGMA_1, SIGMA_2 = 0.5, lib.FloatTensor([math.exp(-0)]), lib.FloatTensor([math.exp(-6)])

    class Gaussian(object):
        def __init__(self, mu, rho):
            super().__init__()
            self.mu = mu
            self.rho = rho
            self.normal = lib.distributions.Normal(0, 1)

        @property
        def sigma(self):
            return lib.log1p(lib.exp(self.rho))

        def sample(self):
            epsilon = self.normal.sample(self.rho.size())
            return self.mu + self.sigma * epsilon

        def log_prob(self, input):
            return (-math.log(math.sqrt(2 * math.pi)) - lib.log(self.sigma)
                    - ((input - self.mu) ** 2) / (2 * self.sigma ** 2)).sum()

    class ScaleMixtureGaussian(object):
        def __init__(self, pi, sigma1, sigma2):
            super().__init__()
            self.pi = pi
            self.gaussian1 = lib.distributions.Normal(0, sigma1)
            self.gaussian2 = lib.distributions.Normal(0, sigma2)

        def log_prob(self, input):
            prob1 = lib.exp(self.gaussian1.log_prob(input))
            prob2 = lib.exp(self.gaussian2.log_prob(input))
            return (lib.log(self.pi * prob1 + (1 - self.pi) * prob2)).sum()

    class BayesianLinear(nn.Module):
        def __init__(self, in_features, out_features):
            super().__init__()
            self.weight_mu = nn.Parameter(lib.Tensor(out_features, in_features).uniform_(-0.2, 0.2))
            self.weight_rho = nn.Parameter(lib.Tensor(out_features, in_features).uniform_(-5, -4))
            self.weight = Gaussian(self.weight_mu, self.weight_rho)
            self.bias_mu = nn.Parameter(lib.Tensor(out_features).uniform_(-0.2, 0.2))
            self.bias_rho = nn.Parameter(lib.Tensor(out_features).uniform_(-5, -4))
            self.bias = Gaussian(self.bias_mu, self.bias_rho)
            self.weight_prior = ScaleMixtureGaussian(PI, SIGMA_1, SIGMA_2)
            self.bias_prior = ScaleMixtureGaussian(PI, SIGMA_1, SIGMA_2)
            self.log_prior = 0
            self.log_variational_posterior = 0

        def forward(self, input, sample=False, calculate_log_probs=False):
            if self.training or sample:
                weight = self.weight.sample()
                bias = self.bias.sample()
            else:
                weight = self.weight.mu
                bias = self.bias.mu
            if self.training or calculate_log_probs:
                self.log_prior = (self.weight_prior.log_prob(weight)
                                  + self.bias_prior.log_prob(bias))
                self.log_variational_posterior = (self.weight.log_prob(weight)
                                                  + self.bias.log_prob(bias))
            else:
                self.log_prior, self.log_variational_posterior = 0, 0
            return F.linear(input, weight, bias)

    class BayesianNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = BayesianLinear(d_in, hid)
            self.l2 = BayesianLinear(hid, hid)
            self.l3 = BayesianLinear(hid, n_cls)

        def forward(self, x, sample=False):
            x = x.view(-1, d_in)
            x = F.relu(self.l1(x, sample))
            x = F.relu(self.l2(x, sample))
            x = F.log_softmax(self.l3(x, sample), dim=1)
            return x

        def log_prior(self):
            return self.l1.log_prior + self.l2.log_prior + self.l3.log_prior

        def log_variational_posterior(self):
            return (self.l1.log_variational_posterior + self.l2.log_variational_posterior
                    + self.l3.log_variational_posterior)

        def sample_elbo(self, input, target, samples=samples):
            outputs = lib.zeros(samples, batch, n_cls)
            log_priors = lib.zeros(samples)
            log_variational_posteriors = lib.zeros(samples)
            for i in range(samples):
                outputs[i] = self(input, sample=True)
                log_priors[i] = self.log_prior()
                log_variational_posteriors[i] = self.log_variational_posterior()
            log_prior = log_priors.mean()
            log_variational_posterior = log_variational_posteriors.mean()
            negative_log_likelihood = F.nll_loss(outputs.mean(0), target, size_average=False)
            loss = (log_variational_posterior - log_prior) / num_batches + negative_log_likelihood
            return loss

    model = BayesianNetwork()
    opt = lib.optim.Adam(model.parameters())
    rng = np.random.RandomState(1)
    x = lib.tensor(rng.rand(batch, 1, d_in).astype(np.float32))
    y = lib.tensor(rng.randint(0, n_cls, batch))

    def loss():
        return model.sample_elbo(x, y)
    return model, opt, loss


def _ebm(lib, small):
    # (the "short-run MCMC" / JEM-style EBM training loop as the UvA deep-learning tutorial 8
    # writes it: a Swish CNN energy, a replay buffer with 5% fresh noise, Langevin steps by
    # autograd.grad w.r.t. the samples with the model's parameters frozen, a contrastive
    # divergence loss with an energy-magnitude regulariser)
    nn, F = lib.nn, lib.nn.functional
    batch, size, c_hid, steps, buf = (4, 8, 4, 3, 16) if small else (32, 16, 16, 20, 512)

    class Swish(nn.Module):
        def forward(self, x):
            return x * lib.sigmoid(x)

    class CNNModel(nn.Module):
        def __init__(self, hidden_features=c_hid, out_dim=1):
            super().__init__()
            c_hid1, c_hid2, c_hid3 = hidden_features // 2, hidden_features, hidden_features * 2
            self.cnn_layers = nn.Sequential(
                nn.Conv2d(1, c_hid1, kernel_size=5, stride=2, padding=2), Swish(),
                nn.Conv2d(c_hid1, c_hid2, kernel_size=3, stride=2, padding=1), Swish(),
                nn.Conv2d(c_hid2, c_hid3, kernel_size=3, stride=2, padding=1), Swish(),
                nn.Flatten(), nn.Linear(c_hid3 * (size // 8) ** 2, c_hid3), Swish(),
                nn.Linear(c_hid3, out_dim))

        def forward(self, x):
            return self.cnn_layers(x).squeeze(dim=-1)

    class Sampler:
        def __init__(self, model, img_shape, sample_size, max_len=buf):
            self.model = model
            self.img_shape = img_shape
            self.sample_size = sample_size
            self.examples = lib.rand((max_len,) + img_shape) * 2 - 1

        def sample_new_exmps(self, steps=60, step_size=10):
            # (the tutorial draws n_new = np.random.binomial(sample_size, 0.05): a Python-side
            # draw a traced step would freeze, so its mean, rounded up)
            n_new = math.ceil(self.sample_size * 0.05)
            rand_imgs = lib.rand((n_new,) + self.img_shape) * 2 - 1
            idx = lib.randint(0, self.examples.shape[0], (self.sample_size - n_new,))
            old_imgs = self.examples[idx]
            inp_imgs = lib.cat([rand_imgs, old_imgs], dim=0).detach()
            inp_imgs = Sampler.generate_samples(self.model, inp_imgs, steps=steps,
                                                step_size=step_size)
            self.examples = lib.cat([inp_imgs, self.examples], dim=0)[:buf]
            return inp_imgs

        @staticmethod
        def generate_samples(model, inp_imgs, steps=60, step_size=10):
            is_training = model.training
            model.eval()
            for p in model.parameters():
                p.requires_grad = False
            inp_imgs.requires_grad = True
            had_gradients_enabled = lib.is_grad_enabled()
            lib.set_grad_enabled(True)
            noise = lib.randn(inp_imgs.shape)
            for _ in range(steps):
                noise.normal_(0, 0.005)
                inp_imgs.data.add_(noise.data)
                inp_imgs.data.clamp_(min=-1.0, max=1.0)
                out_imgs = -model(inp_imgs)
                out_imgs.sum().backward()
                inp_imgs.grad.data.clamp_(-0.03, 0.03)
                inp_imgs.data.add_(-step_size * inp_imgs.grad.data)
                inp_imgs.grad.detach_()
                inp_imgs.grad.zero_()
                inp_imgs.data.clamp_(min=-1.0, max=1.0)
            for p in model.parameters():
                p.requires_grad = True
            model.train(is_training)
            lib.set_grad_enabled(had_gradients_enabled)
            return inp_imgs

    model = CNNModel()
    sampler = Sampler(model, img_shape=(1, size, size), sample_size=batch)
    opt = lib.optim.Adam(model.parameters(), lr=1e-4, betas=(0.0, 0.999))
    rng = np.random.RandomState(1)
    yy, xx = np.mgrid[:size, :size] / size
    imgs = [np.sin(2 * np.pi * (rng.rand() * xx + rng.rand() * yy)) for _ in range(batch)]
    real_imgs = lib.tensor(np.stack(imgs)[:, None].astype(np.float32))
    alpha = 0.1

    def loss():
        # (real_imgs + small_noise; reference: .add_(torch.randn_like(real_imgs) * 0.005))
        real = real_imgs + lib.randn_like(real_imgs) * 0.005
        real = real.clamp(min=-1.0, max=1.0)
        fake_imgs = sampler.sample_new_exmps(steps=steps, step_size=10)
        inp_imgs = lib.cat([real, fake_imgs], dim=0)
        real_out, fake_out = model(inp_imgs).chunk(2, dim=0)
        reg_loss = alpha * (real_out ** 2 + fake_out ** 2).mean()
        cdiv_loss = fake_out.mean() - real_out.mean()
        return reg_loss + cdiv_loss
    return model, opt, loss, {"clip": None}


def _alibi(lib, small):
    # (ofirpress/attention_with_linear_biases' fairseq get_slopes and buffered future mask,
    # in a minGPT-style causal LM with F.scaled_dot_product_attention taking the float bias)
    nn, F = lib.nn, lib.nn.functional
    batch, T, d, n_head, n_layer, vocab = (2, 8, 16, 4, 1, 13) if small else (
        16, 128, 128, 8, 2, 96)

    def get_slopes(n):
        def get_slopes_power_of_2(n):
            start = (2 ** (-2 ** -(math.log2(n) - 3)))
            ratio = start
            return [start * ratio ** i for i in range(n)]
        if math.log2(n).is_integer():
            return get_slopes_power_of_2(n)
        closest_power_of_2 = 2 ** math.floor(math.log2(n))
        return (get_slopes_power_of_2(closest_power_of_2)
                + get_slopes(2 * closest_power_of_2)[0::2][:n - closest_power_of_2])

    def fill_with_neg_inf(t):
        return t.float().fill_(float("-inf")).type_as(t)

    def buffered_future_mask(maxpos, attn_heads):
        slopes = lib.Tensor(get_slopes(attn_heads))
        alibi = slopes.unsqueeze(1).unsqueeze(1) * lib.arange(maxpos).unsqueeze(0).unsqueeze(
            0).expand(attn_heads, -1, -1)
        alibi = alibi.view(attn_heads, 1, maxpos)
        future_mask = lib.triu(fill_with_neg_inf(lib.zeros([maxpos, maxpos])), 1)
        return future_mask.unsqueeze(0) + alibi

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)
            self.register_buffer("alibi_mask", buffered_future_mask(T, n_head), persistent=False)

        def forward(self, x):
            B, L, C = x.size()
            q, k, v = self.c_attn(x).split(d, dim=2)
            k = k.view(B, L, n_head, C // n_head).transpose(1, 2)
            q = q.view(B, L, n_head, C // n_head).transpose(1, 2)
            v = v.view(B, L, n_head, C // n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=self.alibi_mask[:, :L, :L])
            y = y.transpose(1, 2).contiguous().view(B, L, C)
            return self.c_proj(y)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = CausalSelfAttention()
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.h = nn.ModuleList(Block() for _ in range(n_layer))
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.apply(self._init_weights)

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets):
            x = self.wte(idx)
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    model = GPT()
    opt = lib.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    rng = np.random.RandomState(1)
    data = rng.randint(0, vocab, (batch, T + 1))
    x, y = lib.tensor(data[:, :-1]), lib.tensor(data[:, 1:])

    def loss():
        return model(x, y)
    return model, opt, loss, {"clip": 1.0}
