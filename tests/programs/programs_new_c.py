"""Programs of common kinds: a mixture-of-experts classifier (top-k gating with topk,
softmax over the selected logits, scatter/gather, a load-balancing loss; token dispatch
with torch.where and index_add_ at evaluation); a Wasserstein GAN with gradient penalty
(autograd.grad with create_graph=True, n_critic critic steps per generator step); a TransE
knowledge-graph model (MarginRankingLoss, renormalised entity embeddings, ranks and
hits@k). Programs `f(torch, env)`, see tutorial_harness.py."""
import math


def mixture_of_experts(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    num_experts, top_k, d_model = 4, 2, 12

    class Expert(nn.Module):
        def __init__(self, d_model, d_hidden):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(d_model, d_hidden), nn.GELU(),
                                     nn.Linear(d_hidden, d_model))

        def forward(self, x):
            return self.net(x)

    class MoELayer(nn.Module):
        def __init__(self, d_model, num_experts, top_k):
            super().__init__()
            self.num_experts, self.top_k = num_experts, top_k
            self.gate = nn.Linear(d_model, num_experts, bias=False)
            self.experts = nn.ModuleList([Expert(d_model, 2 * d_model)
                                          for _ in range(num_experts)])

        def forward(self, x):
            batch, seq_len, d = x.shape
            tokens = x.reshape(-1, d)                                    # (N, D)
            router_logits = self.gate(tokens)                            # (N, E)
            router_probs = F.softmax(router_logits, dim=-1)
            topk_logits, topk_idx = router_logits.topk(self.top_k, dim=-1)
            topk_weights = F.softmax(topk_logits, dim=-1)                # (N, k)
            # dense combine: every expert on every token, the top-k gathered and weighted
            expert_outputs = torch.stack([e(tokens) for e in self.experts], dim=1)  # (N, E, D)
            index = topk_idx.unsqueeze(-1).expand(-1, -1, d)
            selected = expert_outputs.gather(1, index)                   # (N, k, D)
            out = (topk_weights.unsqueeze(-1) * selected).sum(dim=1)
            # Switch-style load balancing: fraction routed (top-1) times mean probability
            gates = torch.zeros_like(router_logits).scatter(1, topk_idx, topk_weights)
            tokens_per_expert = F.one_hot(topk_idx[:, 0], self.num_experts).float().mean(0)
            aux_loss = self.num_experts * (tokens_per_expert * router_probs.mean(0)).sum()
            return out.view(batch, seq_len, d), aux_loss, gates

        @torch.no_grad()
        def forward_sparse(self, x):
            """Inference: each expert runs on the tokens routed to it only."""
            batch, seq_len, d = x.shape
            tokens = x.reshape(-1, d)
            weights, selected_experts = torch.topk(self.gate(tokens), self.top_k)
            weights = F.softmax(weights, dim=1, dtype=torch.float).to(tokens.dtype)
            results = torch.zeros_like(tokens)
            for i, expert in enumerate(self.experts):
                batch_idx, nth_expert = torch.where(selected_experts == i)
                if batch_idx.numel() == 0:
                    continue
                contribution = weights[batch_idx, nth_expert, None] * expert(tokens[batch_idx])
                results.index_add_(0, batch_idx, contribution)
            return results.view(batch, seq_len, d)

    class MoEClassifier(nn.Module):
        def __init__(self, vocab=20, num_classes=3):
            super().__init__()
            self.embed = nn.Embedding(vocab, d_model)
            self.norm = nn.LayerNorm(d_model)
            self.moe = MoELayer(d_model, num_experts, top_k)
            self.head = nn.Linear(d_model, num_classes)

        def forward(self, ids):
            h = self.embed(ids)
            moe_out, aux_loss, gates = self.moe(self.norm(h))
            h = h + moe_out
            return self.head(h.mean(dim=1)), aux_loss, gates

    model = env.init(MoEClassifier())
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    ids, labels = env.randint(0, 20, (16, 6)), env.randint(0, 3, (16,))
    aux_weight = 0.01

    def train_step(ids, labels):
        model.train()
        optimizer.zero_grad()
        logits, aux_loss, gates = model(ids)
        ce = F.cross_entropy(logits, labels)
        loss = ce + aux_weight * aux_loss
        loss.backward()
        optimizer.step()
        usage = (gates > 0).sum(dim=0)
        return ce.item(), aux_loss.item(), usage

    train_step = env.step(train_step)
    for step in range(6):
        batch = slice((step % 2) * 8, (step % 2) * 8 + 8)
        env.rec(f"step {step}", train_step(ids[batch], labels[batch]))

    model.eval()
    with torch.no_grad():
        logits, _, gates = model(ids)
        h = model.norm(model.embed(ids))
        dense, _, _ = model.moe(h)
        sparse = model.moe.forward_sparse(h)
        counts = torch.bincount(gates.argmax(dim=1), minlength=num_experts)
    env.rec("eval", (logits.argmax(1), (logits.argmax(1) == labels).float().mean(), counts))
    env.rec("sparse", (sparse, torch.allclose(dense, sparse, atol=1e-6)))
    env.rec("state", model.state_dict())


def wgan_gp(torch, env):
    nn, optim, autograd = torch.nn, torch.optim, torch.autograd
    latent_dim, data_dim, lambda_gp, n_critic, batch_size = 4, 2, 10, 3, 16

    class Generator(nn.Module):
        def __init__(self):
            super(Generator, self).__init__()

            def block(in_feat, out_feat, normalize=True):
                # (no bias before BatchNorm: it would cancel, its gradient is rounding noise
                # that Adam scales up)
                layers = [nn.Linear(in_feat, out_feat, bias=not normalize)]
                if normalize:
                    layers.append(nn.BatchNorm1d(out_feat, 0.8))
                layers.append(nn.LeakyReLU(0.2, inplace=True))
                return layers

            self.model = nn.Sequential(*block(latent_dim, 16, normalize=False), *block(16, 16),
                                       nn.Linear(16, data_dim))

        def forward(self, z):
            return self.model(z)

    class Discriminator(nn.Module):
        def __init__(self):
            super(Discriminator, self).__init__()
            self.model = nn.Sequential(nn.Linear(data_dim, 16), nn.LeakyReLU(0.2, inplace=True),
                                       nn.Linear(16, 16), nn.LeakyReLU(0.2, inplace=True),
                                       nn.Linear(16, 1))

        def forward(self, x):
            return self.model(x)

    generator, discriminator = env.init(Generator()), env.init(Discriminator())
    optimizer_G = optim.Adam(generator.parameters(), lr=1e-3, betas=(0.5, 0.999))
    optimizer_D = optim.Adam(discriminator.parameters(), lr=1e-3, betas=(0.5, 0.999))

    def compute_gradient_penalty(D, real_samples, fake_samples, alpha):
        interpolates = (alpha * real_samples + ((1 - alpha) * fake_samples)).requires_grad_(True)
        d_interpolates = D(interpolates)
        fake = torch.ones(real_samples.shape[0], 1, requires_grad=False)
        gradients = autograd.grad(outputs=d_interpolates, inputs=interpolates,
                                  grad_outputs=fake, create_graph=True, retain_graph=True,
                                  only_inputs=True)[0]
        gradients = gradients.view(gradients.size(0), -1)
        return ((gradients.norm(2, dim=1) - 1) ** 2).mean()

    def critic_step(real_imgs, z, alpha):
        optimizer_D.zero_grad()
        fake_imgs = generator(z)
        real_validity = discriminator(real_imgs)
        fake_validity = discriminator(fake_imgs.detach())
        gradient_penalty = compute_gradient_penalty(discriminator, real_imgs, fake_imgs.detach(),
                                                    alpha)
        d_loss = -torch.mean(real_validity) + torch.mean(fake_validity) \
            + lambda_gp * gradient_penalty
        d_loss.backward()
        optimizer_D.step()
        return d_loss.item(), gradient_penalty.item()

    def generator_step(z):
        optimizer_G.zero_grad()
        fake_imgs = generator(z)
        g_loss = -torch.mean(discriminator(fake_imgs))
        g_loss.backward()
        optimizer_G.step()
        return g_loss.item()

    critic_step, generator_step = env.step(critic_step), env.step(generator_step)
    centers = torch.tensor([[2.0, 0.0], [-2.0, 0.0], [0.0, 2.0], [0.0, -2.0]])
    for i in range(8):
        real = centers[env.randint(0, 4, (batch_size,))] + 0.1 * env.randn(batch_size, data_dim)
        z = env.randn(batch_size, latent_dim)
        generator.train()
        env.rec(f"critic {i}", critic_step(real, z, env.rand(batch_size, 1)))
        if i % n_critic == 0:
            env.rec(f"generator {i}", generator_step(z))
    generator.eval()
    with torch.no_grad():
        samples = generator(env.randn(8, latent_dim))
    env.rec("samples", samples)
    env.rec("state", (generator.state_dict(), discriminator.state_dict()))


def transe(torch, env):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    n_entities, n_relations, dim = 16, 3, 8

    class TransE(nn.Module):
        def __init__(self, entity_count, relation_count, dim, margin=1.0, norm=1):
            super().__init__()
            self.norm = norm
            self.entities_emb = self._init_emb(entity_count, dim)
            self.relations_emb = self._init_emb(relation_count, dim)
            self.criterion = nn.MarginRankingLoss(margin=margin, reduction="mean")

        def _init_emb(self, count, dim):
            emb = nn.Embedding(num_embeddings=count, embedding_dim=dim)
            uniform_range = 6 / math.sqrt(dim)
            emb.weight.data.uniform_(-uniform_range, uniform_range)
            emb.weight.data = F.normalize(emb.weight.data, p=2, dim=1)
            return emb

        def forward(self, positive_triplets, negative_triplets):
            # entities on the unit sphere before every batch (the paper's constraint)
            self.entities_emb.weight.data.div_(
                self.entities_emb.weight.data.norm(p=2, dim=1, keepdim=True))
            positive_distances = self._distance(positive_triplets)
            negative_distances = self._distance(negative_triplets)
            return self.loss(positive_distances, negative_distances), positive_distances

        def predict(self, triplets):
            return self._distance(triplets)

        def loss(self, positive_distances, negative_distances):
            target = torch.tensor([-1], dtype=torch.long)
            return self.criterion(positive_distances, negative_distances, target)

        def _distance(self, triplets):
            heads, relations, tails = triplets[:, 0], triplets[:, 1], triplets[:, 2]
            return (self.entities_emb(heads) + self.relations_emb(relations)
                    - self.entities_emb(tails)).norm(p=self.norm, dim=1)

    # a knowledge graph with a rule per relation: tail = (head + offset) mod n
    heads = env.randint(0, n_entities, (40,))
    relations = env.randint(0, n_relations, (40,))
    tails = (heads + 2 * relations + 1) % n_entities
    triplets = torch.stack([heads, relations, tails], dim=1)
    train_triplets, test_triplets = triplets[:32], triplets[32:]

    model = env.init(TransE(n_entities, n_relations, dim))
    optimizer = optim.SGD(model.parameters(), lr=0.1)

    def train_step(positive_triplets, negative_triplets):
        optimizer.zero_grad()
        loss, pd = model(positive_triplets, negative_triplets)
        loss.mean().backward()
        optimizer.step()
        return loss.item(), pd.sum().item()

    train_step = env.step(train_step)
    model.train()
    for step in range(6):
        positive = train_triplets[(step % 2) * 16:(step % 2) * 16 + 16]
        # corrupt the head or the tail of each triplet with a random entity
        head_or_tail = env.randint(0, 2, (16,))
        random_entities = env.randint(0, n_entities, (16,))
        broken_heads = torch.where(head_or_tail == 1, random_entities, positive[:, 0])
        broken_tails = torch.where(head_or_tail == 0, random_entities, positive[:, 2])
        negative = torch.stack((broken_heads, positive[:, 1], broken_tails), dim=1)
        env.rec(f"step {step}", train_step(positive, negative))

    # tail prediction: rank of the true tail among all entities; hits@k and MRR
    model.eval()
    with torch.no_grad():
        n = test_triplets.size(0)
        candidates = torch.arange(n_entities).repeat(n)
        expanded = test_triplets.repeat_interleave(n_entities, dim=0).clone()
        expanded[:, 2] = candidates
        distances = model.predict(expanded).view(n, n_entities)
        true_distances = distances.gather(1, test_triplets[:, 2].view(-1, 1))
        ranks = (distances < true_distances).sum(dim=1) + 1
        hits_at_3 = (ranks <= 3).float().mean()
        mrr = (1.0 / ranks.float()).mean()
        _, indices = distances.topk(k=3, dim=1, largest=False)
    env.rec("ranks", (ranks, hits_at_3, mrr, indices))
    env.rec("state", model.state_dict())
