"""Six more training steps, written as their reference code writes them and run before llgrad
was tuned on any of them (2026-12-07, stop 78): a DETR-style set-prediction model
(facebookresearch/detr: a CNN backbone, learned queries through nn.TransformerDecoder, class
and sigmoid box heads; the loss matches predictions to targets under no_grad, greedily in
place of scipy's Hungarian solver, from a cost of class probability, L1 and generalized IoU,
then weighted cross-entropy with an eos_coef, L1 and GIoU on the matched pairs; AdamW with
clip_grad_norm_), a latent Neural Process (deterministic and latent encoders over (x, y)
context pairs, Normal posteriors from 0.1 + 0.9 * sigmoid, rsample, a decoder Normal's
log_prob and kl_divergence(q_target, q_context); Adam), in untuned_models_twentyfirst_c.py a
Hyena operator language model (HazyResearch/safari: short depthwise conv on the projections,
an implicit long filter from an MLP over positional features with exponential decay
modulation, fftconv by rfft/irfft at 2L; AdamW), and in untuned_models_twentyfirst_b.py Bayes
by Backprop (Blundell et al.: reparameterised weights w = mu + log1p(exp(rho)) * eps, a
scale-mixture prior's log_prob, the ELBO; Adam), an energy-based model trained with short-run
Langevin dynamics (UvA DL tutorial 8: a backward of the energy to the samples, parameters
frozen, inside the step; a replay buffer; Adam) and an ALiBi causal language model
(ofirpress/attention_with_linear_biases: per-head geometric slopes times the key-query
distance, no position embeddings; AdamW).

    python bench/untuned_models_twentyfirst.py [name,...] [--torch-compile]

Per model: torch eager, torch.compile (with --torch-compile), llgrad eager and llgrad compiled,
1 thread each; the checks, the timing and its printout are untuned_models_eleventh.py's (main
there). build(lib, name, small=True) makes the tests' smaller versions."""
import os
import sys
import types

import numpy as np

import untuned_models_twentyfirst_b
import untuned_models_twentyfirst_c
from untuned_models_fifth import training_step

NAMES = ("detr", "neuralproc", "hyena", "bayesbp", "ebm", "alibi")


def _maker(name):
    for module in (untuned_models_twentyfirst_b, untuned_models_twentyfirst_c):
        if hasattr(module, "_" + name):
            return getattr(module, "_" + name)
    return globals()["_" + name]


def build(lib, name, small=False):
    np.random.seed(0)
    return training_step(lib, lambda lib: _maker(name)(lib, small))


def _detr(lib, small):
    # (detr/models/detr.py's DETR and SetCriterion, matcher.py's cost, util/box_ops.py's
    # box_cxcywh_to_xyxy and generalized_box_iou; a greedy matching in place of
    # scipy.optimize.linear_sum_assignment)
    nn, F = lib.nn, lib.nn.functional
    batch, size, d, n_q, n_cls, n_tgt, layers = (2, 8, 16, 5, 3, 2, 1) if small else (
        8, 32, 64, 12, 10, 4, 2)

    def box_cxcywh_to_xyxy(x):
        x_c, y_c, w, h = x.unbind(-1)
        b = [(x_c - 0.5 * w), (y_c - 0.5 * h), (x_c + 0.5 * w), (y_c + 0.5 * h)]
        return lib.stack(b, dim=-1)

    def box_area(b):
        return (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])

    def generalized_box_iou(boxes1, boxes2):
        area1, area2 = box_area(boxes1), box_area(boxes2)
        lt = lib.max(boxes1[:, None, :2], boxes2[:, :2])
        rb = lib.min(boxes1[:, None, 2:], boxes2[:, 2:])
        wh = (rb - lt).clamp(min=0)
        inter = wh[:, :, 0] * wh[:, :, 1]
        union = area1[:, None] + area2 - inter
        iou = inter / union
        lt = lib.min(boxes1[:, None, :2], boxes2[:, :2])
        rb = lib.max(boxes1[:, None, 2:], boxes2[:, 2:])
        wh = (rb - lt).clamp(min=0)
        area = wh[:, :, 0] * wh[:, :, 1]
        return iou - (area - union) / area

    class MLP(nn.Module):
        def __init__(self, input_dim, hidden_dim, output_dim, num_layers):
            super().__init__()
            self.num_layers = num_layers
            h = [hidden_dim] * (num_layers - 1)
            self.layers = nn.ModuleList(nn.Linear(n, k) for n, k in
                                        zip([input_dim] + h, h + [output_dim]))

        def forward(self, x):
            for i, layer in enumerate(self.layers):
                x = F.relu(layer(x)) if i < self.num_layers - 1 else layer(x)
            return x

    class DETR(nn.Module):
        def __init__(self, num_classes, num_queries, hidden_dim):
            super().__init__()
            self.backbone = nn.Sequential(
                nn.Conv2d(3, hidden_dim // 2, 3, stride=2, padding=1),
                nn.BatchNorm2d(hidden_dim // 2), nn.ReLU(),
                nn.Conv2d(hidden_dim // 2, hidden_dim, 3, stride=2, padding=1), nn.ReLU())
            self.input_proj = nn.Conv2d(hidden_dim, hidden_dim, kernel_size=1)
            self.pos_embed = nn.Parameter(lib.rand(1, hidden_dim, size // 4, size // 4) * 0.1)
            self.query_embed = nn.Embedding(num_queries, hidden_dim)
            layer = nn.TransformerDecoderLayer(hidden_dim, 4, hidden_dim * 2, dropout=0.0)
            self.decoder = nn.TransformerDecoder(layer, layers, norm=nn.LayerNorm(hidden_dim))
            self.class_embed = nn.Linear(hidden_dim, num_classes + 1)
            self.bbox_embed = MLP(hidden_dim, hidden_dim, 4, 3)

        def forward(self, samples):
            src = self.input_proj(self.backbone(samples)) + self.pos_embed
            bs = src.shape[0]
            memory = src.flatten(2).permute(2, 0, 1)
            query = self.query_embed.weight.unsqueeze(1).repeat(1, bs, 1)
            hs = self.decoder(query, memory).transpose(0, 1)
            return {"pred_logits": self.class_embed(hs),
                    "pred_boxes": self.bbox_embed(hs).sigmoid()}

    @lib.no_grad()
    def greedy_matcher(outputs, targets):
        # (HungarianMatcher's cost; each round takes the cheapest remaining pair)
        bs, num_queries = outputs["pred_logits"].shape[:2]
        out_prob = outputs["pred_logits"].flatten(0, 1).softmax(-1)
        out_bbox = outputs["pred_boxes"].flatten(0, 1)
        indices = []
        for i, t in enumerate(targets):
            prob = out_prob[i * num_queries:(i + 1) * num_queries]
            bbox = out_bbox[i * num_queries:(i + 1) * num_queries]
            cost_class = -prob[:, t["labels"]]
            cost_bbox = lib.cdist(bbox, t["boxes"], p=1)
            cost_giou = -generalized_box_iou(box_cxcywh_to_xyxy(bbox),
                                             box_cxcywh_to_xyxy(t["boxes"]))
            C = 5 * cost_bbox + 1 * cost_class + 2 * cost_giou
            rows, cols = [], []
            for _ in range(len(t["labels"])):
                k = C.argmin()
                r, c = k // C.shape[1], k % C.shape[1]
                rows.append(r)
                cols.append(c)
                C[r, :] = float("inf")
                C[:, c] = float("inf")
            indices.append((lib.stack(rows), lib.stack(cols)))
        return indices

    class SetCriterion(nn.Module):
        def __init__(self, num_classes, eos_coef):
            super().__init__()
            self.num_classes = num_classes
            empty_weight = lib.ones(num_classes + 1)
            empty_weight[-1] = eos_coef
            self.register_buffer("empty_weight", empty_weight)

        def _get_src_permutation_idx(self, indices):
            batch_idx = lib.cat([lib.full_like(src, i) for i, (src, _) in enumerate(indices)])
            src_idx = lib.cat([src for (src, _) in indices])
            return batch_idx, src_idx

        def forward(self, outputs, targets):
            indices = greedy_matcher(outputs, targets)
            num_boxes = sum(len(t["labels"]) for t in targets)
            src_logits = outputs["pred_logits"]
            idx = self._get_src_permutation_idx(indices)
            target_classes_o = lib.cat([t["labels"][J] for t, (_, J) in zip(targets, indices)])
            target_classes = lib.full(src_logits.shape[:2], self.num_classes,
                                      dtype=lib.int64, device=src_logits.device)
            target_classes[idx] = target_classes_o
            loss_ce = F.cross_entropy(src_logits.transpose(1, 2), target_classes,
                                      self.empty_weight)
            src_boxes = outputs["pred_boxes"][idx]
            target_boxes = lib.cat([t["boxes"][i] for t, (_, i) in zip(targets, indices)], dim=0)
            loss_bbox = F.l1_loss(src_boxes, target_boxes, reduction="none").sum() / num_boxes
            loss_giou = (1 - lib.diag(generalized_box_iou(
                box_cxcywh_to_xyxy(src_boxes), box_cxcywh_to_xyxy(target_boxes)))).sum() / num_boxes
            return loss_ce + 5 * loss_bbox + 2 * loss_giou

    model = DETR(n_cls, n_q, d)
    criterion = SetCriterion(n_cls, eos_coef=0.1)
    param_dicts = [
        {"params": [p for n, p in model.named_parameters() if "backbone" not in n]},
        {"params": [p for n, p in model.named_parameters() if "backbone" in n], "lr": 1e-5}]
    opt = lib.optim.AdamW(param_dicts, lr=1e-4, weight_decay=1e-4)
    rng = np.random.RandomState(1)
    dtype = lib.get_default_dtype()     # (the tests run it in float64)
    images = lib.tensor(rng.rand(batch, 3, size, size).astype(np.float32)).to(dtype)
    targets = []
    for _ in range(batch):
        c = rng.uniform(0.25, 0.75, (n_tgt, 2))
        wh = rng.uniform(0.1, 0.4, (n_tgt, 2))
        targets.append({"labels": lib.tensor(rng.randint(0, n_cls, n_tgt)),
                        "boxes": lib.tensor(np.concatenate([c, wh], 1).astype(np.float32)
                                            ).to(dtype)})

    def loss():
        return criterion(model(images), targets)
    return model, opt, loss, {"clip": 0.1}


def _neuralproc(lib, small):
    # (deepmind/neural-processes' latent-variable NP as its PyTorch ports write it: a
    # deterministic path's mean representation, a latent path's Normal; ELBO with the KL of the
    # target posterior to the context posterior)
    nn, F = lib.nn, lib.nn.functional
    Normal = lib.distributions.Normal
    kl_divergence = lib.distributions.kl_divergence
    batch, n_ctx, n_tgt, h, z_dim = (3, 5, 8, 16, 4) if small else (32, 20, 50, 128, 64)

    def mlp(sizes):
        layers = []
        for i in range(len(sizes) - 1):
            layers.append(nn.Linear(sizes[i], sizes[i + 1]))
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers)

    class DeterministicEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp([2, h, h, h])

        def forward(self, x, y):
            return self.net(lib.cat([x, y], dim=-1)).mean(dim=1)

    class LatentEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp([2, h, h])
            self.penultimate = nn.Linear(h, (h + z_dim) // 2)
            self.mean = nn.Linear((h + z_dim) // 2, z_dim)
            self.log_var = nn.Linear((h + z_dim) // 2, z_dim)

        def forward(self, x, y):
            hidden = self.net(lib.cat([x, y], dim=-1)).mean(dim=1)
            hidden = F.relu(self.penultimate(hidden))
            mu = self.mean(hidden)
            sigma = 0.1 + 0.9 * lib.sigmoid(self.log_var(hidden))
            return Normal(mu, sigma)

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp([h + z_dim + 1, h, h, 2])

        def forward(self, r, z, target_x):
            n = target_x.size(1)
            rep = lib.cat([r, z], dim=-1).unsqueeze(1).expand(-1, n, -1)
            out = self.net(lib.cat([rep, target_x], dim=-1))
            mu, log_sigma = out.chunk(2, dim=-1)
            sigma = 0.1 + 0.9 * F.softplus(log_sigma)
            return Normal(mu, sigma)

    class LatentModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.det = DeterministicEncoder()
            self.lat = LatentEncoder()
            self.dec = Decoder()

        def forward(self, context_x, context_y, target_x, target_y):
            prior = self.lat(context_x, context_y)
            posterior = self.lat(target_x, target_y)
            z = posterior.rsample()
            r = self.det(context_x, context_y)
            dist = self.dec(r, z, target_x)
            log_p = dist.log_prob(target_y).sum(dim=-1).mean(dim=1)
            kl = kl_divergence(posterior, prior).sum(dim=-1)
            return -(log_p - kl / n_tgt).mean()

    model = LatentModel()
    opt = lib.optim.Adam(model.parameters(), lr=1e-4)
    rng = np.random.RandomState(1)
    xs = rng.uniform(-2, 2, (batch, n_tgt, 1))
    amp, phase = rng.uniform(0.5, 2, (batch, 1, 1)), rng.uniform(0, np.pi, (batch, 1, 1))
    ys = amp * np.sin(xs + phase) + 0.05 * rng.randn(batch, n_tgt, 1)
    tx, ty = lib.tensor(xs.astype(np.float32)), lib.tensor(ys.astype(np.float32))
    cx, cy = tx[:, :n_ctx], ty[:, :n_ctx]

    def loss():
        return model(cx, cy, tx, ty)
    return model, opt, loss


if __name__ == "__main__":
    import untuned_models_eleventh
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    chosen = args[0].split(",") if args else list(NAMES)
    if "-h" in sys.argv or "--help" in sys.argv or set(chosen) - set(NAMES):
        sys.exit(__doc__ + f"\n\nmodels: {', '.join(NAMES)}")
    os.environ.setdefault("LLGRAD_COMPILE", "sync")     # (read when llgrad is imported)
    os.environ.setdefault("LLGRAD_NUM_THREADS", "1")
    untuned_models_eleventh.main(chosen, "--torch-compile" in sys.argv, build=build,
                                 raw=None, jax_models=types.SimpleNamespace(NAMES=()))
